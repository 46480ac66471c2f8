#include "tuner/strategy.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gputune::tuner
