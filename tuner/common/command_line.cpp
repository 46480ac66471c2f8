#include "tuner/common/command_line.h"

namespace gputune::tuner {

std::string shell_quote(std::string_view word) {
  constexpr std::string_view kPlain =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+-@%";
  if (!word.empty() && word.find_first_not_of(kPlain) == std::string_view::npos)
    return std::string(word);
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string_view("'\\''") : std::string_view(&c, 1);
  return q + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) {
    if (!s.empty()) s += ' ';
    s += shell_quote(w);
  }
  return s;
}

std::vector<std::string> with_resume(const std::vector<std::string>& args, std::int64_t run) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--resume=", 0) == 0) continue;
    // --resume goes on with the run whatever changed: the two are refused together (a batch
    // with --skip-unchanged restarting a job after a hang or a lost context hit that).
    if (args[i] == "--skip-unchanged") continue;
    out.push_back(args[i]);
  }
  out.push_back("--resume");
  out.push_back(std::to_string(run));
  return out;
}

std::string resume_command(const std::vector<std::string>& args, std::int64_t run) {
  return "gputune " + shell_command(with_resume(args, run));
}

}  // namespace gputune::tuner
