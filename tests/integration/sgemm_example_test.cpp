// The sgemm example (configs/examples/sgemm.json) on the CPU emulator: `gputune check` runs its
// configurations at sizes no tile divides and compares them with the default configuration. A
// sample of the whole space, and every configuration near the fast ones (the default, float4 and
// two stages, the model's top on an H100) at an odd size (scalar fallbacks) and at a multiple of
// 4 that no tile divides (float4 loads and stores, partial tiles).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "test_util.h"

namespace gputune {
namespace {

using test::run_gputune;

struct CheckSummary {
  size_t checked = 0, space = 0;
  std::string size, reference;
  bool all_agree = false;
};

/// The closing line of `gputune check`.
CheckSummary summary(const std::string& out) {
  static const std::regex line(
      R"(checked (\d+) of (\d+) configurations on the CPU at ProblemSize (\S+) against the )"
      R"(default configuration (\S+): (all agree|\d+ differ or fail))");
  CheckSummary s;
  std::smatch m;
  if (!std::regex_search(out, m, line)) return s;
  s.checked = std::stoul(m[1]);
  s.space = std::stoul(m[2]);
  s.size = m[3];
  s.reference = m[4];
  s.all_agree = m[5] == "all agree";
  return s;
}

std::string sgemm_job() { return (test::examples_dir() / "sgemm.json").string(); }

constexpr const char* kDefault = "128,128,8,64,32,8,8,4,2";  // BM,BN,BK,WM,WN,TM,TN,vector,stages

TEST(SgemmExample, ItsSpaceHasTheFastConfigurations) {
  auto r = run_gputune("space '" + sgemm_job() + "' --count");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(std::stoul(r.out), 328u) << r.out;
  r = run_gputune("space '" + sgemm_job() + "' --list");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (
      const char* fast :
      {R"({"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "vector_width": 4, "stages": 2})",
       R"({"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "vector_width": 4, "stages": 2})",
       R"({"BM": 128, "BN": 256, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "vector_width": 2, "stages": 2})"})
    EXPECT_NE(r.out.find(fast), std::string::npos) << fast;
}

// 40 configurations spread over the space, at a prime size: every tile is partial, no row is
// 8- or 16-byte aligned, so every vector access falls back to scalar ones.
TEST(SgemmExample, ASampleOfTheSpaceAgreesWithTheDefaultAtAnOddSize) {
  auto r = run_gputune("check '" + sgemm_job() + "' --size 37 --limit 40");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const CheckSummary s = summary(r.out);
  EXPECT_EQ(s.checked, 40u) << r.out;
  EXPECT_EQ(s.space, 328u) << r.out;
  EXPECT_EQ(s.size, "37");
  EXPECT_EQ(s.reference, kDefault);
  EXPECT_TRUE(s.all_agree) << r.out;
}

// The 32 configurations of 128 and 256 tiles with 8 x 8 thread tiles (the default and the
// model's top among them), at an odd size above 128 and at a multiple of 4 that no tile divides.
TEST(SgemmExample, TheFastConfigurationsAgreeWithAndWithoutVectorAccesses) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(sgemm_job()));
  const std::map<std::string, std::string> values{
      {"BM", "[128, 256]"}, {"BN", "[128, 256]"},       {"BK", "[8, 16]"},
      {"WM", "[32, 64]"},   {"WN", "[32, 64]"},         {"TM", "[8]"},
      {"TN", "[8]"},        {"vector_width", "[2, 4]"}, {"stages", "[1, 2]"}};
  for (auto& p : job["ConfigurationSpace"]["TuningParameters"])
    p["Values"] = values.at(p["Name"].get<std::string>());
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "sgemm.cu").string();
  test::write_file(dir / "fast.json", job.dump(1));
  for (const char* size : {"133", "132"}) {
    auto r =
        run_gputune("check '" + (dir / "fast.json").string() + "' --size " + size + " --limit 0");
    EXPECT_EQ(r.exit_code, 0) << size << ": " << r.out;
    const CheckSummary s = summary(r.out);
    EXPECT_EQ(s.checked, 32u) << r.out;
    EXPECT_EQ(s.space, 32u) << r.out;
    EXPECT_EQ(s.size, size);
    EXPECT_EQ(s.reference, kDefault);
    EXPECT_TRUE(s.all_agree) << r.out;
  }
}

}  // namespace
}  // namespace gputune
