/** \file tuner/common/command_line.h
 * Owns: gputune command lines as the user sees them: quoting a word so that a POSIX shell reads
 * it back unchanged, joining words into a command a user can paste, and the command that goes on
 * with a stopped run (the same options, `--resume RUN`). Used for every command gputune prints
 * or hands to /bin/sh (the restart and resume messages of `run`, the CPU emulator's host
 * compiler).
 * Must not: run anything.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gputune::tuner {

/// `word` as one shell word: unchanged when it holds only characters no shell treats specially,
/// else in single quotes (a quote inside written as '\'').
std::string shell_quote(std::string_view word);

/// The words quoted and joined by spaces.
std::string shell_command(const std::vector<std::string>& words);

/// `args` (a command's words after "gputune") with its --resume option, if any, replaced by
/// `--resume RUN` at the end, and without --skip-unchanged (refused with --resume).
std::vector<std::string> with_resume(const std::vector<std::string>& args, std::int64_t run);

/// "gputune " + the quoted words of with_resume(args, run).
std::string resume_command(const std::vector<std::string>& args, std::int64_t run);

}  // namespace gputune::tuner
