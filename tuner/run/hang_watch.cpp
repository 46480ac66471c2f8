#include "tuner/run/hang_watch.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "db/store.h"
#include "tuner/common/command_line.h"
#include "tuner/common/exit_codes.h"
#include "tuner/common/stop_signals.h"
#include "tuner/run/measurement_row.h"

namespace gputune::tuner {

HangWatch::HangWatch(std::string db_path, std::int64_t run_id, double limit_s, std::string resume,
                     int report_fd, std::function<bool()> stopping, double spent_before_s)
    : db_path_(std::move(db_path)),
      run_id_(run_id),
      limit_(limit_s),
      resume_(std::move(resume)),
      report_fd_(report_fd),
      stopping_(std::move(stopping)),
      spent_before_(spent_before_s),
      thread_([this] { watch(); }) {}

HangWatch::~HangWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HangWatch::begin(const db::MeasurementRecord& row, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = true;
  since_ = std::chrono::steady_clock::now();
  row_ = row, what_ = what;
  cv_.notify_all();
}

void HangWatch::end() {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = false;
}

void HangWatch::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!quit_) {
    if (!active_) {
      cv_.wait(lock);
      continue;
    }
    const auto deadline =
        since_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit_);
    const auto begun = since_;
    cv_.wait_until(lock, deadline);
    if (!quit_ && active_ && since_ == begun && std::chrono::steady_clock::now() >= deadline)
      stop_the_run();
  }
}

void HangWatch::stop_the_run() {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limit_.count());
  const std::string hung = std::string("hung: its measurement did not return within ") + limit +
                           " s (--kernel-timeout), and a running kernel cannot be interrupted";
  const std::string message = "stopped: " + what_ + " hung (no return within " + limit + " s); `" +
                              resume_ + "` goes on without it";
  stop(db::Status::kTimeout, hung, message, "hung");
}

void HangWatch::stop_after_lost_context(const std::string& error, const std::string& reason) {
  std::unique_lock<std::mutex> lock(mu_);  // the watch thread must not stop the run meanwhile
  const std::string message = "stopped: " + what_ + " lost the CUDA context (" + error + "); `" +
                              resume_ + "` goes on without it";
  stop(db::Status::kRuntime, reason, message, "fault");
}

void HangWatch::stop(db::Status status, const std::string& reason, const std::string& message,
                     const char* kind) {
  // This process's measuring time (from when the watch began, as the pipeline's deadline).
  const double spent =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  try {
    db::Store store(db_path_);
    db::MeasurementRecord m = row_;  // as `run` built it (tuner/run/measurement_row.h)
    set_failed(m, status, reason);
    store.add_measurement(m);
    store.stop_run(run_id_, db::RunStatus::kInterrupted, message);
    store.set_run_seconds_spent(run_id_, spent_before_ + spent);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gputune: could not store that the run stopped: %s\n", e.what());
  }
  std::fprintf(stderr, "\ngputune: %s\n", message.c_str());
  std::fflush(stderr);
  if (report_fd_ >= 0) {  // one short write: the supervisor reads it after this process ends
    const bool stopping = stopping_ && stopping_();  // then there is nothing to go on with
    char line[4096];                                 // at most PIPE_BUF: written at once
    const int n =
        std::snprintf(line, sizeof line, "%s %lld %.3f %.3900s\n", stopping ? "stop" : kind,
                      static_cast<long long>(run_id_), spent, what_.c_str());
    if (n > 0 && write(report_fd_, line, static_cast<size_t>(n)) != n)
      std::fprintf(stderr, "gputune: could not tell the supervisor: %s\n", std::strerror(errno));
  }
  std::_Exit(kExitInterrupted);  // the driver ends the kernel and frees the GPU with the process
}

namespace {

constexpr const char* kLinkVariable = "GPUTUNE_SUPERVISOR";  // "FD,PID,SPENT"

volatile sig_atomic_t g_child = 0;        // the running child's pid, 0 between children
volatile sig_atomic_t g_stop_signal = 0;  // a stop signal reached the supervisor
volatile sig_atomic_t g_forwarded = 0;    // copies forwarded so far

// A stop signal to the supervisor. One from the terminal (SI_KERNEL) went to the whole foreground
// process group, the child included; one sent to this process alone (kill PID) is passed on: the
// first marked as a copy, later ones plain (the child's "again to quit now").
void on_supervisor_signal(int sig, siginfo_t* info, void*) {
  g_stop_signal = 1;
  if (info && info->si_code == SI_KERNEL) return;
  const pid_t child = g_child;
  if (child <= 0) return;
  if (!g_forwarded) {
    union sigval v {};
    v.sival_int = kForwardedSignal;
    sigqueue(child, sig, v);
  } else {
    kill(child, sig);
  }
  g_forwarded = g_forwarded + 1;
}

}  // namespace

SupervisorLink supervisor_link() {
  static const SupervisorLink link = [] {
    SupervisorLink l;
    const char* v = std::getenv(kLinkVariable);
    if (!v) return l;
    long long fd = -1, pid = 0;
    double spent = 0;
    if (std::sscanf(v, "%lld,%lld,%lf", &fd, &pid, &spent) != 3 || fd < 0 || pid <= 0 ||
        fcntl(static_cast<int>(fd), F_GETFD) < 0)
      return l;  // not a link this program made: run unsupervised
    l.fd = static_cast<int>(fd), l.budget_spent_s = spent > 0 ? spent : 0;
    fcntl(l.fd, F_SETFD, FD_CLOEXEC);  // not passed on to anything this process starts
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != static_cast<pid_t>(pid)) raise(SIGTERM);  // it died before prctl
    unsetenv(kLinkVariable);
    return l;
  }();
  return link;
}

