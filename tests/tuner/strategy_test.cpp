#include "tuner/search/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>

#include "tuner/search/portfolio.h"

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

/// Every combination of the given parameter values, in space order (the first parameter slowest).
std::vector<Config> grid(const std::vector<std::string>& names,
                         const std::vector<std::vector<Value>>& values) {
  auto shared = std::make_shared<const std::vector<std::string>>(names);
  std::vector<Config> out(1, Config{shared, {}});
  for (const auto& vs : values) {
    std::vector<Config> next;
    for (const Config& c : out)
      for (const Value& v : vs) {
        Config d = c;
        d.values.push_back(v);
        next.push_back(std::move(d));
      }
    out = std::move(next);
  }
  return out;
}

TEST(ParameterEffects, RecoverWhatTheModelMissesPerParameterValue) {
  // a=2 runs at half the predicted time, b=y at 1.5 times it; c has one value (nothing to learn).
  auto configs = grid({"a", "b", "c"}, {{1, 2, 3}, {"x", "y"}, {7}});
  ASSERT_EQ(configs.size(), 6u);
  ParameterEffects e(configs);
  EXPECT_EQ(e.log_factor(0), 0.0) << "no effect before a fit";
  std::vector<std::pair<size_t, double>> r;
  for (int rep = 0; rep < 5; ++rep)
    for (size_t i = 0; i < configs.size(); ++i) {
      double x = 0;
      if (configs[i]["a"].str() == "2") x += std::log(0.5);
      if (configs[i]["b"].str() == "y") x += std::log(1.5);
      r.emplace_back(i, x);
    }
  e.fit(r);
  EXPECT_EQ(e.samples(), 30u);
  auto ratio = [&](size_t i, size_t j) { return std::exp(e.log_factor(i) - e.log_factor(j)); };
  // Config order: (a, b) = (1,x) (1,y) (2,x) (2,y) (3,x) (3,y). The ridge penalty shrinks each
  // effect by count / (count + 1): 10 or 15 measurements per value.
  EXPECT_NEAR(ratio(2, 0), 0.5, 0.04);  // a=2 against a=1
  EXPECT_NEAR(ratio(4, 0), 1.0, 0.01);  // a=3 against a=1
  EXPECT_NEAR(ratio(1, 0), 1.5, 0.05);  // b=y against b=x
  EXPECT_NEAR(ratio(3, 2), 1.5, 0.05);
  const std::string s = e.summary(10);
  EXPECT_EQ(s.rfind("a=2 ", 0), 0u) << s << ": the largest effect comes first";
  EXPECT_NE(s.find("b=y"), std::string::npos) << s;
  EXPECT_EQ(s.find("c="), std::string::npos) << s << ": a parameter with one value has no effect";

  // A value never measured has no effect: only a=1 (at 1x) and a=3 (at 0.8x) measured, and the
  // unmeasured a=2 sits between them, at the average.
  std::vector<std::pair<size_t, double>> some;
  for (int rep = 0; rep < 8; ++rep) {
    some.emplace_back(0, 0.0);
    some.emplace_back(4, std::log(0.8));
  }
  e.fit(some);
  EXPECT_EQ(e.samples(), 16u);
  EXPECT_LT(e.log_factor(4), e.log_factor(2));
  EXPECT_LT(e.log_factor(2), e.log_factor(0));
  EXPECT_NEAR(e.log_factor(2), 0.0, 1e-9);
  // What the stop rule allows for: the unmeasured a=2 may be as good as the best measured a.
  EXPECT_NEAR(e.log_factor_bound(2), e.log_factor(4), 1e-12);
  EXPECT_NEAR(e.log_factor_bound(4), e.log_factor(4), 1e-12) << "measured values as fitted";
  EXPECT_NEAR(e.log_factor_bound(0), e.log_factor(0), 1e-12);
}

TEST(ParameterEffects, APriorOrdersUntilThisSearchMeasuresAndNeverMovesTheStopRule) {
  auto configs = grid({"a", "b", "c"}, {{1, 2, 3}, {"x", "y"}, {7}});
  ParameterEffects e(configs);
  // Values and parameters this space does not have are ignored.
  e.set_prior({{"a", {{"2", std::log(0.5)}, {"9", 4.0}}},
               {"b", {{"y", std::log(1.5)}}},
               {"c", {{"7", 3.0}}},
               {"zz", {{"1", 5.0}}}});
  EXPECT_EQ(e.prior_values(), 2u) << "a=2 and b=y; c has one value, nothing to order";
  // Config order: (a, b) = (1,x) (1,y) (2,x) (2,y) (3,x) (3,y).
  EXPECT_NEAR(e.order_factor(2), std::log(0.5), 1e-12);
  EXPECT_NEAR(e.order_factor(3), std::log(0.5) + std::log(1.5), 1e-12);
  EXPECT_EQ(e.order_factor(0), 0.0);
  // What the stop rule reads is this search's own: nothing yet.
  EXPECT_EQ(e.log_factor(2), 0.0);
  EXPECT_EQ(e.log_factor_bound(2), 0.0);
  EXPECT_EQ(e.spread(2), 1.0);

  // a=2 measured three times here, as the model predicted it: the prior counts as one
  // measurement against three, so a quarter of it is left.
  e.fit({{2, 0.0}, {2, 0.0}, {2, 0.0}});
  EXPECT_NEAR(e.log_factor(2), 0.0, 1e-12);
  EXPECT_NEAR(e.order_factor(2), std::log(0.5) / 4, 1e-12);
  EXPECT_NEAR(e.order_factor(3), std::log(0.5) / 4 + std::log(1.5), 1e-12) << "b=y unmeasured";
  ParameterEffects bare(configs);
  bare.fit({{2, 0.0}, {2, 0.0}, {2, 0.0}});
  EXPECT_EQ(e.spread(2), bare.spread(2));
  EXPECT_EQ(e.log_factor_bound(3), bare.log_factor_bound(3));
  // What it passes on: its measured values, and what is left of the prior elsewhere.
  auto learned = e.learned();
  EXPECT_NEAR(learned.at("a").at("2"), std::log(0.5) / 4, 1e-12);
  EXPECT_NEAR(learned.at("b").at("y"), std::log(1.5), 1e-12);
  EXPECT_NEAR(learned.at("b").at("x"), 0.0, 1e-12);
  EXPECT_EQ(learned.at("a").count("1"), 0u) << "neither measured nor in the prior";
  EXPECT_EQ(learned.count("c"), 0u);
}

