// CPU emulation of CUDA kernels of the naive subset: see cpu_emulator.h.
#include "tuner/emulator/cpu_emulator.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <sstream>

#include "tuner/common/command_line.h"
#include "tuner/common/stop_signals.h"
#include "tuner/emulator/cpu_module_source.h"

#ifndef GPUTUNE_HOST_CXX
#define GPUTUNE_HOST_CXX "c++"
#endif

namespace gputune::embedded {
// The CUDA prelude the host compiler gets with every kernel: tuner/emulator/emulator_runtime.h,
// embedded at build time (cmake/embed_text.cmake).
extern const char kEmulatorRuntime[];
}  // namespace gputune::embedded

namespace gputune::tuner {

namespace fs = std::filesystem;

namespace {

// The host compilers now running, each the leader of a process group of its own (the shell and
// the compiler's own processes), so that interrupt_cpu_launches() ends them at once: with SIGTERM,
// on which the compiler driver deletes its temporary files, as on a terminal's Ctrl-C.
constexpr size_t kCompilerSlots = 256;
std::atomic<pid_t> g_compilers[kCompilerSlots];

void stop_compilers() noexcept {
  for (auto& slot : g_compilers)
    if (const pid_t pid = slot.load(); pid > 0) kill(-pid, SIGTERM);
}

/// Runs `cmd` with /bin/sh; its output (stdout and stderr) when it succeeds.
std::string run_compiler(const std::string& cmd) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw EmulatorError("cannot run the host compiler (pipe: " + std::string(strerror(errno)) +
                        "): " + cmd);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, pipe_fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const sigset_t mask = spawn_signal_mask();  // not this process's blocked stop signals
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::string shell = "/bin/sh", dash_c = "-c", command = cmd;
  char* argv[] = {shell.data(), dash_c.data(), command.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &files, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    throw EmulatorError("cannot run the host compiler (" + std::string(strerror(rc)) + "): " + cmd);
  }
  std::atomic<pid_t>* slot = nullptr;
  for (auto& s : g_compilers) {
    pid_t free_slot = 0;
    if (s.compare_exchange_strong(free_slot, pid)) {
      slot = &s;
      break;
    }
  }
  if (cpu_launches_interrupted()) kill(-pid, SIGTERM);  // interrupted while it started
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (slot) slot->store(0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw EmulatorError("host compiler failed (" + cmd + "):\n" + out.substr(0, 4000));
  return out;
}

// --- Faults and time limits of a launch ---------------------------------------------------
// A launch runs with this thread's FaultTrap armed: a fault in the kernel's code, or the
// expiry of the thread's CPU-time timer, jumps back to CpuModule::launch (siglongjmp out of the
// handler, which runs on an alternate stack so that a thread stack overflow is caught too).
// Signals that arrive while no launch of this thread is running go to the handler installed
// before ours (the default: the process ends as it would have without us).

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid  // glibc before 2.38 lacks the name
#endif

constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
int timer_signal() { return SIGRTMIN + 2; }

/// The prelude's gt::Deferral: while `depth` > 0 the kernel is inside C library code that holds
/// a lock, and an expired time limit is left in `signal` for the prelude to raise again.
struct Deferral {
  volatile sig_atomic_t depth, signal;
};

struct FaultTrap {
  sigjmp_buf env;
  volatile sig_atomic_t armed = 0;
  volatile sig_atomic_t signal = 0;
  void* volatile address = nullptr;
  Deferral* volatile deferral = nullptr;  ///< the launched kernel's library's, of this thread
};

/// This thread's trap while one of its launches runs (constant-initialised: safe in a handler).
thread_local FaultTrap* t_trap = nullptr;

// interrupt_cpu_launches(): the flag, and the threads inside a launch (their kernel thread ids;
// 0 is a free slot) that it sends the timer signal to. Lock-free atomics: safe in a handler.
std::atomic<int> g_interrupted{0};
constexpr int kLaunchSlots = 256;
std::atomic<pid_t> g_launching[kLaunchSlots];

/// Holds a slot of g_launching for this thread while it launches (none when all are taken: an
/// interrupt then reaches the launch at its end, or at its time limit).
class LaunchSlot {
 public:
  LaunchSlot() {
    const pid_t tid = gettid();
    for (auto& s : g_launching) {
      pid_t free = 0;
      if (s.compare_exchange_strong(free, tid)) {
        slot_ = &s;
        return;
      }
    }
  }
  LaunchSlot(const LaunchSlot&) = delete;
  LaunchSlot& operator=(const LaunchSlot&) = delete;
  ~LaunchSlot() {
    if (slot_) slot_->store(0);
  }

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

struct sigaction g_previous[NSIG];

void on_signal(int sig, siginfo_t* info, void* uc) {
  if (FaultTrap* t = t_trap; t && t->armed) {
    if (Deferral* d = t->deferral; sig == timer_signal() && d && d->depth > 0) {
      d->signal = sig;  // jumping out would leave a lock of the C library held for good
      return;
    }
    t->armed = 0;
    t->signal = sig;
    t->address = info ? info->si_addr : nullptr;
    siglongjmp(t->env, 1);
  }
  if (sig == timer_signal()) return;  // a timer that expired just after its launch ended
  const struct sigaction& prev = g_previous[sig];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uc);
  } else if (prev.sa_handler == SIG_IGN) {
    return;
  } else if (prev.sa_handler != SIG_DFL && !(prev.sa_flags & SA_SIGINFO)) {
    prev.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);  // as if we were never there: the pending signal ends the process
    raise(sig);
  }
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int sig : kFaultSignals) sigaction(sig, &sa, &g_previous[sig]);
    sigaction(timer_signal(), &sa, &g_previous[timer_signal()]);
  });
}

