// The portfolio search's settings on recorded spaces: `gputune replay`'s figures for portfolio
// (and random, for reference) with settings given on the command line, so that a setting is
// judged on every space at once (and on held-out ones) before it becomes a default.
// Usage: search_bench [--seeds N] [--set key=value]... JOB MEASUREMENTS [JOB MEASUREMENTS]...
// Keys: initial, random_floor, window, explore, pool, refit_growth, elites, trees, min_leaf,
// features_tried, bootstrap, arms.
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "tuner/replay.h"
#include "tuner/tuning_job.h"

using namespace gputune;

int main(int argc, char** argv) {
  tuner::ReplayOptions o;
  o.seeds = 50;
  o.within = {1.05};
  o.score = true;
  o.strategies = {"random", "portfolio"};
  std::vector<std::pair<std::string, std::string>> spaces;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      o.seeds = std::atoi(argv[++i]);
    } else if (a == "--look-ahead" && i + 1 < argc) {
      o.look_ahead = static_cast<size_t>(std::atoi(argv[++i]));
    } else if (a == "--workers" && i + 1 < argc) {
      o.compile_workers = static_cast<size_t>(std::atoi(argv[++i]));
    } else if (a == "--trajectories" && i + 1 < argc) {
      o.trajectories = argv[++i];
      o.within = {1.01, 1.05, 1.10};
    } else if (a == "--only" && i + 1 < argc) {
      o.strategies = {argv[++i]};
    } else if (a == "--set" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      const std::string k = kv.substr(0, eq);
      const double v = std::atof(kv.c_str() + eq + 1);
      auto& p = o.portfolio;
      if (k == "initial")
        p.initial = static_cast<size_t>(v);
      else if (k == "random_floor")
        p.random_floor = v;
      else if (k == "window")
        p.window = static_cast<size_t>(v);
      else if (k == "explore")
        p.explore = v;
      else if (k == "pool")
        p.pool = static_cast<size_t>(v);
      else if (k == "refit_growth")
        p.refit_growth = v;
      else if (k == "elites")
        p.elites = static_cast<size_t>(v);
      else if (k == "trees")
        p.forest.trees = static_cast<size_t>(v);
      else if (k == "min_leaf")
        p.forest.min_leaf = static_cast<size_t>(v);
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
      else if (k == "reward")
        p.reward = static_cast<int>(v);
      else {
        std::cerr << "unknown setting " << k << "\n";
        return 2;
      }
    } else if (i + 1 < argc) {
      spaces.emplace_back(a, argv[i + 1]);
      ++i;
    }
  }
  double sum_ratio = 0, sum_score = 0;
  for (auto& [job_file, file] : spaces) {
    const Job job = tuner::load_tuning_job(job_file);
    const tuner::ReplayReport r = tuner::replay(job, file, o);
    std::cout << job_file << "\n";
    double random_median = 0;
    for (const auto& s : r.strategies) {
      std::cout << "  " << std::left << std::setw(10) << s.strategy << " to 5% " << std::setw(6)
                << s.median_to[0] << " p90 " << std::setw(6) << s.p90_to[0] << " score "
                << std::fixed << std::setprecision(3) << s.score_measurements << " / "
                << s.score_time << std::defaultfloat << "\n";
      if (s.strategy == "random") random_median = s.median_to[0];
      if (s.strategy == "portfolio") {
        sum_ratio += s.median_to[0] / random_median;
        sum_score += s.score_time;
      }
    }
  }
  std::cout << "mean portfolio/random to 5%: " << sum_ratio / static_cast<double>(spaces.size())
            << ", mean score over time " << sum_score / static_cast<double>(spaces.size()) << "\n";
}