TEST(ParameterEffects, APriorThisSearchContradictsStopsSteeringIt) {
  // The prior says a=1 is 2x slower than a=3; here it is 2x faster. After a few measurements
  // its trust is gone and the order is this search's own; one that holds keeps its full weight.
  auto configs = grid({"a", "b"}, {{1, 2, 3}, {"x", "y", "z"}});
  const ParameterEffects::Prior prior = {{"a", {{"1", std::log(2.0)}, {"3", 0.0}}}};
  auto measured = [&](double a1_factor, int reps) {
    std::vector<std::pair<size_t, double>> r;
    for (int rep = 0; rep < reps; ++rep)
      for (size_t i = 0; i < configs.size(); ++i) {
        if (configs[i]["a"].str() == "2") continue;
        r.emplace_back(i, configs[i]["a"].str() == "1" ? std::log(a1_factor) : 0.0);
      }
    return r;
  };
  ParameterEffects e(configs);
  e.set_prior(prior);
  EXPECT_EQ(e.prior_trust(), 1.0) << "before any measurement";
  e.fit(measured(0.5, 4));  // 24 measurements: slope -1, pulled towards 1 by 8: clamped to 0
  EXPECT_EQ(e.prior_trust(), 0.0);
  ParameterEffects bare(configs);
  bare.fit(measured(0.5, 4));
  for (size_t i = 0; i < configs.size(); ++i) EXPECT_EQ(e.order_factor(i), bare.log_factor(i));
  EXPECT_TRUE(e.learned().at("a").count("1"));
  EXPECT_EQ(e.learned().at("a").at("1"), bare.learned().at("a").at("1"));

  ParameterEffects right(configs);
  right.set_prior(prior);
  right.fit(measured(2.0, 4));
  EXPECT_NEAR(right.prior_trust(), 1.0, 1e-9);
  // Unrelated (a=1 as fast as a=3 here): the slope is 0, so the trust is what the 8
  // pseudo-measurements leave of it against 24 real ones.
  ParameterEffects unrelated(configs);
  unrelated.set_prior(prior);
  unrelated.fit(measured(1.0, 4));
  EXPECT_NEAR(unrelated.prior_trust(), 8.0 / 32.0, 1e-9);
}

TEST(ParameterEffects, FromPastCentresEachSearchSoAContextsOffsetTeachesNothing) {
  // Two earlier searches: one measured a=1 and a=2 where the model was 2.7x too optimistic as a
  // whole, the other a=2 and a=3 where it was 2.7x too pessimistic. The truth: a=2 is half of
  // a=1 and a=3, which are equal. Pooled as they are, a=3 would look 7x faster than a=1.
  std::vector<ParameterEffects::Past> past;
  for (int rep = 0; rep < 4; ++rep) {
    past.push_back({"1/1", {{"a", "1"}, {"b", "x"}}, 1.0});
    past.push_back({"1/1", {{"a", "2"}, {"b", "x"}}, 1.0 + std::log(0.5)});
    past.push_back({"2/1", {{"a", "2"}}, -1.0 + std::log(0.5)});  // a job without b
    past.push_back({"2/1", {{"a", "3"}}, -1.0});
  }
  past.push_back({"3/1", {{"a", "3"}}, NAN});  // not a residual: left out
  auto e = ParameterEffects::from_past(past);
  EXPECT_EQ(e.samples(), 16u);
  auto learned = e.learned();
  const auto& a = learned.at("a");
  EXPECT_NEAR(a.at("3") - a.at("1"), 0.0, 0.05);
  EXPECT_NEAR(a.at("2") - a.at("1"), std::log(0.5), 0.15);
  ASSERT_EQ(learned.count("b"), 1u);
  EXPECT_EQ(learned.at("b").size(), 1u) << "only b=x: a measurement without b is no value of it";
  // Measurements without b ran 3x slower: b's missing value is named nowhere, not even where
  // the largest effects are listed.
  std::vector<ParameterEffects::Past> mixed;
  for (int rep = 0; rep < 4; ++rep) {
    mixed.push_back({"4/1", {{"a", "1"}, {"b", "x"}}, 0.0});
    mixed.push_back({"4/1", {{"a", "1"}}, std::log(3.0)});
  }
  auto m = ParameterEffects::from_past(mixed);
  EXPECT_EQ(m.learned().at("b").size(), 1u);
  EXPECT_NE(m.summary(10).find("b=x"), std::string::npos) << m.summary(10);
  EXPECT_EQ(m.summary(10).find('\x01'), std::string::npos) << m.summary(10);
  EXPECT_TRUE(ParameterEffects::from_past({}).learned().empty());
}