/// Per thread: the alternate signal stack and the CPU-time timer (RAII; freed at thread exit).
class ThreadTrapResources {
 public:
  ThreadTrapResources() {
    alt_.resize(std::max<size_t>(64 * 1024, static_cast<size_t>(SIGSTKSZ)));
    stack_t ss{};
    ss.ss_sp = alt_.data();
    ss.ss_size = alt_.size();
    if (sigaltstack(&ss, nullptr) != 0) alt_.clear();
    struct sigevent sev {};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = timer_signal();
    sev.sigev_notify_thread_id = static_cast<int>(gettid());
    has_timer_ = timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer_) == 0;
  }
  ThreadTrapResources(const ThreadTrapResources&) = delete;
  ThreadTrapResources& operator=(const ThreadTrapResources&) = delete;
  ~ThreadTrapResources() {
    if (has_timer_) timer_delete(timer_);
    if (!alt_.empty()) {
      stack_t ss{};
      ss.ss_flags = SS_DISABLE;
      sigaltstack(&ss, nullptr);
    }
  }
  /// Starts (seconds > 0) or stops (0) the timer; false when this thread has none.
  bool set_timer(double seconds) {
    if (!has_timer_) return false;
    itimerspec its{};
    const auto whole = static_cast<time_t>(seconds);
    its.it_value.tv_sec = whole;
    its.it_value.tv_nsec = static_cast<long>((seconds - static_cast<double>(whole)) * 1e9);
    return timer_settime(timer_, 0, &its, nullptr) == 0;
  }

 private:
  std::vector<char> alt_;
  timer_t timer_{};
  bool has_timer_ = false;
};

std::string fault_message(int sig, const void* address, double limit) {
  char at[32];
  std::snprintf(at, sizeof at, "%p", address);
  if (sig == timer_signal()) {
    char s[32];
    std::snprintf(s, sizeof s, "%g", limit);
    return std::string("stopped after ") + s +
           " s of CPU time: a kernel that never returns (a loop whose condition never changes), "
           "or a problem too large for the emulator (give a smaller --size or a larger "
           "--timeout)";
  }
  switch (sig) {
    case SIGSEGV:
      return std::string("segmentation fault at ") + at +
             ": the kernel accessed memory outside its arguments and shared memory (an index "
             "out of range, a bad pointer, or a thread stack beyond the emulator's 256 KiB)";
    case SIGBUS:
      return std::string("bus error at ") + at + ": the kernel accessed memory it may not";
    case SIGFPE:
      return "arithmetic fault: an integer division or remainder by zero (on a GPU its result is "
             "undefined)";
    case SIGILL:
      return "illegal instruction: the kernel's code reached undefined behaviour (the host "
             "compiler traps there, e.g. a non-void function that returns nothing)";
    default:
      return "signal " + std::to_string(sig);
  }
}

