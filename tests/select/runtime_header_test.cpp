// The runtime header (select/runtime_header.h), compiled with the host compiler as an application
// would (C++17, no gputune include), must answer every probe as select::Table::choose does on the
// same table: the same configuration, way (measured / nearest / learned), device and contexts.
#include "select/runtime_header.h"

#include <gtest/gtest.h>

#include <sstream>

#include "select/fixture.h"
#include "select/select.h"

namespace gputune::select {
namespace {

struct Probe {
  std::string device, arch;
  std::vector<std::int64_t> size;
};

/// One line per probe: "ok|config|how|device|from;from;|expected median" or "error|message".
std::string expected_line(const Table& table, const Probe& p) {
  auto c = table.choose("vector_add", {p.device, p.arch}, {p.size, {}});
  if (!c) return "error|" + c.error().message;
  std::ostringstream out;
  out << "ok|" << c->config << "|" << to_string(c->how) << "|" << c->device << "|";
  for (const std::string& f : c->from) out << f << ";";
  out << "|" << (c->expected ? std::to_string(c->expected->median) : "-");
  return out.str();
}

std::vector<Probe> probes() {
  std::vector<Probe> out;
  const std::vector<std::int64_t> sizes = {1,    300,  512,  700,  1024,  1500,  2048,
                                           3000, 4096, 6000, 8192, 16384, 100000};
  for (const auto& [device, arch] : std::vector<std::pair<std::string, std::string>>{
           {"NVIDIA H100 80GB HBM3", "sm_90"},
           {"nvidia h200", ""},              // by name, whatever the case
           {"NVIDIA GH200 480GB", "sm_90"},  // the architecture's device with most contexts
           {"NVIDIA RTX A4000", "sm_86"}})
    for (auto x : sizes)
      for (auto y : sizes) out.push_back({device, arch, {x, y}});
  out.push_back({"NVIDIA H100 80GB HBM3", "sm_90", {4096, 4096, 1}});  // a third size of 1
  out.push_back({"NVIDIA H100 80GB HBM3", "sm_90", {4096, 4096, 2}});
  out.push_back({"NVIDIA A100", "sm_80", {1024, 1024}});         // not tuned: an error
  out.push_back({"NVIDIA H100 80GB HBM3", "sm_90", {1024}});     // too few sizes
  out.push_back({"NVIDIA H100 80GB HBM3", "sm_90", {1024, 0}});  // not positive
  return out;
}

TEST(RuntimeHeader, CompiledItAnswersAsTableChooseForEveryProbe) {
  const DecisionTable data = test::three_devices();
  ASSERT_EQ(data.kernels[0].devices[0].method, How::kLearned);  // the tree is exercised
  const std::string header = runtime_header(data.kernels[0], {"three_devices", "2026-11-27"});
  auto table = Table::from(data);
  ASSERT_TRUE(table) << table.error().message;

  gputune::test::TempDir dir;
  gputune::test::write_file(dir / "vector_add_runtime.h", header);
  std::ostringstream main;
  main << "#include \"vector_add_runtime.h\"\n#include <cstdio>\n"
          "static void probe(const char* d, const char* a, std::vector<long long> s) {\n"
          "  auto c = gputune_tuned::vector_add::choose(d, a, s.data(), (int)s.size());\n"
          "  if (!c.ok) { std::printf(\"error|%s\\n\", c.error.c_str()); return; }\n"
          "  std::printf(\"ok|%s|%s|%s|\", c.config, gputune_tuned::to_string(c.how), c.device);\n"
          "  for (auto& f : c.from) std::printf(\"%s;\", f.c_str());\n"
          "  if (c.has_expected) std::printf(\"|%s\\n\", "
          "std::to_string(c.expected.median).c_str());\n"
          "  else std::printf(\"|-\\n\");\n}\nint main() {\n";
  std::vector<std::string> want;
  for (const Probe& p : probes()) {
    main << "  probe(\"" << p.device << "\", \"" << p.arch << "\", {";
    for (auto s : p.size) main << s << "LL, ";
    main << "});\n";
    want.push_back(expected_line(*table, p));
  }
  main << "}\n";
  gputune::test::write_file(dir / "main.cpp", main.str());
  const auto exe = (dir / "probe").string();
  auto built = gputune::test::run_command(std::string(GPUTUNE_HOST_CXX) +
                                          " -std=c++17 -Wall -Wextra -Wconversion -pedantic "
                                          "-Werror -O1 -o '" +
                                          exe + "' '" + (dir / "main.cpp").string() + "' 2>&1");
  ASSERT_EQ(built.exit_code, 0) << built.out;
  auto ran = gputune::test::run_command("'" + exe + "'");
  ASSERT_EQ(ran.exit_code, 0) << ran.out;
  std::istringstream got(ran.out);
  std::string line;
  std::map<std::string, int> hows;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::getline(got, line)) << "probe " << i << " gave no line";
    const std::string& w = want[i];
    if (w.rfind("error|", 0) == 0) {
      EXPECT_EQ(line.rfind("error|", 0), 0u) << "probe " << i << ": " << line << "\nwant " << w;
    } else {
      EXPECT_EQ(line, w) << "probe " << i;
      ++hows[w.substr(w.find('|', 3) + 1, w.find('|', w.find('|', 3) + 1) - w.find('|', 3) - 1)];
    }
  }
  // Every way is reached by some probe.
  EXPECT_GT(hows["measured"], 0);
  EXPECT_GT(hows["nearest"], 0);
  EXPECT_GT(hows["learned"], 0);
  EXPECT_NE(ran.out.find("error|kernel 'vector_add' was not tuned on 'NVIDIA A100' nor on any "
                         "sm_80 device; it was tuned on: NVIDIA H100 80GB HBM3 (sm_90), NVIDIA "
                         "H200 (sm_90), NVIDIA RTX A4000 (sm_86)"),
            std::string::npos)
      << ran.out;
}

TEST(RuntimeHeader, NamesBecomeIdentifiersAndLiteralsStayLiterals) {
  EXPECT_EQ(runtime_namespace("vector_add"), "vector_add");
  EXPECT_EQ(runtime_namespace("matmul<float, 16>"), "matmul_float_16_");
  EXPECT_EQ(runtime_namespace("3mm"), "_3mm");
  DecisionTable data = test::three_devices();
  data.kernels[0].devices[1].name = "Evil \" */ \\ GPU\n?\?=";
  const std::string header = runtime_header(data.kernels[0]);
  // In comments the name has no line break; in code it is an escaped literal, and it compiles.
  EXPECT_NE(header.find("// Evil \" */ \\ GPU?\?\?="), std::string::npos) << header;
  EXPECT_NE(header.find("\"Evil \\042 */ \\134 GPU\\012\\077\\077=\""), std::string::npos);
  gputune::test::TempDir dir;
  gputune::test::write_file(dir / "evil.h", header);
  gputune::test::write_file(dir / "use.cpp", "#include \"evil.h\"\nint main() {}\n");
  auto built = gputune::test::run_command(std::string(GPUTUNE_HOST_CXX) +
                                          " -std=c++17 -Wall -Wextra -pedantic -Werror "
                                          "-fsyntax-only '" +
                                          (dir / "use.cpp").string() + "' 2>&1");
  EXPECT_EQ(built.exit_code, 0) << built.out;
  KernelTable empty;
  empty.name = "nothing";
  EXPECT_THROW(runtime_header(empty), std::invalid_argument);
}

}  // namespace
}  // namespace gputune::select
