// app/: `gputune COMMAND --help` lists each command's options, one line each (the details are in
// docs/commands.md), and the usage names every command by group.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace gputune {
namespace {

const std::vector<std::string> kCommands = {
    "run",  "batch", "space",  "generate", "check",    "prune", "replay", "best",  "show",
    "runs", "cache", "export", "import",   "db merge", "serve", "submit", "cancel"};

TEST(Help, EveryCommandListsItsOptionsOneLineEach) {
  for (const std::string& cmd : kCommands) {
    auto r = test::run_gputune(cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
    std::istringstream in(r.out);
    std::string line;
    bool options = false;  // past "Usage:" and its command line
    int listed = 0;
    while (std::getline(in, line)) {
      if (line.rfind("Usage:", 0) == 0) {
        std::getline(in, line);  // "  gputune run [OPTION...] JOB"
        EXPECT_EQ(line.find("positional parameters"), std::string::npos)
            << cmd << ": name the positional argument (positional_help)";
        options = true;
        continue;
      }
      if (!options || line.empty()) continue;
      const auto first = line.find_first_not_of(' ');
      EXPECT_TRUE(first != std::string::npos && line[first] == '-')
          << "`gputune " << cmd << " --help`: a line that continues an option's description ("
          << line << "): shorten it to one line and move the detail to docs/commands.md\n"
          << r.out;
      EXPECT_LE(line.size(), 120u) << cmd << ": " << line;
      listed += first != std::string::npos && line[first] == '-';
    }
    EXPECT_TRUE(options) << cmd << "\n" << r.out;
    EXPECT_GE(listed, 2) << cmd << ": its options and --help\n" << r.out;
  }
}

TEST(Help, TheUsageNamesEveryCommandByGroup) {
  auto r = test::run_gputune("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* group : {"\ntuning:\n", "\ninspection:\n", "\ninterchange:\n", "\nservice:\n"})
    EXPECT_NE(r.out.find(group), std::string::npos) << group << r.out;
  for (const std::string& cmd : kCommands)
    EXPECT_NE(r.out.find("\n  " + cmd + " "), std::string::npos) << cmd << "\n" << r.out;
  EXPECT_NE(r.out.find("\n  devices "), std::string::npos) << r.out;
}

// --compile-nice (run, batch, serve) takes 0..19 and says so, naming the option, before it reads
// anything else.
TEST(Help, ACompileNiceOutside0To19IsRefusedNamingTheOption) {
  for (const std::string cmd : {"run no-such-job.json", "batch no-such-suite", "serve --no-gpu"}) {
    auto r = test::run_gputune(cmd + " --compile-nice 20");
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("--compile-nice"), std::string::npos) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("from 0"), std::string::npos) << cmd << "\n" << r.out;
  }
}

// So does serve's --rebuild-nice (its background rebuilds' priority).
TEST(Help, ARebuildNiceOutside0To19IsRefusedNamingTheOption) {
  for (const std::string n : {"20", "-1"}) {
    auto r = test::run_gputune("serve --no-gpu --rebuild-nice " + n);
    EXPECT_EQ(r.exit_code, 2) << n << "\n" << r.out;
    EXPECT_NE(r.out.find("--rebuild-nice " + n + ": give nice steps from 0"), std::string::npos)
        << r.out;
  }
}

}  // namespace
}  // namespace gputune
