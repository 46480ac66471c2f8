// The model's search of a space too large to analyse whole (tuner/model/space_search.h), scored
// against the whole space's best cases: for each limit of analyses, how long the search took, the
// best case it found, and where that stands among the best cases of every configuration (computed
// here by analysing the whole space, which is what the search avoids). No GPU: best cases are
// the model's, from the source alone, for DEVICE (configs/devices); whether they are the
// measured optimum needs a GPU.
//
// Usage: model_search_bench JOB DEVICE CACHE_DIR LIMIT... [--no-whole] [--single-moves]
//   --no-whole: skip the whole-space truth (only the searches' own figures)
//   --single-moves: no moves of two parameters at once (ModelSearchOptions::coupled_moves), to
//                   measure what they add
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "pruner/device_spec.h"
#include "tuner/common/tuning_job.h"
#include "tuner/measure/arguments.h"
#include "tuner/model/compile_screen.h"
#include "tuner/model/space_search.h"

using namespace gputune;
using namespace gputune::tuner;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s JOB DEVICE CACHE_DIR LIMIT... [--no-whole] [--single-moves]\n",
                 argv[0]);
    return 2;
  }
  bool whole = true, coupled = true;
  std::vector<std::size_t> limits;
  for (int a = 4; a < argc; ++a) {
    if (std::string(argv[a]) == "--no-whole")
      whole = false;
    else if (std::string(argv[a]) == "--single-moves")
      coupled = false;
    else
      limits.push_back(static_cast<std::size_t>(std::stoull(argv[a])));
  }
  const Job job = load_tuning_job(argv[1]);
  const std::string source = load_kernel_source(job);
  const Space space = build_space(job);
  const pruner::DeviceSpec spec = pruner::find_device(argv[2]);
  const Rates rates = rates_for_spec(spec);
  const ContextSpec& ctx = job.contexts.front();
  std::printf("job %s, context %s, device %s: %zu configurations\n", argv[1], ctx.name.c_str(),
              spec.name.c_str(), space.size());

  // Each search cold, in a cache folder of its own: its time is what a first run pays.
  struct Row {
    std::size_t limit;
    double s;
    ModelSearch r;
  };
  std::vector<Row> rows;
  for (std::size_t limit : limits) {
    ModelSearchOptions o;
    o.limit = limit;
    o.coupled_moves = coupled;
    const cuda::CubinCache own(std::filesystem::path(argv[3]) / ("limit" + std::to_string(limit)));
    const auto t0 = std::chrono::steady_clock::now();
    ModelSearch r = search_by_model(job, source, space, {&ctx}, spec.limits, rates, {}, own, o);
    rows.push_back({limit, seconds_since(t0), std::move(r)});
    const Row& row = rows.back();
    std::printf(
        "search, limit %zu: %.1f s, %zu chosen (%zu spread, %zu near, %zu of them two parameters "
        "away, %zu rounds), best case %.4f ms at %s\n",
        limit, row.s, row.r.chosen.size(), row.r.spread, row.r.near, row.r.coupled, row.r.rounds,
        row.r.best_ms, row.r.best_key.c_str());
    std::fflush(stdout);
  }

  std::vector<double> truth;
  double optimum = INFINITY;
  if (whole) {
    const cuda::CubinCache whole_cache(std::filesystem::path(argv[3]) / "whole");
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t chunk = 20000;
    const ModelArguments args =
        model_arguments(make_arguments(job, ctx, ArgumentContents::SizesOnly));
    for (std::size_t lo = 0; lo < space.size(); lo += chunk) {
      std::vector<Config> configs;
      for (std::size_t i = lo; i < std::min(space.size(), lo + chunk); ++i)
        configs.push_back(space.config(i));
      const std::vector<double> b = best_cases(job, source, configs, ctx, args, spec.limits, rates,
                                               {}, whole_cache, ScreenOptions{});
      truth.insert(truth.end(), b.begin(), b.end());
      std::fprintf(stderr, "\rwhole space: %zu of %zu analysed", truth.size(), space.size());
    }
    std::fprintf(stderr, "\n");
    std::size_t judged = 0;
    for (double t : truth)
      if (t > 0) ++judged, optimum = std::min(optimum, t);
    std::size_t within1 = 0, within5 = 0;
    for (double t : truth) within1 += t <= 1.01 * optimum, within5 += t <= 1.05 * optimum;
    std::printf(
        "whole space: %.1f s to analyse (cache %s); %zu judged; best case %.4f ms; %zu within 1%%, "
        "%zu within 5%%\n",
        seconds_since(t0), argv[3], judged, optimum, within1, within5);
  }

  std::printf(
      "| limit | search s (cold) | chosen | spread | near | of them coupled | rounds | best case "
      "ms "
      "| key |%s\n",
      whole ? " / whole best | configurations better |" : "");
  for (const Row& row : rows) {
    const ModelSearch& r = row.r;
    std::printf("| %zu | %.1f | %zu | %zu | %zu | %zu | %zu | %.4f | %s |", row.limit, row.s,
                r.chosen.size(), r.spread, r.near, r.coupled, r.rounds, r.best_ms,
                r.best_key.c_str());
    if (whole) {
      std::size_t better = 0;
      for (double t : truth) better += t > 0 && t < r.best_ms * (1 - 1e-9);
      std::printf(" %.4f | %zu |", r.best_ms / optimum, better);
    }
    std::printf("\n");
  }
  return 0;
}