// The model cannot tell the variants apart (predictions within 2% of each other, as for a
// DRAM-bound stencil) and misses what the parameters do: the read-only path is 0.6x, shared 1.3x,
// block 128 0.8x, merge 4 0.85x. Learning those effects from what was measured finds the fastest
// variants with far fewer measurements than the model's order alone.
TEST(ModelGuided, LearnsWhatEachParameterValueDoesAndMeasuresTheBestSooner) {
  auto configs =
      grid({"cache", "bx", "my", "u"},
           {{"global", "readonly", "shared"}, {32, 64, 128, 256}, {1, 2, 4, 8}, {1, 2, 4, 8}});
  ASSERT_EQ(configs.size(), 192u);
  // The model puts the fastest combination (readonly, bx 128, my 4) last, 2% behind the rest.
  auto fastest = [](const Config& c) {
    return c["cache"].str() == "readonly" && c["bx"].str() == "128" && c["my"].str() == "4";
  };
  std::vector<pruner::ModelFeatures> fs;
  for (size_t i = 0; i < configs.size(); ++i)
    fs.push_back(feature(
        1e8 * (1 + 1e-4 * static_cast<double>((i * 37) % 192) + (fastest(configs[i]) ? 0.02 : 0))));
  std::vector<double> truth(configs.size());
  double optimum = INFINITY;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    double f = c["cache"].str() == "readonly" ? 0.6 : c["cache"].str() == "shared" ? 1.3 : 1.0;
    if (c["bx"].str() == "128") f *= 0.8;
    if (c["my"].str() == "4") f *= 0.85;
    truth[i] =
        pruner::predict(fs[i], rates(), {}).ms * f * (1 + 0.005 * static_cast<double>(i % 5));
    optimum = std::min(optimum, truth[i]);
  }
  // Measurements until one within 5% of the optimum; nullopt: it stopped (or ran out) first.
  struct Outcome {
    std::optional<size_t> reached;
    size_t measured = 0;
  };
  auto search = [&](bool learn, std::uint64_t seed) {
    ModelGuided g(fs, rates(), {}, {}, learn ? configs : std::vector<Config>{}, seed);
    Outcome o;
    for (auto i = g.next(); i; i = g.next()) {
      ++o.measured;
      if (!o.reached && truth[*i] <= optimum * 1.05) o.reached = o.measured;
      g.report(*i, truth[*i]);
    }
    return o;
  };
  const Outcome alone = search(false, 0);
  // Only variants of the fastest combination are within 5%. The model's order alone reaches them
  // last, or stops first: its stop rule allows for the best measured/predicted ratio it has seen
  // (0.6x at best), not for effects that compound.
  EXPECT_FALSE(alone.reached && *alone.reached <= 150)
      << "the model alone found them after " << *alone.reached;
  // The model's start spreads over its ties (ModelGuided.ItsStartSpreadsOverVariantsItCannot-
  // TellApart): the predictions here lie within 2% of each other, the first 16 or so within
  // kModelTie, so the first proposals show other values. They set the bests; kModelStale later
  // proposals without a new best, the portfolio proposes (ModelGuided.AModelThatStopsFinding-
  // TheFastestGivesWayToThePortfolio) with the effects learned so far, and the one within 5%
  // comes after 13 to 35 measurements over 20 seeds (median 22; the model's order with its
  // effects alone: 18). One seed is a draw of the portfolio's random choices: the median and the
  // worst of 20 are what the search does.
  std::vector<std::size_t> reached;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const Outcome learned = search(true, seed);
    ASSERT_TRUE(learned.reached) << "seed " << seed << " stopped after " << learned.measured;
    reached.push_back(*learned.reached);
  }
  std::sort(reached.begin(), reached.end());
  EXPECT_LE(reached[reached.size() / 2], 26u) << "the median over 20 seeds";
  EXPECT_LE(reached.back(), 48u) << "the worst of 20 seeds (the model alone: over 150)";
}

