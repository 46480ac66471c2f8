#include "tuner/common/command_line.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gputune::tuner {
namespace {

// What /bin/sh makes of a command line: each word it reads, on a line of its own.
std::vector<std::string> words_the_shell_reads(const std::string& line) {
  const auto r = test::run_command("for w in " + line + "; do printf '%s\\n' \"$w\"; done");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> words;
  size_t at = 0;
  for (size_t nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
    words.push_back(r.out.substr(at, nl - at));
  return words;
}

TEST(CommandLine, TheShellReadsEveryQuotedWordBackUnchanged) {
  const std::vector<std::string> words = {"run",
                                          "my jobs/mm.json",
                                          "--db",
                                          "it's here.db",
                                          "$HOME",
                                          "`id`",
                                          "a\"b",
                                          "*",
                                          "semi;colon",
                                          "back\\slash",
                                          "tab\there",
                                          "",
                                          "--cache-dir=/tmp/x,y:z@1%+"};
  EXPECT_EQ(words_the_shell_reads(shell_command(words)), words);
}

TEST(CommandLine, PlainWordsStayReadable) {
  EXPECT_EQ(shell_command({"run", "configs/examples/mm.json", "--db", "/tmp/g.db", "-j", "4"}),
            "run configs/examples/mm.json --db /tmp/g.db -j 4");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(CommandLine, TheResumeCommandKeepsTheOptionsAndReplacesAnEarlierResume) {
  EXPECT_EQ(resume_command({"run", "job dir/j.json", "--strategy", "random", "--budget", "20"}, 7),
            "gputune run 'job dir/j.json' --strategy random --budget 20 --resume 7");
  EXPECT_EQ(resume_command({"run", "j.json", "--resume", "3", "--gpu", "1"}, 3),
            "gputune run j.json --gpu 1 --resume 3");
  EXPECT_EQ(resume_command({"run", "--resume=3", "j.json"}, 4), "gputune run j.json --resume 4");
}

}  // namespace
}  // namespace gputune::tuner
