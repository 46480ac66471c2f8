#include "app/slurm.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tuner/common/command_line.h"
#include "variants/job.h"

extern char** environ;

namespace gputune::app {

namespace fs = std::filesystem;
using tuner::shell_command;
using tuner::shell_quote;

namespace {

fs::path absolute_of(const std::string& path, const std::string& field) {
  if (path.find('\n') != std::string::npos || path.find('\r') != std::string::npos)
    throw JobError("command line", field, "the path " + path + " holds a line break",
                   "give a path without line breaks (a batch script cannot name it)");
  return fs::absolute(fs::path(path)).lexically_normal();
}

/// A value of an `#SBATCH` line as sbatch reads it back: in double quotes, `\` and `"` escaped;
/// `%` doubled in a file name (sbatch's file name patterns: %a is the array index, %% a %).
std::string sbatch_value(const std::string& value, bool file_name) {
  std::string q = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
    if (file_name && c == '%') q += '%';
  }
  return q + "\"";
}

/// `--output` for a log in `logs` named `pattern` (whose % are sbatch's).
std::string output_line(const fs::path& logs, const std::string& pattern) {
  std::string dir = sbatch_value(logs.string() + "/", true);
  dir.pop_back();  // the closing quote: the pattern goes inside
  return "#SBATCH --output=" + dir + pattern + "\"\n";
}

std::string job_name(const fs::path& db) {
  std::string name = "gputune-" + db.stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return name;
}

std::string header(const SlurmOptions& o, const std::string& name) {
  std::string s = "#!/bin/bash\n#SBATCH --job-name=" + sbatch_value(name, false) + "\n";
  if (!o.partition.empty()) s += "#SBATCH --partition=" + sbatch_value(o.partition, false) + "\n";
  return s;
}

}  // namespace

SlurmPlan plan_slurm(const SlurmSuite& suite, const SlurmOptions& options) {
  if (suite.job_files.empty())
    throw JobError("command line", "SUITE", "the suite names no jobs",
                   "give suite files, folders of jobs or job files");
  for (const std::string& field : {options.partition, options.gres})
    if (field.find_first_of("\n\r") != std::string::npos)
      throw JobError("command line", "--partition/--gres", "a value holds a line break",
                     "give the partition and the generic resource on one line");
  SlurmPlan p;
  p.db = absolute_of(suite.db, "--db");
  p.shards = p.db.string() + ".shards";
  p.logs = p.db.string() + ".logs";
  p.array_file = p.db.string() + ".sbatch";
  p.merge_file = p.db.string() + ".merge.sbatch";
  const std::size_t n_jobs = suite.job_files.size();
  const std::size_t n_tasks =
      options.tasks == 0 ? n_jobs : std::min<std::size_t>(options.tasks, n_jobs);
  p.task_jobs.resize(n_tasks);
  for (std::size_t k = 0; k < n_jobs; ++k)
    p.task_jobs[k % n_tasks].push_back(
        absolute_of(suite.job_files[k].string(), "SUITE"));  // job k: task k % tasks
  const std::string gputune = shell_quote(suite.gputune);
  const auto shard = [&](std::size_t i) {
    return p.shards / ("task-" + std::to_string(i) + ".db");
  };
  const std::string name = job_name(p.db);

  // The array: task i tunes its jobs into its own shard.
  std::ostringstream a;
  a << header(options, name);
  a << "#SBATCH --array=0-" << n_tasks - 1;
  if (options.nodes_per_type > 0) a << '%' << options.nodes_per_type;
  a << "\n";
  if (!options.gres.empty() && options.gres != "none")
    a << "#SBATCH --gres=" << sbatch_value(options.gres, false) << "\n";
  a << output_line(p.logs, "task-%a-%A.out");
  a << "# Written by `gputune batch --slurm`: " << n_jobs << " job" << (n_jobs == 1 ? "" : "s")
    << " in " << n_tasks << " array task" << (n_tasks == 1 ? "" : "s")
    << ", each tuning its jobs into its own shard\n"
       "# of the database on the GPU its node has; "
    << p.merge_file.filename().string()
    << " merges the shards and writes the report after them.\n"
       "# The tasks inherit the environment sbatch was called with (sbatch --export=ALL).\n"
       "set -u\n"
       "gputune="
    << gputune << "\ncase \"${SLURM_ARRAY_TASK_ID:-}\" in\n";
  for (std::size_t i = 0; i < n_tasks; ++i) {
    std::vector<std::string> words = {"batch"};
    for (const fs::path& j : p.task_jobs[i]) words.push_back(j.string());
    words.insert(words.end(), {"--db", shard(i).string()});
    words.insert(words.end(), suite.batch_args.begin(), suite.batch_args.end());
    a << "  " << i << ") exec \"$gputune\" " << shell_command(words) << " ;;\n";
  }
  a << "  *) echo \"gputune: array task '${SLURM_ARRAY_TASK_ID:-}' is not one of this script's 0-"
    << n_tasks - 1 << ": submit it with sbatch as written\" >&2; exit 2 ;;\nesac\n";
  p.array_script = a.str();

  // The merge: after every task (afterany: also after a task that failed), every shard there is
  // into the database, then the suite's report from it.
  std::ostringstream m;
  m << header(options, name + "-merge");
  m << output_line(p.logs, "merge-%j.out");
  m << "# Written by `gputune batch --slurm`: submitted with --dependency=afterany on the array of "
    << p.array_file.filename().string() << ".\nset -u\ngputune=" << gputune << "\nshards=()\n";
  m << "for shard in";
  for (std::size_t i = 0; i < n_tasks; ++i) m << " \\\n    " << shell_quote(shard(i).string());
  m << "; do\n"
       "  if [ -f \"$shard\" ]; then shards+=(\"$shard\"); else echo \"gputune: $shard is "
       "missing: its array task stored nothing (see its log in \""
    << shell_quote(p.logs.string())
    << "\")\" >&2; fi\n"
       "done\n"
       "[ ${#shards[@]} -gt 0 ] || { echo \"gputune: no shard to merge\" >&2; exit 1; }\n"
       "\"$gputune\" db merge "
    << shell_quote(p.db.string())
    << " \"${shards[@]}\" || exit\n"
       "exec \"$gputune\" ";
  std::vector<std::string> report = {"batch"};
  for (const std::string& s : suite.suite_args) report.push_back(absolute_of(s, "SUITE").string());
  report.insert(report.end(),
                {"--db", p.db.string(), "--report-only", "--report-md",
                 p.db.string() + ".report.md", "--report-json", p.db.string() + ".report.json"});
  report.insert(report.end(), suite.report_args.begin(), suite.report_args.end());
  m << shell_command(report) << "\n";
  p.merge_script = m.str();

  p.submit_command = "id=$(sbatch --parsable " + shell_quote(p.array_file.string()) +
                     ") && sbatch --dependency=afterany:\"${id%%;*}\" " +
                     shell_quote(p.merge_file.string());
  return p;
}