// A DRAM-bound kernel's variants often have one prediction: the model cannot tell them apart.
// While it is not trusted, its first proposals then show as many parameter values as they can,
// not the first variants in space order (one corner of the space, its mistakes alike); variants
// it does tell apart keep its order.
TEST(ModelGuided, ItsStartSpreadsOverVariantsItCannotTellApart) {
  const std::vector<Value> two = {0, 1};
  const auto configs = grid({"a", "b", "c", "d", "e"}, {two, two, two, two, two});
  auto start = [&](const std::vector<pruner::ModelFeatures>& fs, std::optional<size_t> told) {
    ModelGuided g(fs, rates(), {}, {}, configs);
    if (told) g.report(*told, 1.0);  // measured before the search (the default)
    std::vector<size_t> out;
    for (auto i = g.next(); i && out.size() < 3; i = g.next()) {
      out.push_back(*i);
      g.report(*i, 1.0 + 0.1 * static_cast<double>((*i * 7) % 5));  // unrelated to the model
    }
    return out;
  };
  auto differ = [&](size_t x, size_t y) {
    size_t n = 0;
    for (size_t p = 0; p < 5; ++p) n += configs[x].values[p].str() != configs[y].values[p].str();
    return n;
  };
  // All predicted alike: the best-ordered first (space order breaks the tie), then among the
  // first kModelSpread of the tied, the one that differs in the most values: every value of
  // b to e (a's second value is beyond them).
  const std::vector<pruner::ModelFeatures> tied(configs.size(), feature(1e8));
  const auto spread = start(tied, std::nullopt);
  ASSERT_EQ(spread.size(), 3u);
  EXPECT_EQ(spread[0], 0u);
  EXPECT_EQ(differ(spread[0], spread[1]), 4u) << "space order would move one value";
  // The same whether or not the default's outcome arrived first (the stream's timing decides
  // that): the order does not depend on it.
  EXPECT_EQ(start(tied, 5), (std::vector<size_t>{0, spread[1], spread[2]}));
  // Predictions 1% apart, more than kModelTie: the model's order as it is.
  std::vector<pruner::ModelFeatures> apart;
  for (size_t i = 0; i < configs.size(); ++i)
    apart.push_back(feature(1e8 * (1 + 0.01 * static_cast<double>(i))));
  EXPECT_EQ(start(apart, std::nullopt), (std::vector<size_t>{0, 1, 2}));
}

/// 2,048 variants: parameter a, which the model sees (1x or 1.4x the bytes), and b to f (four
/// values each), which it does not; predictions nearly tied within each value of a.
struct HiddenEffectsSpace {
  std::vector<Config> configs =
      grid({"a", "b", "c", "d", "e", "f"},
           {{0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}});
  std::vector<pruner::ModelFeatures> fs;
  std::vector<double> predicted;
  HiddenEffectsSpace() {
    for (size_t i = 0; i < configs.size(); ++i) {
      fs.push_back(feature(1e8 * (1 + 0.4 * static_cast<double>(configs[i]["a"].as_int())) *
                           (1 + 1e-4 * static_cast<double>(i % 7))));
      predicted.push_back(pruner::predict(fs.back(), rates(), {}).ms);
    }
  }
};

