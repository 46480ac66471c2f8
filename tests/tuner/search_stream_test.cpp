#include "tuner/search/search_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "pruner/model.h"
#include "tuner/search/portfolio.h"

namespace gputune::tuner {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The stream asks the strategy for no more than the look-ahead before outcomes come back, and
// asks again only once an outcome is reported.
TEST(SearchStream, TheLookAheadBoundsWhatIsAskedForBeforeOutcomesAreKnown) {
  auto s = make_brute_force(100);
  SearchStream::Settings settings;
  settings.look_ahead = 4;
  SearchStream stream(*s, nullptr, settings);
  std::vector<size_t> asked;
  while (auto p = stream.next_to_compile()) asked.push_back(*p);
  EXPECT_EQ(asked, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(stream.in_flight(), 4u);
  EXPECT_FALSE(stream.next_to_measure()) << "nothing is compiled yet";
  EXPECT_TRUE(stream.compiled(0, true, kNaN, false));
  // Compiled and not measured still counts against the look-ahead.
  EXPECT_FALSE(stream.next_to_compile());
  ASSERT_EQ(stream.next_to_measure(), std::optional<size_t>(0));
  stream.measured(0, 1.0);
  EXPECT_EQ(stream.next_to_compile(), std::optional<size_t>(4));
  EXPECT_FALSE(stream.next_to_compile());
  EXPECT_FALSE(stream.done());
}

// A slow compile does not hold back what compiled after it: ready cubins are measured in the
// order they became ready.
TEST(SearchStream, ReadyConfigurationsAreMeasuredInTheOrderTheyCompiled) {
  auto s = make_brute_force(10);
  SearchStream::Settings settings;
  settings.look_ahead = 3;
  SearchStream stream(*s, nullptr, settings);
  while (stream.next_to_compile()) {
  }
  stream.compiled(2, true, kNaN, false);
  stream.compiled(1, true, kNaN, false);
  EXPECT_EQ(stream.next_to_measure(), std::optional<size_t>(2));
  EXPECT_EQ(stream.next_to_measure(), std::optional<size_t>(1));
  EXPECT_FALSE(stream.next_to_measure()) << "0 is still compiling";
}

// The budget counts measurements (a failed one too); what compiled but cannot be launched (it
// did not compile, a rule pruned it) is not one; the stream stops exactly at the budget and asks
// for no more than the budget and those.
TEST(SearchStream, TheBudgetIsMeasuredExactlyAndOnlyMeasurementsCountAgainstIt) {
  auto s = make_brute_force(1000);
  SearchStream::Settings settings;
  settings.look_ahead = 8;
  settings.budget = 25;
  SearchStream stream(*s, nullptr, settings);
  stream.add_measured(999, 1.0);  // the default, measured before the stream
  size_t measured = 1, asked = 0, unusable = 0;
  std::mt19937 rng(7);
  std::vector<size_t> compiling;
  while (!stream.done()) {
    while (auto p = stream.next_to_compile()) compiling.push_back(*p), ++asked;
    ASSERT_LE(stream.measurements() + stream.in_flight(), 25u);
    ASSERT_LE(stream.in_flight(), 8u);
    if (auto p = stream.next_to_measure()) {
      stream.measured(*p, *p % 5 ? std::optional<double>(1.0) : std::nullopt);
      ++measured;
      continue;
    }
    ASSERT_FALSE(compiling.empty());
    // Compiles finish in any order; one in seven does not compile.
    std::uniform_int_distribution<size_t> pick(0, compiling.size() - 1);
    const size_t k = pick(rng);
    const size_t p = compiling[k];
    compiling.erase(compiling.begin() + static_cast<long>(k));
    const bool usable = p % 7 != 3;
    unusable += !usable;
    stream.compiled(p, usable, kNaN, false);
  }
  EXPECT_GT(unusable, 0u);
  EXPECT_EQ(measured, 25u);
  EXPECT_EQ(stream.measurements(), 25u);
  EXPECT_EQ(asked, 24u + unusable) << "nothing compiled beyond the budget";
}

// Under model_guided, rule 4 holds back, without compiling it, every configuration whose best
// case can no longer come within the margin of the best compiled prediction: it falls as
// configurations compile. A hold is only ever of what a whole-space rule 4 would prune.
TEST(SearchStream, Rule4HoldsBackWhatCanNoLongerComeWithinTheMargin) {
  // Memory-bound variants whose best case is their prediction (their occupancy is not known).
  pruner::DeviceRates d;
  d.sm_count = 100, d.clock_ghz = 1.5, d.dram_gbs = 1000, d.fp32_gflops = 20000, d.l2_gbs = 7200;
  std::vector<pruner::ModelFeatures> fs;
  std::vector<double> best_case;
  for (int i = 0; i < 40; ++i) {
    pruner::ModelFeatures f;
    f.ok = true;
    f.compulsory_bytes = f.sectors = 1e6 * (1 + i);
    f.sectors /= 32;
    f.blocks = 100000, f.warps_per_block = 8, f.blocks_per_sm = 8, f.active_warps = 64;
    fs.push_back(f);
    best_case.push_back(pruner::best_case(f, d, {}, 8).ms);
  }
  ModelGuided g(fs, d, {}, {}, {}, 0, std::vector<int>(fs.size(), 8));
  g.hold_back(std::vector<size_t>{}, 2.0);
  SearchStream::Settings settings;
  settings.look_ahead = 2;
  settings.margin = 2.0;
  settings.best_case = best_case;
  SearchStream stream(g, &g, settings);
  // The best case is ordered first: 0, then 1; compiled, 0's real prediction is its best case.
  EXPECT_EQ(stream.next_to_compile(), std::optional<size_t>(0));
  EXPECT_EQ(stream.next_to_compile(), std::optional<size_t>(1));
  EXPECT_TRUE(stream.compiled(0, true, best_case[0], true));
  EXPECT_DOUBLE_EQ(stream.best_prediction(), best_case[0]);
  // Everything predicted beyond 2x the best is held back (1 is in flight: judged when back).
  std::set<size_t> held;
  for (size_t i = 0; i < fs.size(); ++i)
    if (g.held_back(i)) held.insert(i);
  for (size_t i = 2; i < fs.size(); ++i)
    EXPECT_EQ(held.count(i) == 1, best_case[i] > 2.0 * best_case[0]) << i;
  for (size_t i : held) EXPECT_GT(best_case[i], 2.0 * stream.best_prediction()) << i;
  // 1 comes back slower than its best case, beyond the margin: rule 4 drops it on its real
  // prediction, and it is not measured.
  EXPECT_FALSE(stream.compiled(1, true, 2.5 * best_case[0], true));
  EXPECT_TRUE(g.held_back(1));
  const auto& dropped = stream.dropped_by_model();
  EXPECT_NE(std::find(dropped.begin(), dropped.end(), 1u), dropped.end());
}

// Strategies without feedback measure everything rule 4 keeps: with `exact`, a compiled
// configuration is measured only once rule 4 surely keeps it, so whatever order compiles finish
// in, the measured set is the one rule 4 keeps over the whole plan compiled.
TEST(SearchStream, ExactRule4MeasuresWhatTheWholePlanKeepsInAnyCompileOrder) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t n = 60;
    std::vector<double> best_case(n), real(n);
    std::uniform_real_distribution<double> u(1.0, 4.0), worse(1.0, 1.6);
    for (size_t i = 0; i < n; ++i) best_case[i] = u(rng), real[i] = best_case[i] * worse(rng);
    const double margin = 1.3;
    const double best = *std::min_element(real.begin(), real.end());
    std::set<size_t> keeps;
    for (size_t i = 0; i < n; ++i)
      if (real[i] <= margin * best) keeps.insert(i);
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return best_case[a] < best_case[b]; });
    auto s = make_list(order);
    SearchStream::Settings settings;
    settings.look_ahead = 1 + trial % 6;
    settings.margin = margin;
    settings.best_case = best_case;
    settings.exact = true;
    SearchStream stream(*s, nullptr, settings);
    std::set<size_t> measured;
    std::vector<size_t> compiling;
    while (!stream.done()) {
      while (auto p = stream.next_to_compile()) compiling.push_back(*p);
      if (auto p = stream.next_to_measure()) {
        measured.insert(*p);
        stream.measured(*p, real[*p]);
        continue;
      }
      if (compiling.empty()) {  // the strategy ran dry just now
        ASSERT_TRUE(stream.done());
        break;
      }
      std::uniform_int_distribution<size_t> pick(0, compiling.size() - 1);
      const size_t k = pick(rng);
      const size_t p = compiling[k];
      compiling.erase(compiling.begin() + static_cast<long>(k));
      stream.compiled(p, true, real[p], true);
    }
    EXPECT_EQ(measured, keeps) << "trial " << trial;
    EXPECT_DOUBLE_EQ(stream.best_prediction(), best);
  }
}

