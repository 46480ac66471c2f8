#include "variants/space.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "db/interchange.h"
#include "test_util.h"

namespace gputune {
namespace {

using nlohmann::json;

Job job_with(const std::string& params, const std::string& conditions) {
  json d = json::parse(
      R"({"KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "1"}, "GlobalSize": {"X": "1"}}})");
  d["ConfigurationSpace"]["TuningParameters"] = json::parse(params);
  d["ConfigurationSpace"]["Conditions"] = json::parse(conditions);
  return parse_job(d, "job.json");
}

TEST(Space, DedispersionMatchesKernelTunerExactly) {
  Job job = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  Space s = build_space(job);
  ASSERT_EQ(s.size(), 11130u);
  EXPECT_EQ(s.cartesian_size, 22272u);
  auto doc = nlohmann::ordered_json::parse(db::read_maybe_gzip(
      test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz"));
  std::vector<std::string> kt;
  for (auto it = doc["cache"].begin(); it != doc["cache"].end(); ++it) kt.push_back(it.key());
  ASSERT_EQ(kt.size(), s.size());
  std::set<std::string> ours;
  for (size_t i = 0; i < s.size(); ++i) ours.insert(s.config(i).key());
  EXPECT_EQ(ours, std::set<std::string>(kt.begin(), kt.end()));
  // Same order as Kernel Tuner's itertools.product walk.
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s.config(i).key(), kt[i]) << "at " << i;
  // Removal counts add up.
  std::uint64_t removed = 0;
  for (auto& c : s.conditions) removed += c.removed;
  EXPECT_EQ(removed + s.size(), s.cartesian_size);
}

TEST(Space, FindsConfigurationsByKey) {
  Job job = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  Space s = build_space(job);
  for (size_t i : {size_t{0}, size_t{17}, size_t{5000}, s.size() - 1})
    EXPECT_EQ(s.find(s.config(i).key()), static_cast<long>(i));
  EXPECT_EQ(s.find("1,32,1,1,1,1,0,0"), -1);  // removed by a condition
  EXPECT_EQ(s.find("nonsense"), -1);
}

TEST(Space, ConditionsAreCheckedWhenTheirParametersAreBound) {
  Job job = job_with(R"([{"Name": "a", "Type": "int", "Values": "[1,2,3,4]"},
                         {"Name": "b", "Type": "int", "Values": "[1,2,3,4]"},
                         {"Name": "c", "Type": "int", "Values": "[0,1]"}])",
                     R"([{"Expression": "a % 2 == 0", "Parameters": ["a"]},
                         {"Expression": "a * b <= 8", "Parameters": ["a", "b"]}])");
  Space s = build_space(job);
  // a in {2,4}; a=2: b 1..4; a=4: b 1..2 -> 6 pairs x 2 values of c.
  EXPECT_EQ(s.size(), 12u);
  EXPECT_EQ(s.conditions[0].removed, 16u);  // a=1,3: 2*4*2 configurations rejected at depth 1
  EXPECT_EQ(s.conditions[1].removed, 4u);   // a=4,b=3..4 -> 2*2
  EXPECT_EQ(s.config(0).key(), "2,1,0");
  EXPECT_EQ(s.config(11).key(), "4,2,1");
  EXPECT_EQ(s.config(0).json(), R"({"a": 2, "b": 1, "c": 0})");
}

TEST(Space, EmptySpaceIsExplained) {
  Job job = job_with(R"([{"Name": "a", "Type": "int", "Values": "[1,2]"}])",
                     R"([{"Expression": "a > 5", "Parameters": ["a"]}])");
  Space s = build_space(job);
  EXPECT_TRUE(s.empty());
  std::string why = s.explain_empty();
  EXPECT_NE(why.find("\"a > 5\" removed 2"), std::string::npos) << why;
}

TEST(Space, ConditionErrorsNameTheCondition) {
  Job job = job_with(R"([{"Name": "a", "Type": "int", "Values": "[0,1]"}])",
                     R"([{"Expression": "10 // a > 1", "Parameters": ["a"]}])");
  try {
    build_space(job);
    FAIL();
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "ConfigurationSpace.Conditions[0]");
    EXPECT_NE(std::string(e.what()).find("a=0"), std::string::npos) << e.what();
  }
}