void write_slurm_files(const SlurmPlan& plan) {
  for (const fs::path& d : {plan.shards, plan.logs}) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec)
      throw std::runtime_error("cannot create the folder " + d.string() + ": " + ec.message() +
                               ": give a --db in a folder you can write (on a file system every "
                               "node shares)");
  }
  for (const auto& [file, text] : {std::pair{plan.array_file, plan.array_script},
                                   std::pair{plan.merge_file, plan.merge_script}}) {
    const fs::path tmp = file.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
      if (!out.flush())
        throw std::runtime_error("cannot write " + tmp.string() +
                                 ": give a --db in a folder you can write");
    }
    std::error_code ec;
    fs::permissions(tmp, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add, ec);
    fs::rename(tmp, file, ec);
    if (ec) throw std::runtime_error("cannot write " + file.string() + ": " + ec.message());
  }
}

namespace {

struct Captured {
  int exit_code = 0;
  std::string out, err;
};

/// Runs `words` (words[0] looked up on $PATH) and returns its exit code and output; errno ENOENT
/// as -ENOENT when the program is not found.
Captured run_capturing(const std::vector<std::string>& words) {
  int out_fds[2], err_fds[2];
  if (pipe2(out_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
  if (pipe2(err_fds, O_CLOEXEC) != 0) {
    close(out_fds[0]), close(out_fds[1]);
    throw std::runtime_error(std::strerror(errno));
  }
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, out_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, err_fds[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (const std::string& w : words) argv.push_back(const_cast<char*>(w.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, words[0].c_str(), &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  close(out_fds[1]), close(err_fds[1]);
  Captured c;
  if (rc != 0) {
    close(out_fds[0]), close(err_fds[0]);
    c.exit_code = -rc;
    return c;
  }
  pollfd fds[2] = {{out_fds[0], POLLIN, 0}, {err_fds[0], POLLIN, 0}};
  std::string* into[2] = {&c.out, &c.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        into[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return c;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  return s;
}

/// One sbatch call; the job id it printed (`--parsable`: "ID" or "ID;CLUSTER").
std::string sbatch_id(const std::vector<std::string>& words, const std::string& what) {
  const Captured c = run_capturing(words);
  const std::string command = shell_command(words);
  if (c.exit_code == -ENOENT)
    throw SlurmError("gputune batch: --submit: `" + words[0] +
                         "` was not found on $PATH, so nothing was submitted. Fix: run on a "
                         "machine with the SLURM client (a login node; Debian: apt-get install "
                         "slurm-client), or submit the scripts written beside the database "
                         "yourself",
                     1);
  if (c.exit_code < 0)
    throw SlurmError(
        "gputune batch: --submit: cannot run `" + command + "`: " + std::strerror(-c.exit_code), 1);
  const std::string id = trimmed(c.out.substr(0, c.out.find(';')));
  if (c.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789_") != std::string::npos)
    throw SlurmError("gputune batch: --submit: `" + command + "` refused the " + what + " (exit " +
                         std::to_string(c.exit_code) +
                         "): " + trimmed(c.err.empty() ? c.out : c.err) +
                         ". Fix: correct what sbatch names (--partition, --gres: `sinfo -s` "
                         "lists the partitions, `sinfo -o '%P %G'` their generic resources)",
                     2);
  return id;
}

}  // namespace

SlurmSubmission submit_slurm(const SlurmPlan& plan, const std::string& sbatch) {
  SlurmSubmission s;
  s.array_job = sbatch_id({sbatch, "--parsable", plan.array_file.string()}, "job array");
  try {
    s.merge_job = sbatch_id(
        {sbatch, "--parsable", "--dependency=afterany:" + s.array_job, plan.merge_file.string()},
        "merge job");
  } catch (const SlurmError& e) {
    throw SlurmError(std::string(e.what()) + ". The array " + s.array_job +
                         " was submitted: after fixing, submit the merge with `sbatch "
                         "--dependency=afterany:" +
                         s.array_job + " " + shell_quote(plan.merge_file.string()) + "`",
                     e.exit_code);
  }
  return s;
}

std::string gputune_binary() {
  if (const char* env = std::getenv("GPUTUNE"); env && *env) {
    const std::string g = env;
    return g.find('/') == std::string::npos ? g : fs::absolute(g).lexically_normal().string();
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("gputune") : self.string();
}

}  // namespace gputune::app
