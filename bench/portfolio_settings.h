// The portfolio search's settings by name, for the benchmarks that vary them on the command line
// (search_bench, search_trace): `--set key=value`.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "tuner/search/portfolio.h"

namespace gputune::bench {

/// Sets one setting from "key=value"; false (and nothing set) for an unknown key. Keys: initial,
/// pool, refit_growth, elites, trees, min_leaf, features_tried, bootstrap, arms, acquisition,
/// salt, covering_start, and the searches' shares: surrogate, local, random, recombination, model.
inline bool set_portfolio(tuner::PortfolioSettings& p, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) return false;
  const std::string k = kv.substr(0, eq);
  const double v = std::atof(kv.c_str() + eq + 1);
  if (k == "initial")
    p.initial = static_cast<std::size_t>(v);
  else if (k == "pool")
    p.pool = static_cast<std::size_t>(v);
  else if (k == "refit_growth")
    p.refit_growth = v;
  else if (k == "elites")
    p.elites = static_cast<std::size_t>(v);
  else if (k == "trees")
    p.forest.trees = static_cast<std::size_t>(v);
  else if (k == "min_leaf")
    p.forest.min_leaf = static_cast<std::size_t>(v);
  else if (k == "features_tried")
    p.forest.features_tried = v;
  else if (k == "bootstrap")
    p.forest.bootstrap = v;
  else if (k == "arms")
    p.arms = static_cast<unsigned>(v);
  else if (k == "acquisition")
    p.acquisition = static_cast<int>(v);
  else if (k == "salt")
    p.salt = static_cast<std::uint64_t>(v);
  else if (k == "covering_start")
    p.covering_start = v != 0;
  else if (k == "surrogate")
    p.shares.surrogate = v;
  else if (k == "local")
    p.shares.local = v;
  else if (k == "random")
    p.shares.random = v;
  else if (k == "recombination")
    p.shares.recombination = v;
  else if (k == "model")
    p.shares.model = v;
  else
    return false;
  return true;
}

}  // namespace gputune::bench
