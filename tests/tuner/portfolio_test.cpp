#include "tuner/search/portfolio.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>

#include "tuner/search/forest.h"

namespace gputune::tuner {
namespace {

std::vector<Config> grid(const std::vector<std::string>& names,
                         const std::vector<std::vector<Value>>& values) {
  auto n = std::make_shared<const std::vector<std::string>>(names);
  std::vector<Config> out{Config{n, {}}};
  for (const auto& vs : values) {
    std::vector<Config> next;
    for (const Config& c : out)
      for (const Value& v : vs) {
        Config d = c;
        d.values.push_back(v);
        next.push_back(d);
      }
    out = std::move(next);
  }
  return out;
}

std::vector<Value> range(int n, int step = 1) {
  std::vector<Value> v;
  for (int i = 0; i < n; ++i) v.emplace_back(i * step);
  return v;
}

// A forest learns an interaction an additive model cannot (x is fast only with y = 0) and a
// threshold; its spread is larger away from what it saw.
TEST(Forest, LearnsAnInteractionAndAThreshold) {
  std::vector<std::uint32_t> x;
  std::vector<double> y;
  std::mt19937_64 rng(1);
  auto truth = [](std::uint32_t a, std::uint32_t b) {
    return (a == 3 && b == 0 ? -2.0 : 0.0) + (a >= 6 ? 1.0 : 0.0);
  };
  for (std::uint32_t a = 0; a < 8; ++a)
    for (std::uint32_t b = 0; b < 4; ++b) x.insert(x.end(), {a, b}), y.push_back(truth(a, b));
  Forest f({8, 4});
  f.fit(x, y, rng);
  ASSERT_TRUE(f.fitted());
  std::uint32_t best[2] = {0, 0};
  double low = INFINITY;
  for (std::uint32_t a = 0; a < 8; ++a)
    for (std::uint32_t b = 0; b < 4; ++b) {
      const std::uint32_t row[2] = {a, b};
      const double m = f.predict(row).mean;
      EXPECT_NEAR(m, truth(a, b), 0.75) << a << "," << b;
      if (m < low) low = m, best[0] = a, best[1] = b;
    }
  EXPECT_EQ(best[0], 3u);
  EXPECT_EQ(best[1], 0u);
}

// Every configuration once, never what was excluded, taken by another search, or refused by the
// filter; the same seed the same order, another seed another.
TEST(Portfolio, ProposesEachAllowedConfigurationOnce) {
  const auto configs = grid({"a", "b", "c"}, {range(6), range(5, 32), {Value(0), Value(1)}});
  auto order = [&](std::uint64_t seed) {
    Portfolio p(configs, seed);
    p.exclude({1, 2});
    p.taken(7);
    p.set_filter([](size_t i) { return i != 11; });
    p.report(0, 5.0);  // the default, measured first
    std::vector<size_t> out;
    for (auto i = p.next(); i; i = p.next()) {
      out.push_back(*i);
      p.report(*i, 1.0 + static_cast<double>((*i * 37) % 11));
    }
    return out;
  };
  const auto a = order(1);
  EXPECT_EQ(a.size(), configs.size() - 5);
  const std::set<size_t> seen(a.begin(), a.end());
  EXPECT_EQ(seen.size(), a.size());
  for (size_t never : {0, 1, 2, 7, 11}) EXPECT_FALSE(seen.count(never)) << never;
  EXPECT_EQ(a, order(1));
  EXPECT_NE(a, order(2));
}

// A landscape the values' effects alone do not explain (a block shape fast only with one tile,
// two methods good only together, a failing corner), of 3,600 configurations: the portfolio gets
// within 5% of the optimum in a small fraction of what random search needs, on every seed, and
// each of its searches proposes.
TEST(Portfolio, FindsTheFastestFarSoonerThanRandomSearch) {
  const auto configs =
      grid({"bs", "tile", "m1", "m2"}, {range(15, 32), range(10), range(4), range(6)});
  auto time = [&](size_t i) -> std::optional<double> {
    const auto& v = configs[i].values;
    const auto bs = v[0].as_int() / 32, tile = v[1].as_int(), m1 = v[2].as_int(),
               m2 = v[3].as_int();
    if (bs >= 12 && tile >= 8) return std::nullopt;  // too many registers: fails
    double t = 1 + 0.05 * std::abs(static_cast<double>(bs - 9)) + 0.1 * std::abs(tile - 6.0);
    if (bs == 9 && tile == 6) t -= 0.6;
    t *= (m1 == 2 && m2 == 4) ? 0.7 : (m1 == 2 || m2 == 4 ? 1.2 : 1.0);
    return t * (1 + 0.01 * static_cast<double>((i * 7919) % 5));
  };
  double optimum = INFINITY;
  size_t within = 0;
  for (size_t i = 0; i < configs.size(); ++i)
    if (auto t = time(i)) optimum = std::min(optimum, *t);
  for (size_t i = 0; i < configs.size(); ++i)
    if (auto t = time(i); t && *t <= optimum * 1.05) ++within;
  ASSERT_LE(within, 4u);  // random search needs about 3,600 / 5 = 720 draws
  std::vector<size_t> needed;
  std::vector<size_t> uses(5, 0);
  for (std::uint64_t seed = 1; seed <= 15; ++seed) {
    Portfolio p(configs, seed);
    size_t k = 0;
    for (auto i = p.next(); i; i = p.next()) {
      ++k;
      const auto t = time(*i);
      p.report(*i, t);
      if (t && *t <= optimum * 1.05) break;
    }
    needed.push_back(k);
    for (size_t a = 0; a < uses.size(); ++a) uses[a] += p.proposals_by_search()[a];
  }
  std::sort(needed.begin(), needed.end());
  EXPECT_LE(needed[needed.size() / 2], 150u) << "median over 15 seeds";
  EXPECT_LE(needed.back(), 500u) << "the worst seed";
  for (int a : {0, 1, 2, 4})
    EXPECT_GT(uses[static_cast<size_t>(a)], 0u) << Portfolio::search_name(a);
}

// After the start, each search proposes its share (PortfolioSettings::Shares), whatever its
// proposals found: none is starved or takes over. (Recombination falls back to a local move
// where the fastest few hold no combination left to try, so the two share their shares.)
TEST(Portfolio, EachSearchProposesItsShare) {
  const auto configs = grid({"a", "b", "c"}, {range(40), range(20), range(10)});
  Portfolio p(configs, 5);
  std::size_t proposed = 0;
  for (auto i = p.next(); i && proposed < 1200; i = p.next(), ++proposed)
    p.report(*i, 1.0 + static_cast<double>((*i * 7919) % 101) / 100);
  const auto& uses = p.proposals_by_search();
  auto share = [&](std::size_t arm) {
    return static_cast<double>(uses[arm]) / static_cast<double>(proposed);
  };
  const PortfolioSettings::Shares want;
  const double total = want.surrogate + want.local + want.random + want.recombination;
  EXPECT_NEAR(share(0), want.surrogate / total, 0.04) << "surrogate";
  EXPECT_NEAR(share(2), want.random / total, 0.04) << "random (the start's among them)";
  EXPECT_NEAR(share(1) + share(4), (want.local + want.recombination) / total, 0.04)
      << "local and recombination";
  EXPECT_GT(share(4), 0.02) << "recombination";
  EXPECT_EQ(uses[3], 0u) << "no model order without predictions";
}

// A plateau next to the best and the fastest configuration away from it, in a corner whose other
// configurations are slow (the benchmark hub's convolution on a W6600: without shared memory the
// kernel is 90x slower, except in one corner that beats the plateau of the others by 20%): a
// local search on the plateau beats most of what was measured and never the optimum, and holds
// no more than its share.
TEST(Portfolio, APlateauDoesNotHoldTheSearch) {
  const auto configs =
      grid({"bx", "by", "tile", "shmem"}, {range(16, 16), range(5), range(4), range(2)});
  auto time = [&](size_t i) -> std::optional<double> {
    const auto& v = configs[i].values;
    const auto bx = v[0].as_int() / 16, by = v[1].as_int(), tile = v[2].as_int(),
               shmem = v[3].as_int();
    const double noise = 1 + 0.004 * static_cast<double>((i * 7919) % 7);
    if (shmem == 1) return (1.2 + 0.02 * std::abs(by - 2) + 0.03 * std::abs(tile - 1)) * noise;
    if (by == 0 && tile == 3) return (bx % 2 == 0 ? 1.0 : 1.5) * noise;  // the corner
    return 30.0 * noise;
  };
  double optimum = INFINITY;
  size_t within = 0;
  for (size_t i = 0; i < configs.size(); ++i) optimum = std::min(optimum, *time(i));
  for (size_t i = 0; i < configs.size(); ++i) within += *time(i) <= optimum * 1.05;
  ASSERT_EQ(within, 8u);
  std::vector<size_t> needed;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Portfolio p(configs, seed);
    size_t k = 0;
    for (auto i = p.next(); i; i = p.next()) {
      ++k;
      const auto t = time(*i);
      p.report(*i, t);
      if (t && *t <= optimum * 1.05) break;
    }
    needed.push_back(k);
  }
  std::sort(needed.begin(), needed.end());
  // 8 of 640 are within 5%. Over these 20 seeds random search needs a median of 56, the
  // portfolio 126 (p90 348), the bandit over the same searches it replaced 259 (p90 440): next
  // to the best of the plateau the local search beat most of what was measured, so the bandit
  // kept proposing there. With fixed shares the plateau holds the local and recombining searches'
  // share alone. (Worse than random search here still: the surrogate, too, learns that without
  // shared memory the kernel is slow, so random search finds the corner.)
  EXPECT_LE(needed[needed.size() / 2], 160u) << "median over 20 seeds";
  EXPECT_LE(needed[needed.size() * 9 / 10], 400u) << "p90 over 20 seeds";
}

// With the model's predictions, its order starts the search (the first two proposals) and the
// prediction is a feature of the surrogate: a right model gets there at once.
TEST(Portfolio, ARightModelsOrderStartsIt) {
  const auto configs = grid({"a", "b"}, {range(20), range(20)});
  std::vector<double> predicted(configs.size());
  for (size_t i = 0; i < configs.size(); ++i)
    predicted[i] = 1 + static_cast<double>((i * 13) % 400);
  const size_t best =
      static_cast<size_t>(std::min_element(predicted.begin(), predicted.end()) - predicted.begin());
  Portfolio p(configs, 3);
  p.set_predictions(predicted);
  p.use_prediction_order(true);
  const auto first = p.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, best);
  EXPECT_EQ(p.proposed_by(best), 3) << Portfolio::search_name(p.proposed_by(best));
}

}  // namespace
}  // namespace gputune::tuner