/// Every combination of a, b and c's values (30 configurations).
std::vector<Config> configurations() {
  auto names =
      std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"a", "b", "c"});
  std::vector<Config> out;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) out.push_back(Config{names, {Value(a), Value(b), Value(c)}});
  return out;
}

// A look-ahead of 1 is the search without streaming: each outcome is known before the next
// configuration is asked for, so replay's simulation gives the order next()/report() gives
// (here a search that learns each parameter value's effect from the measured times).
TEST(SearchStream, ALookAheadOfOneIsTheSequentialSearch) {
  const std::vector<Config> none = configurations();
  std::vector<double> truth(none.size());
  for (size_t i = 0; i < truth.size(); ++i)
    truth[i] = (1.0 + static_cast<double>(i / 6)) * (1.0 + 0.5 * static_cast<double>(i % 2)) +
               0.01 * static_cast<double>((i * 7) % 5);
  ModelGuided sequential(std::vector<pruner::ModelFeatures>(truth.size()), {}, {}, {}, none, 3);
  std::vector<size_t> expected;
  for (auto i = sequential.next(); i; i = sequential.next()) {
    expected.push_back(*i);
    sequential.report(*i, truth[*i]);
  }
  ModelGuided streamed(std::vector<pruner::ModelFeatures>(truth.size()), {}, {}, {}, none, 3);
  SearchStream::Settings settings;
  settings.look_ahead = 1;
  SearchStream stream(streamed, &streamed, settings);
  const std::vector<size_t> order = simulate_stream(
      stream,
      [](size_t) {
        return CompileVerdict{true, kNaN, false};
      },
      [&](size_t i) { return std::optional<double>(truth[i]); });
  EXPECT_EQ(order, expected);
  ASSERT_NE(sequential.explorer(), nullptr);
  EXPECT_GT(sequential.explorer()->proposals_by_search()[0], 0u)
      << "the portfolio's surrogate, fitted to the times, proposed some";
}

// Stopped (Ctrl-C, the time budget), the stream is done at once and hands out nothing more.
TEST(SearchStream, AStoppedStreamIsDoneAndProposesNothing) {
  auto s = make_brute_force(10);
  SearchStream stream(*s, nullptr, {});
  ASSERT_TRUE(stream.next_to_compile());
  stream.compiled(0, true, kNaN, false);
  stream.stop();
  EXPECT_TRUE(stream.done());
  EXPECT_FALSE(stream.next_to_compile());
  EXPECT_FALSE(stream.next_to_measure());
}

}  // namespace
}  // namespace gputune::tuner
