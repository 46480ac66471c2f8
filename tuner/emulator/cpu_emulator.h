/** \file tuner/emulator/cpu_emulator.h
 * Owns: running CUDA kernels of the naive subset (and the variants gputune generates from them) on
 * the CPU, so generated code is checked on machines without a GPU. The kernels are compiled as C++
 * by the host compiler with a small prelude (threadIdx & co., __shared__, __syncthreads, __ldg,
 * atomics, math, float2/float4 with their alignment) into a shared library that is loaded with
 * dlopen. A launch runs the blocks in turn; the threads of a block run as cooperative fibers
 * (ucontext) that meet at __syncthreads, so shared-memory staging (static and `extern __shared__`)
 * is emulated faithfully; a barrier that only some threads reach is an error. Warp-level intrinsics
 * (__shfl*_sync, votes, __reduce*_sync, __syncwarp) wait for the threads their mask names in the
 * same warp only, as since Volta; a mask that names an exited thread is an error. A kernel's
 * parameter types are deduced from the kernel itself, and each launcher reports them (CpuParam), so
 * a caller checks its arguments against the kernel before it launches. A kernel that faults (an
 * access outside its memory, an integer division by zero, a misaligned vector access, a failed
 * assert, __trap) or runs past its time limit ends its
 * launch with an EmulatorFault instead of ending the process: launches run under a signal handler
 * (installed on first use, passing every signal that is not a launch's on to the handler before
 * it). A launch records its loads on the read-only path (__ldg), so that a caller can ask whether
 * one read an element the launch wrote (stale_read_only_load): on a GPU it may see the old value,
 * here it sees the new one. interrupt_cpu_launches() (async-signal-safe; Ctrl-C calls it) stops
 * every running launch and build (the host compilers run in process groups of their own, which it
 * ends) and refuses later ones. The temporary folder the kernels are compiled in is gone once they
 * are loaded, so a process that ends during a launch leaves nothing behind. Consumes: kernel
 * sources, -D definitions, include folders. Produces: CpuModule. Must not: touch the GPU driver or
 * the database. */
#pragma once

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gputune::tuner {

class EmulatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A launch that the CPU stopped: a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) in the kernel's code,
/// or its time limit. `address` is the faulting address (for SIGSEGV and SIGBUS), so a caller
/// that knows where its buffers lie says which argument was accessed out of range.
class EmulatorFault : public EmulatorError {
 public:
  EmulatorFault(const std::string& what, int signal, const void* address, bool timed_out)
      : EmulatorError(what), signal(signal), address(address), timed_out(timed_out) {}
  int signal;
  const void* address;
  bool timed_out;
};

/// A launch, or a build, that interrupt_cpu_launches() stopped.
class EmulatorInterrupted : public EmulatorError {
 public:
  using EmulatorError::EmulatorError;
};

/// Stops every launch now running in this process (each throws EmulatorInterrupted as soon as its
/// kernel leaves any C library call it is in) and makes later launches and builds throw it too,
/// until allow_cpu_launches(); ends the host compilers of a build now running. Async-signal-safe;
/// called on a thread inside a launch (from a signal handler there), it does not return (it jumps
/// to the launch's end).
void interrupt_cpu_launches() noexcept;
/// Whether interrupt_cpu_launches() was called since the last allow_cpu_launches().
bool cpu_launches_interrupted() noexcept;
/// Undoes interrupt_cpu_launches() for launches that start from now on.
void allow_cpu_launches() noexcept;

/// One kernel to put into a module: its source and its name (a __global__ function that is not
/// overloaded, or a template's instance such as "reduce<float>"), with macros defined around it
/// (a parametric kernel's -D values).
struct CpuKernel {
  std::string source;
  std::string name;
  std::vector<std::pair<std::string, std::string>> defines;  ///< #define first second
  std::string file_name;  ///< names the source in compiler messages (default "kernel<i>.cu")
};

/// A kernel parameter as the kernel declares it: what a caller must pass.
struct CpuParam {
  bool pointer = false;
  /// sizeof the value; for a pointer, of its element (0 for void*)
  unsigned long long bytes = 0;
  /// of the value, or of a pointer's element: Other for structs (float4, ...) and void
  enum class Kind { Integer, Floating, Other } kind = Kind::Other;
};

/// What a launch did that the results alone do not show.
struct LaunchStats {
  unsigned long long vector_loads = 0;  ///< float2/float4/int2/int4 loads through __ldg
};

/// A compiled set of kernels. Owns the temporary folder and the dlopen handle (RAII).
class CpuModule {
 public:
  /// Compiles all kernels into one library (`jobs` compiler processes in parallel, one source
  /// file per chunk; `include_dirs` become -I). Throws EmulatorError with the compiler's output.
  static CpuModule build(const std::vector<CpuKernel>& kernels, int jobs = 1,
                         const std::vector<std::string>& include_dirs = {});
  CpuModule(CpuModule&&) noexcept;
  CpuModule& operator=(CpuModule&&) noexcept;
  ~CpuModule();

  size_t size() const;
  /// Kernel i's parameters, in order.
  const std::vector<CpuParam>& params(size_t i) const;
  /// Runs kernel i; args[j] points to parameter j's value (as cuLaunchKernel's kernelParams;
  /// one per entry of params(i), which the caller checks: launch cannot),
  /// with `dynamic_smem` bytes behind `extern __shared__` arrays (filled with 0xff bytes before
  /// each block, so reading what no thread wrote shows). Throws EmulatorError when the threads of
  /// a block disagree about a __syncthreads or a vector load is misaligned (both fault on a GPU),
  /// and EmulatorFault when the kernel faults or uses more CPU time than set_time_limit allows.
  LaunchStats launch(size_t i, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                     void** args, unsigned long long dynamic_smem = 0) const;

  /// A buffer a launch was given, with a copy of its bytes from before the launch.
  struct BufferBefore {
    const void* at;
    const unsigned char* bytes;
    size_t size;
  };
  /// Where the last launch of kernel i loaded, on the read-only path (__ldg), an element that
  /// launch had written: the value loaded differs from the one `before` holds (a store of the
  /// same value goes unseen; a load before the store is fine). nullptr when none did (of its
  /// first 2^20 such loads, which are recorded). On a GPU such a load may return the old value:
  /// the read-only cache does not see the launch's stores.
  const void* stale_read_only_load(size_t i, const std::vector<BufferBefore>& before) const;

  /// CPU seconds one launch may use before it is stopped with an EmulatorFault (0: no limit).
  void set_time_limit(double seconds);
  /// Where the last launch's dynamic shared memory began, and its size (launch reports a fault
  /// just past it as a kernel using more than the launch gave).
  std::pair<const void*, unsigned long long> dynamic_shared_memory(size_t i) const;

  /// The host compiler used ($GPUTUNE_HOST_CXX, a shell command that may carry options, else the
  /// one gputune was built with, quoted).
  static std::string compiler();

 private:
  CpuModule() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputune::tuner
