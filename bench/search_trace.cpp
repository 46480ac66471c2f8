// Which of the portfolio's searches found what, on a recorded space: the portfolio run over the
// recorded configurations for each seed, the job's default measured first (as `run` does), each
// proposal measured once `--look-ahead` proposals are in flight (1: one at a time; the stream's
// compile times are not simulated: `gputune replay` scores the search as `run` streams it). Prints,
// per seed, the measurements until the best is within the tolerance and which search proposed the
// one that got there; then per search its proposals before that point and how many of them were new
// bests. `--show SEED` prints that seed's whole trajectory (search, configuration, time / optimum).
// Usage: search_trace [--seeds N] [--look-ahead K] [--within PCT] [--show SEED]
//          [--set key=value (bench/portfolio_settings.h)]... JOB FILE
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/portfolio_settings.h"
#include "tuner/common/tuning_job.h"
#include "tuner/search/portfolio.h"
#include "tuner/tools/replay.h"
#include "variants/space.h"

using namespace gputune;

int main(int argc, char** argv) {
  int seeds = 100, show = -1;
  std::size_t look_ahead = 1;
  double within = 1.05;
  tuner::PortfolioSettings p;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::atoi(argv[++i]);
    } else if (a == "--within" && i + 1 < argc) {
      within = 1 + std::atof(argv[++i]) / 100;
    } else if (a == "--look-ahead" && i + 1 < argc) {
      look_ahead = static_cast<std::size_t>(std::atoi(argv[++i]));
    } else if (a == "--show" && i + 1 < argc) {
      show = std::atoi(argv[++i]);
    } else if (a == "--set" && i + 1 < argc) {
      if (!bench::set_portfolio(p, argv[++i])) {
        std::cerr << "unknown setting " << argv[i] << "\n";
        return 2;
      }
    } else {
      files.push_back(a);
    }
  }
  if (files.size() != 2) {
    std::cerr << "usage: search_trace [--seeds N] [--within PCT] [--show SEED] JOB FILE\n";
    return 2;
  }
  const Job job = tuner::load_tuning_job(files[0]);
  const Space space = build_space(job);
  const auto rec = tuner::read_measurements(files[1], space);
  std::vector<Config> configs;
  std::vector<std::optional<double>> time;
  std::optional<std::size_t> def;
  double optimum = INFINITY;
  const std::string dk = default_key(job);
  for (std::size_t i = 0; i < space.size(); ++i) {
    const Config c = space.config(i);
    auto it = rec.find(c.key());
    if (it == rec.end()) continue;
    if (c.key() == dk) def = configs.size();
    configs.push_back(c);
    time.push_back(it->second.time_ms);
    if (it->second.time_ms) optimum = std::min(optimum, *it->second.time_ms);
  }
  std::map<std::string, std::pair<double, double>> before;  // search: proposals, new bests
  std::map<std::string, int> found_by;
  double failures = 0;  // measured before the tolerance was reached, over all seeds
  std::vector<double> to;
  for (int seed = 1; seed <= seeds; ++seed) {
    tuner::Portfolio s(configs, static_cast<std::uint64_t>(seed), p);
    double best = INFINITY;
    std::size_t n = 0;
    std::string finder = "default";
    auto measure = [&](std::size_t i, const std::string& by) {
      ++n;
      const bool fresh = time[i] && *time[i] < best;
      if (fresh) best = *time[i];
      if (seed == show)
        std::cout << std::setw(4) << n << " " << std::setw(13) << by << " " << std::setw(24)
                  << configs[i].key() << " "
                  << (time[i] ? std::to_string(*time[i] / optimum) : std::string("failed"))
                  << (fresh ? "  new best" : "") << "\n";
      if (best > optimum * within) {
        auto& b = before[by];
        b.first += 1, b.second += fresh;
        failures += !time[i];
      } else if (finder == "default") {
        finder = by;
      }
      s.report(i, time[i]);
    };
    if (def) measure(*def, "default");
    // Proposals in flight (the stream's look-ahead): each is measured once look_ahead are.
    std::deque<std::size_t> flying;
    while (best > optimum * within) {
      while (flying.size() < look_ahead)
        if (auto i = s.next())
          flying.push_back(*i);
        else
          break;
      if (flying.empty()) break;
      const std::size_t i = flying.front();
      flying.pop_front();
      measure(i, tuner::Portfolio::search_name(s.proposed_by(i)));
      if (seed == show && n >= 400) break;
    }
    to.push_back(static_cast<double>(n));
    ++found_by[finder];
  }
  std::sort(to.begin(), to.end());
  std::cout << "to " << (within - 1) * 100 << "%: median " << to[to.size() / 2] << ", p90 "
            << to[static_cast<std::size_t>(0.9 * static_cast<double>(to.size() - 1) + 0.5)]
            << " over " << seeds << " seeds; " << failures / seeds
            << " failures a seed before it\n";
  for (auto& [k, v] : before)
    std::cout << "  " << std::setw(13) << k << ": " << std::setw(6) << v.first / seeds
              << " proposals a seed before, " << v.second / seeds << " new bests; found it in "
              << found_by[k] << " seeds\n";
}
