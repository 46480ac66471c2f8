// The portfolio search's settings on recorded spaces: `gputune replay`'s figures for portfolio
// (and random, for reference) with settings given on the command line, so that a setting is
// judged on every space at once (and on held-out ones) before it becomes a default.
// Usage: search_bench [--seeds N] [--set key=value]... JOB MEASUREMENTS [JOB MEASUREMENTS]...
// Keys: bench/portfolio_settings.h.
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "bench/portfolio_settings.h"
#include "tuner/common/tuning_job.h"
#include "tuner/tools/replay.h"

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
      if (!bench::set_portfolio(o.portfolio, argv[++i])) {
        std::cerr << "unknown setting " << argv[i] << "\n";
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