/// Box-Muller on the generator's raw output: the same numbers on every standard library.
double standard_normal(std::mt19937_64& rng) {
  double u1 = (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0;
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// The model knows what one parameter does (a: 1x or 1.4x) and ranks well, but five others
// multiply the time by factors it does not see (log-normal, sigma 0.2 per value). A value
// measured once or twice is not pinned down yet (its learned effect is shrunk, and its true one
// may be twice that), so the stop rule must allow for what is still unknown of each open
// variant's values: otherwise it stops after a few dozen measurements, sure that nothing left
// can win, when effects it has only half learned add up to a faster variant. (Without the
// allowance, 4 of these 30 searches stop after 7 measurements, short of 5% of the optimum.)
TEST(ModelGuided, AllowsForEffectsItHasNotPinnedDownYet) {
  const HiddenEffectsSpace space;
  const auto& configs = space.configs;
  const auto& fs = space.fs;
  const auto& predicted = space.predicted;
  size_t stopped_short = 0, searches = 30;
  std::vector<size_t> measured;
  for (std::uint64_t seed = 1; seed <= searches; ++seed) {
    std::mt19937_64 rng(seed);
    auto normal = [&] { return standard_normal(rng); };
    double effect[5][4];
    for (auto& p : effect)
      for (double& v : p) v = 0.2 * normal();
    std::vector<double> truth(configs.size());
    double optimum = INFINITY;
    for (size_t i = 0; i < configs.size(); ++i) {
      double f = 0.02 * normal();
      for (int p = 0; p < 5; ++p) f += effect[p][configs[i][std::string(1, "bcdef"[p])].as_int()];
      truth[i] = predicted[i] * std::exp(f);
      optimum = std::min(optimum, truth[i]);
    }
    ModelGuided g(fs, rates(), {}, {}, configs);
    bool reached = false;
    for (auto i = g.next(); i; i = g.next()) {
      reached = reached || truth[*i] <= optimum * 1.05;
      g.report(*i, truth[*i]);
    }
    measured.push_back(configs.size() - g.unvisited().size());
    if (!reached) {
      ASSERT_FALSE(g.stop_reason().empty()) << "seed " << seed;
      ++stopped_short;
    }
  }
  EXPECT_EQ(stopped_short, 0u) << "of " << searches;
  // And it still stops: allowing for what is unknown is not measuring everything.
  std::nth_element(measured.begin(), measured.begin() + measured.size() / 2, measured.end());
  EXPECT_LT(measured[measured.size() / 2], configs.size() / 8);
}

// The same kind of space in two contexts (two problem sizes): the parameters' hidden effects in
// the second are those of the first plus a smaller change of their own. Started from what the
// first context's search measured, the second reaches 5% of its optimum sooner; started from an
// unrelated prior it may take longer, but the stop rule, which reads only its own measurements,
// never stops it short.
TEST(ModelGuided, APriorFromAnEarlierContextReachesTheOptimumSoonerAndNeverStopsItShort) {
  const HiddenEffectsSpace space;
  const auto& configs = space.configs;
  const auto& fs = space.fs;
  const auto& predicted = space.predicted;
  struct Outcome {
    std::optional<size_t> reached;
    std::vector<ParameterEffects::Past> past;
  };
  auto search = [&](const std::vector<double>& truth, const ParameterEffects::Prior* prior) {
    double optimum = *std::min_element(truth.begin(), truth.end());
    ModelGuided g(fs, rates(), {}, {}, configs);
    if (prior) g.set_prior(*prior);
    Outcome o;
    size_t n = 0;
    for (auto i = g.next(); i; i = g.next()) {
      ++n;
      if (!o.reached && truth[*i] <= optimum * 1.05) o.reached = n;
      g.report(*i, truth[*i]);
      std::map<std::string, std::string> values;
      for (size_t p = 0; p < configs[*i].values.size(); ++p)
        values[(*configs[*i].names)[p]] = configs[*i].values[p].str();
      o.past.push_back({"ctx", values, std::log(truth[*i] / predicted[*i])});
    }
    return o;
  };
  const int searches = 30;
  std::vector<double> cold, warm, cold0, misled;  // measurements to 5% (never: a large number)
  int short_warm = 0, short_unrelated = 0;
  for (std::uint64_t seed = 1; seed <= searches; ++seed) {
    std::mt19937_64 rng(seed);
    auto normal = [&] { return standard_normal(rng); };
    double first[5][4], second[5][4], unrelated[5][4];
    for (int p = 0; p < 5; ++p)
      for (int v = 0; v < 4; ++v) {
        first[p][v] = 0.2 * normal();
        second[p][v] = first[p][v] + 0.07 * normal();
        unrelated[p][v] = 0.2 * normal();
      }
    auto truth_of = [&](double(&effect)[5][4]) {
      std::vector<double> t(configs.size());
      for (size_t i = 0; i < configs.size(); ++i) {
        double f = 0.02 * normal();
        for (int p = 0; p < 5; ++p) f += effect[p][configs[i][std::string(1, "bcdef"[p])].as_int()];
        t[i] = predicted[i] * std::exp(f);
      }
      return t;
    };
    auto t1 = truth_of(first), t2 = truth_of(second), t0 = truth_of(unrelated);
    auto prior = ParameterEffects::from_past(search(t1, nullptr).past).learned();
    auto c = search(t2, nullptr), w = search(t2, &prior);
    cold.push_back(c.reached ? static_cast<double>(*c.reached) : 1e9);
    warm.push_back(w.reached ? static_cast<double>(*w.reached) : 1e9);
    short_warm += !w.reached;
    auto u = search(t0, &prior), u0 = search(t0, nullptr);
    short_unrelated += !u.reached;
    misled.push_back(u.reached ? static_cast<double>(*u.reached) : 1e9);
    cold0.push_back(u0.reached ? static_cast<double>(*u0.reached) : 1e9);
  }
  EXPECT_EQ(short_warm, 0);
  EXPECT_EQ(short_unrelated, 0);
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  EXPECT_LE(median(warm) * 2, median(cold)) << "warm " << median(warm) << ", cold " << median(cold);
  // A prior that does not hold loses its trust within a few measurements: it costs little.
  EXPECT_LE(median(misled), 1.5 * median(cold0))
      << "misled " << median(misled) << ", cold " << median(cold0);
}

/// 50 variants, p (5 values) by q (10), whose predictions rank them in a scrambled order: the
/// space of the searches where the model is right.
struct RightModelSpace {
  std::vector<Config> configs =
      grid({"p", "q"}, {{"u", "v", "w", "z", "y"}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
  std::vector<pruner::ModelFeatures> fs;
  RightModelSpace() {
    for (size_t i = 0; i < configs.size(); ++i) fs.push_back(feature(1e6 * (1 + (i * 37) % 50)));
  }
};

TEST(ModelGuided, LearnedEffectsLeaveARightModelsOrderAlone) {
  // Measured = 1.3 x predicted with 1% noise: the effects stay small and the order and the stop
  // are the model's.
  const RightModelSpace space;
  const auto& configs = space.configs;
  const auto& fs = space.fs;
  std::vector<size_t> explored;  // what the portfolio beside the model proposed
  auto order = [&](const std::vector<Config>& cs) {
    ModelGuided g(fs, rates(), {}, {}, cs);
    std::vector<size_t> out;
    for (auto i = g.next(); i; i = g.next()) {
      (g.explored(*i) ? explored : out).push_back(*i);
      g.report(*i, pruner::predict(fs[*i], rates(), {}).ms * 1.3 * (1 + 0.01 * (*i % 3)));
    }
    return out;
  };
  auto alone = order({}), learned = order(configs);
  // The model's order (the portfolio's few proposals beside it aside: at most its floor); and
  // before it stops, each value of p and q that no variant measured had is tried once (its best
  // ordered variant), so that the stop does not rest on a guess.
  EXPECT_LE(explored.size(), 1 + learned.size() / 4) << "a right model keeps the search";
  ASSERT_GE(learned.size() + explored.size(), alone.size());
  std::vector<size_t> expected;  // the model's order, less what the portfolio took
  for (size_t i : alone)
    if (std::find(explored.begin(), explored.end(), i) == explored.end()) expected.push_back(i);
  const size_t common = std::min(expected.size(), learned.size());
  EXPECT_TRUE(
      std::equal(expected.begin(), expected.begin() + static_cast<long>(common), learned.begin()));
  std::set<std::string> tried;
  for (size_t k = 0; k < learned.size(); ++k) {
    bool new_p = tried.insert("p=" + configs[learned[k]]["p"].str()).second;
    bool new_q = tried.insert("q=" + configs[learned[k]]["q"].str()).second;
    if (k >= alone.size()) {
      EXPECT_TRUE(new_p || new_q) << "measurement " << k;
    }
  }
  EXPECT_EQ(tried.size(), 15u) << "every value of p (5) and q (10)";
  EXPECT_LT(learned.size(), 20u);
}

// The pipeline measures the default configuration first, without asking: the search must not
// propose it again, and its values count as tried (no measurement spent trying them again).
TEST(ModelGuided, AMeasurementItDidNotProposeIsNeverProposedAndItsValuesAreTried) {
  const RightModelSpace space;
  const auto& configs = space.configs;
  const auto& fs = space.fs;
  auto truth = [&](size_t i) { return pruner::predict(fs[i], rates(), {}).ms * 1.3; };
  // (z, 8): the model's order tries neither z nor 8 before its stop rule holds, so a search not
  // told of it ends by trying them (LearnedEffectsLeaveARightModelsOrderAlone).
  const size_t def = 38;
  auto run = [&](bool report_default) {
    ModelGuided g(fs, rates(), {}, {}, configs);
    if (report_default) g.report(def, truth(def));
    std::vector<size_t> out;
    for (auto i = g.next(); i; i = g.next()) {
      out.push_back(*i);
      g.report(*i, truth(*i));
    }
    return out;
  };
  auto told = run(true), cold = run(false);
  EXPECT_EQ(std::count(cold.begin(), cold.end(), def), 1);
  EXPECT_EQ(std::count(told.begin(), told.end(), def), 0) << "measured already";
  EXPECT_EQ(told.size() + 1, cold.size()) << "no measurement spent on what the default tried";
}

/// A flops-bound variant (the FMA issue term alone) predicted at `ms` under the default
/// calibration, over `bytes` of DRAM traffic.
pruner::ModelFeatures flops_bound(double ms, double bytes = 0) {
  pruner::ModelFeatures f = feature(bytes);
  f.flops = ms * 1e-3 * rates().fp32_gflops * 1e9;
  return f;
}

TEST(ModelGuided, ARefitReadmitsWhatTheModelRuleHeldBackUnderTheDefaultCalibration) {
  // The GPU runs flops-bound code 4x faster than the default calibration says. The model rule
  // (margin 2 over the best prediction, 1.004 ms) pruned two flops-bound variants predicted 2.2
  // and 5 ms; their truth is 0.554 and 1.254 ms, the first the fastest of all. One flops-bound
  // variant the rule kept (1.02 ms predicted, DRAM-bound at 0.609 ms in truth) teaches the
  // refit the flops scale; the refitted rule then readmits the 2.2 ms one, and not the 5 ms one
  // (1.254 ms > 2 x 0.554).
  pruner::Calibration truth;
  truth.flops = 0.25;
  std::vector<pruner::ModelFeatures> fs;
  for (int j = 0; j < 6; ++j) fs.push_back(feature(1e9 * (1 + 0.05 * j)));  // 0..5: DRAM-bound
  fs.push_back(flops_bound(1.02, 0.6e9));                                   // 6: kept
  fs.push_back(flops_bound(2.2));                                           // 7: held
  fs.push_back(flops_bound(5.0));                                           // 8: held
  auto true_ms = [&](size_t i) { return pruner::predict(fs[i], rates(), truth).ms; };
  std::vector<bool> held(fs.size(), false);
  held[7] = held[8] = true;
  for (const bool readmitting : {true, false}) {
    SCOPED_TRACE(readmitting ? "held back" : "excluded, as before held variants were");
    ModelGuided g(fs, rates(), {}, readmitting ? std::vector<bool>{} : held);
    if (readmitting) g.hold_back(held, 2.0);
    EXPECT_EQ(g.held(), readmitting ? 2u : 0u);
    std::vector<size_t> order;
    double best = INFINITY;
    for (auto i = g.next(); i; i = g.next()) {
      order.push_back(*i);
      g.report(*i, true_ms(*i));
      best = std::min(best, true_ms(*i));
    }
    EXPECT_EQ(std::count(order.begin(), order.end(), 8u), 0);
    if (readmitting) {
      EXPECT_EQ(g.readmitted(), std::vector<size_t>{7});
      EXPECT_EQ(g.held(), 1u);
      EXPECT_NE(std::find(order.begin(), order.end(), 7u), order.end());
      EXPECT_DOUBLE_EQ(best, true_ms(7)) << "the readmitted variant is the optimum";
      EXPECT_NEAR(best, 0.554, 1e-3);
      EXPECT_NEAR(g.calibration().flops, 0.25, 0.05);
    } else {
      EXPECT_DOUBLE_EQ(best, true_ms(6));
      EXPECT_NEAR(best, 0.609, 1e-3);
    }
  }
}

TEST(ModelGuided, BeforeItRunsOutItRefitsOnEverythingMeasured) {
  // The variant that shows the flops scale is the fifth measured: after the scheduled refit (at
  // 4), and the last open one. Without a refit before running out, the held variant would never
  // be judged by a model that saw it.
  pruner::Calibration truth;
  truth.flops = 0.25;
  std::vector<pruner::ModelFeatures> fs;
  for (int j = 0; j < 4; ++j) fs.push_back(feature(1e9 * (1 + 0.01 * j)));  // 0..3
  fs.push_back(flops_bound(1.2, 0.6e9));                                    // 4: fifth
  fs.push_back(flops_bound(2.2));                                           // 5: held
  ModelGuided g(fs, rates(), {});
  g.hold_back(std::vector<bool>{false, false, false, false, false, true}, 2.0);
  std::vector<size_t> order;
  for (auto i = g.next(); i; i = g.next()) {
    order.push_back(*i);
    g.report(*i, pruner::predict(fs[*i], rates(), truth).ms);
  }
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(g.readmitted(), std::vector<size_t>{5});
}

TEST(ModelGuided, TrustsTheModelOnlyWhenItsRankingCouldNotBeChance) {
  // The first six measurements come in swapped pairs (Spearman 0.83: over six, a model that ranks
  // at random gets that often enough), the rest as predicted. The stop rule waits for a seventh.
  std::vector<pruner::ModelFeatures> fs;
  for (int i = 0; i < 12; ++i) fs.push_back(feature(1e7 * (1 + i)));
  auto pred = [&](size_t i) { return pruner::predict(fs[i], rates(), {}).ms; };
  ModelGuided g(fs, rates(), {});
  size_t n = 0;
  for (auto i = g.next(); i; i = g.next(), ++n) {
    size_t j = *i < 6 ? (*i ^ 1) : *i;  // 0<->1, 2<->3, 4<->5
    g.report(*i, pred(j));
  }
  EXPECT_EQ(n, 7u) << g.stop_reason();
  EXPECT_FALSE(g.stop_reason().empty());
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

// The benchmark hub's convolution on the RTX A4000: the model tells the slow variants from the
// fast ones (its ranking of what was measured passes the trust test), but among the fast ones it
// is no guide (here: the wrong way round). Its proposals beat most of what was measured and never
// the best: past kModelStale of them without a new best, the portfolio proposes (the model its
// floor), so the search is not held by the model. A model that keeps finding new bests keeps
// proposing.
TEST(ModelGuided, AModelThatStopsFindingTheFastestGivesWayToThePortfolio) {
  const std::vector<Value> eight = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto configs = grid({"a", "b", "c"}, {eight, eight, eight});
  const size_t n = configs.size();
  // Half the values of a are 3x slower (the model sees that); b and c interact (it does not).
  auto slow = [&](size_t i) { return configs[i].values[0].as_int() < 4 ? 3.0 : 1.0; };
  auto bc = [&](size_t i) {
    const auto& v = configs[i].values;
    return std::abs(v[1].as_int() - 2 * (v[2].as_int() % 4)) * 0.15;
  };
  auto truth = [&](size_t i) {
    return slow(i) * std::exp(bc(i) + 0.01 * static_cast<double>((i * 7919) % 7));
  };
  double optimum = INFINITY;
  for (size_t i = 0; i < n; ++i) optimum = std::min(optimum, truth(i));
  struct Outcome {
    size_t explored = 0;  // the portfolio's proposals among the first `steps`
    size_t reached = 0;   // measurements until one within 5% of the optimum (0: not in `steps`)
  };
  auto search = [&](bool right, std::uint64_t seed) {
    std::vector<pruner::ModelFeatures> fs;
    // The wrong model orders the fast variants the wrong way round: the best last.
    for (size_t i = 0; i < n; ++i)
      fs.push_back(feature(1e8 * (right ? truth(i) : slow(i) * (2 - bc(i) / 1.05))));
    ModelGuided g(fs, rates(), {}, {}, configs, seed);
    Outcome o;
    size_t steps = 0;
    for (auto i = g.next(); i && steps < 120; i = g.next()) {
      ++steps;
      if (!o.reached && truth(*i) <= 1.05 * optimum) o.reached = steps;
      g.report(*i, truth(*i));
    }
    o.explored = g.explored();
    return o;
  };
  std::vector<size_t> wrong_reached, wrong_explored;
  for (std::uint64_t seed = 1; seed <= 9; ++seed) {
    const Outcome wrong = search(false, seed);
    wrong_reached.push_back(wrong.reached ? wrong.reached : 1000);
    wrong_explored.push_back(wrong.explored);
    const Outcome right = search(true, seed);
    EXPECT_LE(right.explored, 30u) << "a model finding new bests keeps proposing, seed " << seed;
    EXPECT_GT(right.reached, 0u);
    EXPECT_LE(right.reached, 10u) << "seed " << seed;
  }
  std::sort(wrong_reached.begin(), wrong_reached.end());
  std::sort(wrong_explored.begin(), wrong_explored.end());
  // Of 120 proposals, the model's start is 8, a few more until it is stale, then 1 in 16.
  EXPECT_GE(wrong_explored[4], 80u) << "median proposals of the portfolio over 9 seeds";
  // 32 of the 512 variants are within 5% (b = 2 (c % 4), a fast): random search needs about 16,
  // the wrong model's order alone more than 120.
  EXPECT_LE(wrong_reached[4], 40u) << "median over 9 seeds";
}

TEST(ModelGuided, WithoutPredictionsLearnsFromTheTimesAndNeverCuts) {
  // A kernel the analysis could not read: no variant has a prediction. The search starts in a
  // seeded random order, then follows what the measured times say about each parameter value,
  // and still tries every variant.
  const std::vector<Value> eight = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto configs = grid({"a", "b", "c"}, {eight, eight, eight});
  const size_t n = configs.size();
  const double ea[8] = {0.9, 0.4, 0.7, 0.2, 0.5, 0.0, 0.8, 0.6};
  const double eb[8] = {0.3, 0.6, 0.0, 0.9, 0.2, 0.5, 0.8, 0.4};
  const double ec[8] = {0.7, 0.2, 0.9, 0.6, 0.4, 0.3, 0.0, 0.5};
  auto truth = [&](size_t i) {
    const auto& v = configs[i].values;
    const double noise = 0.03 * static_cast<double>((i * 7919) % 5) / 4;  // up to 3%, per variant
    return std::exp(ea[v[0].as_int()] + eb[v[1].as_int()] + ec[v[2].as_int()] + noise);
  };
  const size_t optimum = 5 * 64 + 2 * 8 + 6;
  const std::vector<pruner::ModelFeatures> none(n);
  auto first = [&](std::uint64_t seed, const std::vector<Config>& cs) {
    ModelGuided g(none, rates(), {}, {}, cs, seed);
    return plan(g, 8);
  };
  EXPECT_EQ(first(1, configs), first(1, configs));
  EXPECT_NE(first(1, configs), first(2, configs));
  EXPECT_NE(first(1, configs), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7})) << "not space order";
  EXPECT_NE(first(1, {}), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7})) << "not space order";

  std::vector<size_t> to_optimum;
  for (std::uint64_t seed = 1; seed <= 21; ++seed) {
    ModelGuided g(none, rates(), {}, {}, configs, seed);
    std::vector<size_t> order;
    for (auto i = g.next(); i; i = g.next()) {
      if (*i == optimum) to_optimum.push_back(order.size() + 1);
      order.push_back(*i);
      g.report(*i, truth(*i));
    }
    ASSERT_EQ(order.size(), n) << "unpredicted variants are never cut";
    ASSERT_EQ(std::set<size_t>(order.begin(), order.end()).size(), n);
    EXPECT_TRUE(g.stop_reason().empty());
    ASSERT_NE(g.explorer(), nullptr);
    EXPECT_EQ(g.explored(), n) << "the portfolio search proposed every unpredicted variant";
    EXPECT_GT(g.explorer()->proposals_by_search()[0], 0u) << "its surrogate among them";
  }
  std::sort(to_optimum.begin(), to_optimum.end());
  // Random search needs a median of about n / 2 = 256 measurements to find the optimum.
  EXPECT_LE(to_optimum[to_optimum.size() / 2], 40u) << "median over 21 seeds";

  // What an earlier search (another problem size: every time 3x, its own noise) measured of 48
  // variants orders this one from the start.
  std::vector<ParameterEffects::Past> past;
  for (size_t k = 0; k < 48; ++k) {
    const size_t i = (k * 173 + 11) % n;
    ParameterEffects::Past m;
    m.search = "earlier";
    for (size_t p = 0; p < 3; ++p) m.values[(*configs[i].names)[p]] = configs[i].values[p].str();
    m.log_residual = std::log(3 * truth(i)) + 0.02 * static_cast<double>(k % 3);
    past.push_back(m);
  }
  const auto prior = ParameterEffects::from_past(past).learned();
  std::vector<size_t> warm;
  for (std::uint64_t seed = 1; seed <= 21; ++seed) {
    ModelGuided g(none, rates(), {}, {}, configs, seed);
    g.set_unpredicted_prior(prior);
    size_t k = 0;
    for (auto i = g.next(); i; i = g.next()) {
      ++k;
      if (*i == optimum) break;
      g.report(*i, truth(*i));
    }
    warm.push_back(k);
  }
  std::sort(warm.begin(), warm.end());
  EXPECT_LE(warm[warm.size() / 2] * 3, to_optimum[to_optimum.size() / 2])
      << "with the prior, a third of the measurements or fewer (median over 21 seeds)";
}

}  // namespace
}  // namespace gputune::tuner