TEST(Space, StringAndFloatParametersFormatLikePython) {
  Job job = job_with(R"([{"Name": "t", "Type": "string", "Values": "['float', 'half']"},
                         {"Name": "f", "Type": "float", "Values": "[0.5, 1.0]"}])",
                     "[]");
  Space s = build_space(job);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.config(1).key(), "float,1.0");
  EXPECT_EQ(s.config(2).json(), R"({"t": "half", "f": 0.5})");
}

// A space too large to keep or to walk is a JobError within a fraction of a second of work,
// naming the parameters and their sizes, instead of minutes of walking and then bad_alloc.
TEST(Space, ASpaceTooLargeToKeepOrWalkIsAnErrorNamingItsParameters) {
  auto error_of = [](const Job& job, const SpaceLimits& limits) -> std::string {
    try {
      Space s = build_space(job, limits);
      return "built " + std::to_string(s.size());
    } catch (const JobError& e) {
      EXPECT_EQ(e.field, "ConfigurationSpace.TuningParameters");
      EXPECT_NE(e.fix.find("add Conditions"), std::string::npos);
      return e.problem;
    }
  };
  std::string params = "[";
  for (int p = 0; p < 10; ++p)
    params += std::string(p ? "," : "") + R"js({"Name": "p)js" + std::to_string(p) +
              R"js(", "Type": "int", "Values": "list(range(100))"})js";
  params += "]";
  // 100^10 overflows 64 bits: the product saturates; with no conditions, refused before walking.
  const Job huge = job_with(params, "[]");
  const std::string e = error_of(huge, {});
  EXPECT_EQ(e.rfind("the space is too large: its product of values is more than 1.8e19 "
                    "configurations (p0 100 x p1 100 x p2 100 x p3 100 x p4 100 x p5 100 x p6 100 "
                    "x p7 100 x p8 100 x p9 100), and with no Conditions every one is valid: more "
                    "than the 10,000,000 gputune keeps",
                    0),
            0u)
      << e;

  const std::string ab = R"js([{"Name": "a", "Type": "int", "Values": "list(range(100))"},
                               {"Name": "b", "Type": "int", "Values": "list(range(100))"}])js";
  // Conditions that keep everything: stopped at the limit of valid configurations.
  const Job a = job_with(ab, R"([{"Expression": "a + b >= 0", "Parameters": ["a", "b"]}])");
  EXPECT_EQ(error_of(a, {10'000, 1'000'000}), "built 10000");  // exactly at the limit
  EXPECT_EQ(error_of(a, {9'999, 1'000'000}),
            "the space is too large: its product of values is 10,000 configurations (a 100 x b "
            "100), and more than the 9,999 valid configurations gputune keeps satisfy the "
            "conditions (after 99.99% of the product, 9,999 valid so far)");
  // Conditions that keep nothing, checked only at the last parameter: stopped at the walk limit.
  const Job b = job_with(ab, R"([{"Expression": "b > 1000", "Parameters": ["b"]}])");
  EXPECT_EQ(error_of(b, {1'000, 5'000}),
            "the space is too large: its product of values is 10,000 configurations (a 100 x b "
            "100), and the conditions leave too much of it to walk: 5,000 values bound (after "
            "49.5% of the product, 0 valid so far)");
  EXPECT_EQ(error_of(b, {1'000, 10'100}), "built 0");  // 100 + 100 x 100 values bound
}

// --- spread: a few configurations that stand for the whole space ---------------------------------

/// How many distinct values of parameter p, and pairs of values of p and q, the picks show.
size_t values_seen(const Space& s, const std::vector<size_t>& picks, size_t p) {
  std::set<std::uint32_t> seen;
  for (size_t i : picks) seen.insert(s.value_index(i, p));
  return seen.size();
}
size_t pairs_seen(const Space& s, const std::vector<size_t>& picks, size_t p, size_t q) {
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  for (size_t i : picks) seen.emplace(s.value_index(i, p), s.value_index(i, q));
  return seen.size();
}

TEST(Spread, EveryValueAndPairTurnsUpWhereEvenlySpacedPicksRepeatTheInnerOnes) {
  // 6 x 2 x 3 = 36 configurations in product order: every 6th one has the same b and c.
  Job job = job_with(R"([{"Name": "a", "Type": "int", "Values": "[1,2,3,4,5,6]"},
                         {"Name": "b", "Type": "int", "Values": "[0,1]"},
                         {"Name": "c", "Type": "int", "Values": "[7,8,9]"}])",
                     "[]");
  Space s = build_space(job);
  ASSERT_EQ(s.size(), 36u);
  std::vector<size_t> even;
  for (size_t i = 0; i < 6; ++i) even.push_back(i * s.size() / 6);
  ASSERT_EQ(values_seen(s, even, 1) + values_seen(s, even, 2), 2u);  // what spread is for

  const std::vector<size_t> six = spread(s, 6);
  ASSERT_EQ(six.size(), 6u);
  EXPECT_EQ(std::set<size_t>(six.begin(), six.end()).size(), 6u);
  EXPECT_EQ(values_seen(s, six, 0), 6u);
  EXPECT_EQ(values_seen(s, six, 1), 2u);
  EXPECT_EQ(values_seen(s, six, 2), 3u);
  // Pairs next: a x c has 18, so 18 picks are the fewest that can show them all.
  const std::vector<size_t> eighteen = spread(s, 18);
  EXPECT_EQ(pairs_seen(s, eighteen, 0, 1), 12u);
  EXPECT_EQ(pairs_seen(s, eighteen, 0, 2), 18u);
  EXPECT_EQ(pairs_seen(s, eighteen, 1, 2), 6u);
  // The first six of a longer spread are the six: it only adds.
  EXPECT_EQ(std::vector<size_t>(eighteen.begin(), eighteen.begin() + 6), six);
}

TEST(Spread, ARealSpaceShowsEveryValueInAboutAsManyPicksAsItsLongestParameterHas) {
  Job job = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  Space s = build_space(job);
  size_t longest = 0;
  for (const List& v : s.values) longest = std::max(longest, v.size());
  ASSERT_EQ(longest, 29u);  // block_size_y; block_size_x 32 goes only with block_size_y 32
  const size_t n = longest + 1;
  const std::vector<size_t> picks = spread(s, n);
  std::vector<size_t> even;
  for (size_t i = 0; i < n; ++i) even.push_back(i * s.size() / n);
  size_t even_missed = 0;
  for (size_t p = 0; p < s.values.size(); ++p) {
    EXPECT_EQ(values_seen(s, picks, p), s.values[p].size()) << (*s.names)[p];
    even_missed += s.values[p].size() - values_seen(s, even, p);
  }
  EXPECT_GT(even_missed, 0u) << "evenly spaced picks show every value too: no test of spread";
  EXPECT_EQ(spread(s, n), picks) << "the same picks every time";
}

TEST(Spread, TheFirstComesFirstAndOnlyTheChosenPositionsArePicked) {
  Job job = job_with(R"([{"Name": "a", "Type": "int", "Values": "[1,2,3,4]"},
                         {"Name": "b", "Type": "int", "Values": "[1,2,3,4]"}])",
                     "[]");
  Space s = build_space(job);
  const std::vector<size_t> three = spread(s, 3, 5);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0], 5u);
  EXPECT_EQ(std::count(three.begin(), three.end(), 5u), 1);
  // a = 2 is position 5's value: the other two picks show other values of a and of b.
  EXPECT_EQ(values_seen(s, three, 0), 3u);
  EXPECT_EQ(values_seen(s, three, 1), 3u);
  // Asking for the whole space (or more) gives all of it in order, the first still first.
  std::vector<size_t> all = spread(s, 100, 5);
  ASSERT_EQ(all.size(), 16u);
  EXPECT_EQ(all[0], 5u);
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
  // Among some positions: only those, and a first that is not among them is left out.
  const std::vector<size_t> odd = {1, 3, 5, 7, 9, 11, 13, 15};
  for (size_t i : spread_among(s, odd, 4, 2)) EXPECT_EQ(i % 2, 1u) << i;
  EXPECT_EQ(spread_among(s, {}, 4, 2).size(), 0u);
  EXPECT_TRUE(spread(s, 0, 5).empty());
}

TEST(Spread, ParametersWithThousandsOfValuesAreSpreadByValueAlone) {
  // 4097 x 4097 pairs of values: more than spread keeps track of; the values still spread.
  Job job = job_with(R"js([{"Name": "a", "Type": "int", "Values": "list(range(4097))"},
                           {"Name": "b", "Type": "int", "Values": "list(range(4097))"}])js",
                     R"([{"Expression": "a < 3", "Parameters": ["a"]}])");
  Space s = build_space(job);
  ASSERT_EQ(s.size(), 3u * 4097u);
  const std::vector<size_t> picks = spread(s, 20);
  ASSERT_EQ(picks.size(), 20u);
  EXPECT_EQ(values_seen(s, picks, 0), 3u);
  EXPECT_EQ(values_seen(s, picks, 1), 20u);
}

}  // namespace
}  // namespace gputune
