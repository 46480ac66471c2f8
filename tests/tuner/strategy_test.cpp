#include "tuner/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace gputune::tuner {
namespace {

TEST(Strategy, BruteForceVisitsEveryIndexInOrder) {
  auto s = make_brute_force(5);
  EXPECT_EQ(plan(*s, 100), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(Strategy, RandomIsAPermutationAndSeeded) {
  auto a = plan(*make_random(1000, 42), 1000);
  auto b = plan(*make_random(1000, 42), 1000);
  auto c = plan(*make_random(1000, 43), 1000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_NE(a[0] + a[1] + a[2], 0u + 1u + 2u);
}

TEST(Strategy, BudgetLimitsTheNumberOfConfigurations) {
  Budget b;
  EXPECT_EQ(budget_configurations(b, 100), 100u);
  b.max_configurations = 10;
  EXPECT_EQ(budget_configurations(b, 100), 10u);
  b.fraction = 0.05;
  EXPECT_EQ(budget_configurations(b, 100), 5u);
  EXPECT_EQ(plan(*make_random(100, 1), budget_configurations(b, 100)).size(), 5u);
  EXPECT_THROW(make_strategy("genetic", 10, 1), std::invalid_argument);
}

pruner::DeviceRates rates() {
  pruner::DeviceRates d;
  d.sm_count = 100, d.clock_ghz = 1.5, d.dram_gbs = 1000, d.fp32_gflops = 20000, d.l2_gbs = 7200;
  return d;
}

/// Features of a memory-bound kernel moving `bytes`.
pruner::ModelFeatures feature(double bytes) {
  pruner::ModelFeatures f;
  f.ok = true;
  f.compulsory_bytes = bytes;
  f.sectors = bytes / 32;
  f.blocks = 100000, f.warps_per_block = 8, f.blocks_per_sm = 8, f.active_warps = 64;
  return f;
}

TEST(ModelGuided, MeasuresInPredictedOrderAndStopsWhenNothingCanWin) {
  std::vector<pruner::ModelFeatures> fs;
  for (int i = 0; i < 50; ++i) fs.push_back(feature(1e6 * (1 + (i * 37) % 50)));
  pruner::ModelFeatures none;  // not analysed: proposed, never cut
  none.reason = "clang could not parse";
  fs.push_back(none);
  std::vector<bool> excluded(fs.size(), false);
  excluded[3] = true;
  ModelGuided g(fs, rates(), {}, excluded);
  std::vector<size_t> order;
  for (auto i = g.next(); i; i = g.next()) {
    order.push_back(*i);
    // The truth: the model's ranking, 30% slower than predicted, with a little noise.
    double t = *g.predicted_ms(*i) * 1.3 * (1 + 0.01 * static_cast<double>(*i % 3));
    if (fs[*i].ok)
      g.report(*i, pruner::predict(fs[*i], rates(), {}).ms * 1.3 * (1 + 0.01 * (*i % 3)));
    (void)t;
  }
  ASSERT_GE(order.size(), 4u);
  // The first proposal is the fastest prediction: bytes 1e6 at i where (i*37)%50 == 0, i = 0.
  EXPECT_EQ(order[0], 0u);
  EXPECT_LT(order.size(), 20u) << "it should stop long before trying all 50";
  EXPECT_FALSE(g.stop_reason().empty());
  EXPECT_EQ(order.back(), 50u) << "the unpredicted variant is still tried";
  EXPECT_EQ(std::count(order.begin(), order.end(), 3u), 0) << "excluded";
  EXPECT_GE(g.calibration().samples, 4);
  // What it skipped: every remaining predicted variant, for the regret sample.
  auto left = g.unvisited();
  EXPECT_EQ(left.size() + order.size() + 1, fs.size());
}

TEST(ModelGuided, KeepsGoingWhileTheModelIsWrong) {
  // Measured times are the reverse of the predictions: the stop rule must not trust the model.
  std::vector<pruner::ModelFeatures> fs;
  for (int i = 0; i < 30; ++i) fs.push_back(feature(1e6 * (1 + i)));
  ModelGuided g(fs, rates(), {});
  size_t n = 0;
  for (auto i = g.next(); i; i = g.next(), ++n) g.report(*i, 1.0 / (1.0 + static_cast<double>(*i)));
  EXPECT_EQ(n, 30u);
  EXPECT_TRUE(g.stop_reason().empty());
}

}  // namespace
}  // namespace gputune::tuner