bool supervisor_stop_requested() noexcept { return g_stop_signal != 0; }

namespace {

/// Installs the handler that forwards SIGINT and SIGTERM to the tuning process, for each this
/// process would act on (one the shell set to be ignored stays ignored, and the child inherits
/// that); returns them.
sigset_t forward_stop_signals() {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_sigaction = on_supervisor_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sig, &sa, nullptr);
    sigaddset(&stops, sig);
  }
  return stops;
}

/// How one tuning process ended: its wait status and what its HangWatch wrote on the link.
struct ChildEnd {
  int status = 0;
  std::string report;
};

/// Starts `gputune ARGS` with the link to this supervisor (and the `spent` seconds of the time
/// budget earlier processes used) in its environment, and waits for it to end.
ChildEnd run_child(const std::vector<std::string>& args, double spent, const sigset_t& stops) {
  int link[2];
  if (pipe2(link, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create a pipe to supervise the run: ") +
                             std::strerror(errno));
  fcntl(link[1], F_SETFD, 0);  // the child's end stays open across exec
  fcntl(link[0], F_SETFL, O_NONBLOCK);
  std::vector<std::string> words{"gputune"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::ostringstream value;
  value.precision(17);
  value << link[1] << "," << getpid() << "," << spent;
  std::string variable = std::string(kLinkVariable) + "=" + value.str();
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kLinkVariable, std::strlen(kLinkVariable)) != 0 ||
        (*e)[std::strlen(kLinkVariable)] != '=')
      envp.push_back(*e);
  envp.push_back(variable.data());
  envp.push_back(nullptr);

  // A stop signal between here and g_child being set waits (blocked), then is forwarded.
  sigset_t before;
  sigprocmask(SIG_BLOCK, &stops, &before);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &before);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  close(link[1]);
  if (rc != 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    close(link[0]);
    throw std::runtime_error(std::string("cannot start the tuning process: ") + std::strerror(rc));
  }
  g_forwarded = 0;
  g_child = pid;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  ChildEnd end;
  while (waitpid(pid, &end.status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  char report[4097] = {};
  const ssize_t n = read(link[0], report, sizeof report - 1);
  close(link[0]);
  if (n > 0) end.report.assign(report, static_cast<std::size_t>(n));
  return end;
}

/// What a supervised command left behind: the variants that hung or faulted are not in the
/// ranking.
void print_left_behind(std::ostream& log, const std::vector<std::string>& hung_names,
                       const std::vector<std::string>& fault_names) {
  auto list = [&](const std::vector<std::string>& names, const char* what, const char* as) {
    if (names.empty()) return;
    const bool one = names.size() == 1;
    log << "gputune: " << names.size() << " variant" << (one ? "" : "s") << " " << what << " and "
        << (one ? "is" : "are") << " stored as " << as << ": ";
    for (size_t i = 0; i < names.size(); ++i) log << (i ? "; " : "") << names[i];
    log << "\n";
  };
  list(hung_names, "hung", "timeout");
  list(fault_names, "faulted (the CUDA context was lost)", "runtime");
}

}  // namespace

int run_restarting(std::vector<std::string> args, int max_restarts, std::ostream& log,
                   bool survive_child_signal) {
  const sigset_t stops = forward_stop_signals();
  double spent = 0;
  std::vector<std::string> hung_names, fault_names;
  int restarts = 0;  // after hangs; a fault's restart is certain progress and is not counted
  for (;;) {
    const ChildEnd child = run_child(args, spent, stops);
    const int status = child.status;
    if (WIFSIGNALED(status)) {  // end as it did
      const int sig = WTERMSIG(status);
      if (survive_child_signal) {
        log << "gputune: the tuning process was killed by signal " << sig << " (" << strsignal(sig)
            << ")\n";
        return 128 + sig;
      }
      signal(sig, SIG_DFL);
      raise(sig);
      return 128 + sig;
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitInternal;
    long long run = 0;
    double child_spent = 0;
    int name_at = 0;
    char kind[8] = {};
    const char* report = child.report.c_str();
    const bool reported =
        !child.report.empty() &&
        std::sscanf(report, "%7s %lld %lf %n", kind, &run, &child_spent, &name_at) == 3 &&
        name_at > 0;
    const bool hung = reported && std::strcmp(kind, "hung") == 0;
    const bool fault = reported && std::strcmp(kind, "fault") == 0;
    std::string name = reported ? report + name_at : "";
    if (!name.empty() && name.back() == '\n') name.pop_back();
    // The same variant reported twice would mean resume did not skip it: stop rather than loop.
    const bool again =
        fault && std::find(fault_names.begin(), fault_names.end(), name) != fault_names.end();
    if (hung) hung_names.push_back(name);
    if (fault && !again) fault_names.push_back(name);
    if (!(hung || fault) || again || code != kExitInterrupted || g_stop_signal) {
      if (again)
        log << "gputune: not restarting: " << name
            << " lost the CUDA context again after a restart that should have skipped it\n";
      print_left_behind(log, hung_names, fault_names);
      return code;
    }
    spent += child_spent;
    if (hung && restarts >= max_restarts) {
      log << "gputune: not restarting: " << restarts << " restart" << (restarts == 1 ? "" : "s")
          << " after hung kernels already (--max-restarts " << max_restarts << ")\n";
      print_left_behind(log, hung_names, fault_names);
      return code;
    }
    args = with_resume(args, run);
    if (hung)
      log << "gputune: restarting to measure the rest (" << ++restarts << " of at most "
          << max_restarts << "): gputune " << shell_command(args) << "\n";
    else
      log << "gputune: " << name
          << " lost the CUDA context (stored as runtime); going on in a new process: gputune "
          << shell_command(args) << "\n";
    log.flush();
  }
}

}  // namespace gputune::tuner