/// Runs the compile commands, `jobs` at a time. An interrupt ends them too (stop_compilers):
/// their failure is its doing, not the kernels'.
void run_compilers(const std::vector<std::string>& commands, int jobs) {
  std::atomic<size_t> next{0};
  std::vector<std::future<void>> work;
  for (int j = 0; j < jobs; ++j)
    work.push_back(std::async(std::launch::async, [&] {
      for (size_t c; (c = next++) < commands.size();) run_compiler(commands[c]);
    }));
  try {
    for (auto& w : work) w.get();
  } catch (const EmulatorError&) {
    if (cpu_launches_interrupted()) throw EmulatorInterrupted("interrupted while compiling");
    throw;
  }
  if (cpu_launches_interrupted()) throw EmulatorInterrupted("interrupted while compiling");
}

}  // namespace

void interrupt_cpu_launches() noexcept {
  g_interrupted.store(1);
  stop_compilers();
  const pid_t pid = getpid();
  for (auto& s : g_launching)
    if (const pid_t tid = s.load(); tid != 0) syscall(SYS_tgkill, pid, tid, timer_signal());
}

bool cpu_launches_interrupted() noexcept { return g_interrupted.load() != 0; }

void allow_cpu_launches() noexcept { g_interrupted.store(0); }

struct CpuModule::Impl {
  fs::path dir;
  std::vector<void*> handles;
  using Launch = const char* (*)(const unsigned*, const unsigned*, void**, unsigned long long);
  std::vector<Launch> launchers;
  using Count = unsigned long long (*)();
  std::vector<Count> vector_loads;  ///< per kernel: its library's count of the last launch
  using Smem = const void* (*)(unsigned long long*);
  std::vector<Smem> dyn_smem;  ///< per kernel: its library's dynamic shared memory
  std::vector<Smem> ldg_log;   ///< per kernel: its library's LdgRecords of the last launch
  using Overflow = int (*)(const void*);
  std::vector<Overflow> stack_overflow;  ///< per kernel: is an address a thread stack's guard
  using Pending = const char* (*)();
  std::vector<Pending> pending_fault;  ///< per kernel: the fault its library recorded last launch
  using DeferralOf = Deferral* (*)();
  std::vector<DeferralOf> deferral;           ///< per kernel: its library's Deferral of this thread
  double time_limit = 0;                      ///< CPU seconds per launch (0: none)
  std::vector<std::vector<CpuParam>> params;  ///< per kernel: as it declares them
  ~Impl() {
    for (void* h : handles) dlclose(h);
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

std::string CpuModule::compiler() {
  if (const char* c = std::getenv("GPUTUNE_HOST_CXX"); c && *c) return c;
  return shell_quote(GPUTUNE_HOST_CXX);  // a path (the variable may add options)
}

CpuModule CpuModule::build(const std::vector<CpuKernel>& kernels, int jobs,
                           const std::vector<std::string>& include_dirs) {
  CpuModule m;
  m.impl_ = std::make_unique<Impl>();
  std::string tmpl = (fs::temp_directory_path() / "gputune-cpu-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw EmulatorError("cannot create a temporary folder in " + tmpl);
  m.impl_->dir = tmpl;
  std::ofstream(m.impl_->dir / "gt_cpu_cuda.h") << embedded::kEmulatorRuntime;
  std::string includes;
  for (const std::string& d : include_dirs)
    if (!d.empty()) includes += " -I" + shell_quote(d);
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(kernels.size())));
  const std::vector<std::vector<size_t>> chunks = chunk_kernels(kernels, jobs);
  std::vector<std::string> commands;
  std::vector<fs::path> libs;
  for (size_t c = 0; c < chunks.size(); ++c) {
    fs::path src = m.impl_->dir / ("chunk" + std::to_string(c) + ".cpp");
    fs::path lib = m.impl_->dir / ("chunk" + std::to_string(c) + ".so");
    std::ofstream o(src);
    const bool check_alignment = write_chunk(o, kernels, chunks[c]);
    o.close();
    libs.push_back(lib);
    // Stack-clash protection probes each page of a large frame, so an overflow hits the guard.
    // -Bsymbolic: the chunk's own handlers (__assert_fail, the sanitizer's) take the calls.
    std::string cmd =
        compiler() + " -std=c++17 -O1 -w -shared -fPIC -Wl,-Bsymbolic -fstack-clash-protection" +
        (check_alignment ? kAlignmentCheck : "") + " -I" + shell_quote(m.impl_->dir.string()) +
        includes + " -o " + shell_quote(lib.string()) + " " + shell_quote(src.string());
    commands.push_back(std::move(cmd));
  }
  run_compilers(commands, jobs);
  m.impl_->launchers.resize(kernels.size());
  m.impl_->vector_loads.resize(kernels.size());
  m.impl_->dyn_smem.resize(kernels.size());
  m.impl_->ldg_log.resize(kernels.size());
  m.impl_->stack_overflow.resize(kernels.size());
  m.impl_->pending_fault.resize(kernels.size());
  m.impl_->deferral.resize(kernels.size());
  m.impl_->params.resize(kernels.size());
  for (size_t c = 0; c < libs.size(); ++c) {
    void* h = dlopen(libs[c].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw EmulatorError(std::string("cannot load the emulated kernels: ") + dlerror());
    m.impl_->handles.push_back(h);
    for (size_t i : chunks[c]) {
      void* f = dlsym(h, ("gt_launch_" + std::to_string(i)).c_str());
      void* sig = dlsym(h, ("gt_params_" + std::to_string(i)).c_str());
      if (!f || !sig) throw EmulatorError("missing launcher for kernel " + std::to_string(i));
      m.impl_->launchers[i] = reinterpret_cast<Impl::Launch>(f);
      struct Param {  // ::gt::Param of the prelude
        int pointer;
        unsigned long long bytes;
        char kind;
      };
      size_t n = 0;
      const auto* p = reinterpret_cast<const Param* (*)(size_t*)>(sig)(&n);
      for (size_t j = 0; j < n; ++j) {
        const CpuParam::Kind kind = p[j].kind == 'f'   ? CpuParam::Kind::Floating
                                    : p[j].kind == 'i' ? CpuParam::Kind::Integer
                                                       : CpuParam::Kind::Other;
        m.impl_->params[i].push_back({p[j].pointer != 0, p[j].bytes, kind});
      }
      // The chunk's queries of its prelude's state (one per library, shared by its kernels).
      auto query = [h]<class F>(F& into, const char* name) {
        void* f = dlsym(h, name);
        if (!f) throw EmulatorError(std::string("missing ") + name + " in the emulated kernels");
        into = reinterpret_cast<F>(f);
      };
      query(m.impl_->vector_loads[i], "gt_vector_loads");
      query(m.impl_->dyn_smem[i], "gt_dyn_smem");
      query(m.impl_->ldg_log[i], "gt_ldg_log");
      query(m.impl_->stack_overflow[i], "gt_stack_overflow");
      query(m.impl_->pending_fault[i], "gt_pending_fault");
      query(m.impl_->deferral[i], "gt_deferral");
    }
  }
  // The libraries stay mapped: their files, and the folder, are no longer needed.
  std::error_code ec;
  fs::remove_all(m.impl_->dir, ec);
  m.impl_->dir.clear();
  return m;
}

CpuModule::CpuModule(CpuModule&&) noexcept = default;
CpuModule& CpuModule::operator=(CpuModule&&) noexcept = default;
CpuModule::~CpuModule() = default;

size_t CpuModule::size() const { return impl_ ? impl_->launchers.size() : 0; }

const std::vector<CpuParam>& CpuModule::params(size_t i) const {
  if (!impl_ || i >= impl_->params.size()) throw EmulatorError("no such emulated kernel");
  return impl_->params[i];
}

LaunchStats CpuModule::launch(size_t i, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                              void** args, unsigned long long dynamic_smem) const {
  if (!impl_ || i >= impl_->launchers.size()) throw EmulatorError("no such emulated kernel");
  install_handlers();
  static thread_local ThreadTrapResources resources;
  static thread_local FaultTrap trap;
  const double limit = impl_->time_limit;
  const char* err = nullptr;
  // A launch that ended by a jump may have left its library's count of sections raised.
  Deferral* deferral = impl_->deferral[i]();
  deferral->depth = 0;
  deferral->signal = 0;
  trap.deferral = deferral;
  t_trap = &trap;
  const LaunchSlot slot;  // from here on an interrupt sends this thread the timer signal
  if (sigsetjmp(trap.env, 1) == 0) {
    if (limit > 0) resources.set_timer(limit);
    trap.armed = 1;
    if (cpu_launches_interrupted()) raise(timer_signal());  // before the slot was taken
    err = impl_->launchers[i](grid.data(), block.data(), args, dynamic_smem);
    trap.armed = 0;
    if (limit > 0) resources.set_timer(0);
    t_trap = nullptr;
  } else {  // the handler jumped here: trap.armed is 0 again
    if (limit > 0) resources.set_timer(0);
    t_trap = nullptr;
    const int sig = trap.signal;
    if (sig == timer_signal() && cpu_launches_interrupted())
      throw EmulatorInterrupted("interrupted");
    // A fault the kernel's code recorded first is the cause: a misaligned vector access the
    // sanitizer reported may still fault as the instruction runs (an aligned SSE load).
    if (const char* first = impl_->pending_fault[i]())
      throw EmulatorFault(first, sig, trap.address, false);
    if (sig == SIGSEGV && impl_->stack_overflow[i](trap.address))
      throw EmulatorFault(
          "a thread's stack overflowed: the emulator gives each thread 256 KiB (a large local "
          "array? on a GPU it would live in local memory)",
          sig, trap.address, false);
    if (sig == SIGSEGV) {  // the page after the dynamic shared memory (dyn_alloc's layout)
      const auto [smem, bytes] = dynamic_shared_memory(i);
      const auto* at = static_cast<const unsigned char*>(trap.address);
      const auto* end = static_cast<const unsigned char*>(smem) + bytes;
      if (smem && at >= end && at < end + 4096)
        throw EmulatorFault("accesses dynamic shared memory at byte " +
                                std::to_string(at - static_cast<const unsigned char*>(smem)) +
                                ", past the " + std::to_string(dynamic_smem) +
                                " bytes the launch gives",
                            sig, trap.address, false);
    }
    throw EmulatorFault(fault_message(sig, trap.address, limit), sig, trap.address,
                        sig == timer_signal());
  }
  if (err) throw EmulatorError(err);
  return LaunchStats{impl_->vector_loads[i]()};
}

void CpuModule::set_time_limit(double seconds) {
  if (impl_) impl_->time_limit = std::max(0.0, seconds);
}

std::pair<const void*, unsigned long long> CpuModule::dynamic_shared_memory(size_t i) const {
  if (!impl_ || i >= impl_->dyn_smem.size()) throw EmulatorError("no such emulated kernel");
  unsigned long long n = 0;
  const void* p = impl_->dyn_smem[i](&n);
  return {p, n};
}

namespace {
/// The prelude's ::gt::LdgRecord (emulator_runtime.h), as its libraries lay it out.
struct LdgRecord {
  const void* p;
  unsigned size;
  unsigned char v[16];
};
}  // namespace

const void* CpuModule::stale_read_only_load(size_t i,
                                            const std::vector<BufferBefore>& before) const {
  if (!impl_ || i >= impl_->ldg_log.size()) throw EmulatorError("no such emulated kernel");
  unsigned long long n = 0;
  const auto* log = static_cast<const LdgRecord*>(impl_->ldg_log[i](&n));
  for (unsigned long long r = 0; r < n; ++r) {
    const auto* at = static_cast<const unsigned char*>(log[r].p);
    for (const BufferBefore& b : before) {
      const auto* start = static_cast<const unsigned char*>(b.at);
      if (at < start || at + log[r].size > start + b.size) continue;
      // Loaded other than the launch began with: a store of the launch came first. (A load
      // and then a store of the same element is fine: the load has its value by then.)
      if (std::memcmp(log[r].v, b.bytes + (at - start), log[r].size) != 0) return at;
    }
  }
  return nullptr;
}

}  // namespace gputune::tuner
