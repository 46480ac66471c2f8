// The CPU emulator (tuner/emulator/cpu_emulator.h): CUDA kernels compiled as C++, blocks in turn,
// the threads of a block as fibers that meet at barriers; faults and runaway kernels end a launch.
#include "tuner/emulator/cpu_emulator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GPUTUNE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUTUNE_TEST_ASAN 1
#endif
#endif
#ifndef GPUTUNE_TEST_ASAN
#define GPUTUNE_TEST_ASAN 0
#endif

namespace gputune {
namespace {

// Warp shuffles run between block barriers; lanes are the linear thread index modulo 32.
TEST(CpuEmulator, XorShufflesExchangeWithinEachWarp) {
  tuner::CpuKernel k{R"(
__global__ void bfly(float* out, int mask) {
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  out[t] = __shfl_xor_sync(0xffffffffu, float(t), mask);
}
)",
                     "bfly",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<float> out(128);
  float* po = out.data();
  for (int mask : {1, 16, 31}) {
    void* args[] = {&po, &mask};
    m.launch(0, {1, 1, 1}, {16, 8, 1}, args);
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], float((t & ~31) | ((t & 31) ^ mask))) << t;
  }
}

// A __ldg of an element the launch writes may see the old value on a GPU (the read-only cache
// does not see the launch's stores); the emulator sees the new one, so the launch says where.
TEST(CpuEmulator, ALoadOnTheReadOnlyPathOfWhatTheLaunchWritesIsFound) {
  tuner::CpuKernel k{R"(
__global__ void shift(float* a, const float* b, int from_b) {
  const int t = threadIdx.x;
  // Another lane's element (written before or after the load), b's, or the lane's own.
  a[t] = 1.0f + (from_b == 1 ? __ldg(&b[t ^ 1]) : __ldg(&a[from_b == 2 ? t : t ^ 1]));
}
)",
                     "shift",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<float> a(64), a0(64), b(64, 2.0f);
  for (int i = 0; i < 64; ++i) a0[i] = a[i] = static_cast<float>(i);
  float* pa = a.data();
  const float* pb = b.data();
  const std::vector<tuner::CpuModule::BufferBefore> before{
      {a.data(), reinterpret_cast<const unsigned char*>(a0.data()), 64 * sizeof(float)},
      {b.data(), reinterpret_cast<const unsigned char*>(b.data()), 64 * sizeof(float)}};
  int from_b = 0;
  void* args[] = {&pa, &pb, &from_b};
  m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  // Lane 0 reads a[1] before lane 1 writes it: the value it needs. Lane 1 reads a[0] after lane
  // 0 wrote it: on a GPU it may get the old value.
  EXPECT_EQ(m.stale_read_only_load(0, before), static_cast<const void*>(&a[0]));
  // The same loads from a buffer no thread writes are fine.
  from_b = 1;
  for (int i = 0; i < 64; ++i) a[i] = a0[i];
  m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  EXPECT_EQ(m.stale_read_only_load(0, before), nullptr);
  EXPECT_EQ(a[5], 3.0f);
  // Each lane's own element, loaded and then stored: fine.
  from_b = 2;
  for (int i = 0; i < 64; ++i) a[i] = a0[i];
  m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  EXPECT_EQ(m.stale_read_only_load(0, before), nullptr);
  EXPECT_EQ(a[5], 6.0f);
}

TEST(CpuEmulator, SharedMemoryAndBarriersBehaveLikeABlock) {
  // Reverses each block's slice through shared memory: wrong without a real barrier.
  tuner::CpuKernel rev{R"(
__global__ void rev(float* out, const float* in) {
  __shared__ float s[64];
  s[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = s[63 - threadIdx.x];
}
)",
                       "rev",
                       {},
                       {}};
  tuner::CpuKernel diverge{R"(
__global__ void diverge(float* out, const float* in) {
  if (threadIdx.x < 10) __syncthreads();
  out[threadIdx.x] = in[threadIdx.x];
}
)",
                           "diverge",
                           {},
                           {}};
  tuner::CpuModule m = tuner::CpuModule::build({rev, diverge});
  std::vector<float> in(128), out(128, -1);
  for (int i = 0; i < 128; ++i) in[i] = static_cast<float>(i);
  float* po = out.data();
  const float* pi = in.data();
  void* args[] = {&po, &pi};
  m.launch(0, {2, 1, 1}, {64, 1, 1}, args);
  EXPECT_EQ(out[0], 63.0f);
  EXPECT_EQ(out[63], 0.0f);
  EXPECT_EQ(out[64], 127.0f);
  EXPECT_EQ(out[127], 64.0f);
  EXPECT_THROW(m.launch(1, {1, 1, 1}, {64, 1, 1}, args), tuner::EmulatorError);
}

TEST(CpuEmulator, DynamicSharedMemoryIsSizedAtLaunchAndUnwrittenElementsShow) {
  tuner::CpuKernel half{R"(
extern "C" __global__ void half(float* out) {
  extern __shared__ float s[];
  if (threadIdx.x % 2 == 0) s[threadIdx.x] = 1.0f + blockIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}
)",
                        "half",
                        {},
                        {}};
  tuner::CpuModule m = tuner::CpuModule::build({half});
  std::vector<float> out(16, 0);
  float* po = out.data();
  void* args[] = {&po};
  m.launch(0, {2, 1, 1}, {8, 1, 1}, args, 8 * sizeof(float));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 8; ++t) {
      if (t % 2 == 0)
        EXPECT_EQ(out[b * 8 + t], 1.0f + b);
      else  // never written in this block: garbage on a GPU, NaN here (refilled per block)
        EXPECT_TRUE(std::isnan(out[b * 8 + t])) << b << " " << t << " " << out[b * 8 + t];
    }
  // Using more than the launch gave touches the page after it: the launch faults, as on a GPU
  // (out of range) rather than reading another block's or variant's memory, and the fault's
  // address lies just past the launch's dynamic shared memory.
  try {
    m.launch(0, {1, 1, 1}, {8, 1, 1}, args, 4 * sizeof(float));
    ADD_FAILURE() << "using 8 floats of a 4-float launch did not fault";
  } catch (const tuner::EmulatorFault& f) {
    EXPECT_EQ(f.signal, SIGSEGV);
    const auto [smem, bytes] = m.dynamic_shared_memory(0);
    EXPECT_EQ(bytes, 16u);
    EXPECT_EQ(f.address, static_cast<const char*>(smem) + 16);
    EXPECT_STREQ(f.what(),
                 "accesses dynamic shared memory at byte 16, past the 16 bytes the "
                 "launch gives");
  }
}

TEST(CpuEmulator, VectorLoadsAreCountedAndAMisalignedOneFaultsAsOnAGpu) {
  tuner::CpuKernel v4{R"(
__global__ void v4(float* out, const float* in, int off) {
  float4 v = __ldg(reinterpret_cast<const float4*>(in + off) + threadIdx.x);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}
)",
                      "v4",
                      {},
                      {}};
  tuner::CpuModule m = tuner::CpuModule::build({v4});
  alignas(16) float in[72];
  float out[16];
  for (int i = 0; i < 72; ++i) in[i] = static_cast<float>(i);
  float* po = out;
  const float* pi = in;
  int off = 0;
  void* args[] = {&po, &pi, &off};
  EXPECT_EQ(m.launch(0, {1, 1, 1}, {16, 1, 1}, args).vector_loads, 16u);
  EXPECT_EQ(out[1], 4.0f + 5 + 6 + 7);
  off = 1;  // in + 1 is 4 bytes past a 16-byte boundary
  try {
    m.launch(0, {1, 1, 1}, {16, 1, 1}, args);
    FAIL() << "a misaligned float4 load must fail";
  } catch (const tuner::EmulatorError& e) {
    EXPECT_NE(std::string(e.what()).find("misaligned address"), std::string::npos) << e.what();
  }
}

// A vector load from shared memory is a plain dereference of a cast pointer: the emulator checks
// its alignment (the compiler's alignment sanitizer) and stops the launch with the kernel's line,
// as a GPU faults; the process goes on, and an aligned launch runs again.
TEST(CpuEmulator, AMisalignedVectorLoadFromSharedMemoryStopsTheLaunch) {
  tuner::CpuKernel k{R"(
__global__ void s4(float* out, int off) {
  __shared__ __align__(16) float s[64];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  const float4 v = *reinterpret_cast<const float4*>(&s[4 * (threadIdx.x % 8) + off]);
  out[threadIdx.x] = v.x + v.w;
}
)",
                     "s4",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  float out[64];
  float* po = out;
  int off = 0;
  void* args[] = {&po, &off};
  m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  EXPECT_EQ(out[9], 4.0f + 7.0f);
  off = 1;
  try {
    m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
    ADD_FAILURE() << "a misaligned float4 load from shared memory must stop the launch";
  } catch (const tuner::EmulatorError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("misaligned address: kernel0.cu:6: ", 0), 0u) << what;
    EXPECT_NE(what.find("float4' at 0x"), std::string::npos) << what;
    EXPECT_NE(what.find(", which is not a multiple of 16 bytes"), std::string::npos) << what;
  }
  off = 0;
  out[9] = 0;
  m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  EXPECT_EQ(out[9], 4.0f + 7.0f);
}

// cp.async in the emulator: a copy reaches shared memory only at the gt_cp_wait that covers its
// group (as on a GPU it may arrive any time before), so a read before the wait sees the old value
// and a read after it the new one; a copy of no bytes (ok false) zero-fills.
TEST(CpuEmulator, AsynchronousCopiesArriveAtTheirWait) {
  tuner::CpuKernel k{R"(
__global__ void cp(float* out, const float* in, int wait) {
  __shared__ float s[2][32];
  s[0][threadIdx.x] = -1.0f;
  s[1][threadIdx.x] = -1.0f;
  gt_cp_async(&s[0][threadIdx.x], &in[threadIdx.x], true);
  gt_cp_commit();
  gt_cp_async(&s[1][threadIdx.x], &in[threadIdx.x], threadIdx.x % 2 == 0);
  gt_cp_commit();
  if (wait == 1) gt_cp_wait<1>();
  if (wait == 0) gt_cp_wait<0>();
  __syncthreads();
  out[threadIdx.x] = s[0][threadIdx.x];
  out[32 + threadIdx.x] = s[1][threadIdx.x];
}
)",
                     "cp",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  float in[32], out[64];
  for (int i = 0; i < 32; ++i) in[i] = static_cast<float>(i + 1);
  float* po = out;
  const float* pi = in;
  int wait = 2;  // no wait: nothing has arrived
  void* args[] = {&po, &pi, &wait};
  m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(out[5], -1.0f);
  EXPECT_EQ(out[32 + 4], -1.0f);
  wait = 1;  // all but the most recent group: the first copy only
  m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(out[5], 6.0f);
  EXPECT_EQ(out[32 + 4], -1.0f);
  wait = 0;  // everything, the zero-fill of the odd threads too
  m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(out[32 + 4], 5.0f);
  EXPECT_EQ(out[32 + 5], 0.0f);
}

// A kernel that faults or never returns ends its own launch with an EmulatorFault that says what
// happened; the module (and the process) go on, and the next launch computes as before.
TEST(CpuEmulator, FaultsAndRunawayKernelsEndTheLaunchNotTheProcess) {
  tuner::CpuKernel k{R"(
__global__ void misbehave(float* out, int how) {
  const int t = threadIdx.x;
  if (how == 1 && t == 5) out[1 << 28] = 1.0f;               // far outside any buffer
  if (how == 2 && t == 5) out[t] = float(t / (how - 2));     // integer division by zero
  volatile int spin = 0;
  while (how == 3) spin = spin + 1;                           // never returns
  if (how == 4) {                                             // 1 MiB of locals per thread
    volatile char big[how << 18];
    big[t] = 1;
    out[t] = big[t];
  }
  if (how == 0) out[t] = 2.0f * t;
}
)",
                     "misbehave",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  m.set_time_limit(0.5);
  std::vector<float> out(64, -1);
  float* po = out.data();
  auto run = [&](int how) {
    void* args[] = {&po, &how};
    m.launch(0, {1, 1, 1}, {64, 1, 1}, args);
  };
  auto fault_of = [&](int how) -> tuner::EmulatorFault {
    try {
      run(how);
    } catch (const tuner::EmulatorFault& f) {
      return f;
    }
    ADD_FAILURE() << "no fault for case " << how;
    return tuner::EmulatorFault("", 0, nullptr, false);
  };
  const tuner::EmulatorFault segv = fault_of(1);
  EXPECT_EQ(segv.signal, SIGSEGV);
  EXPECT_EQ(segv.address, static_cast<const void*>(po + (1 << 28)));
  EXPECT_NE(std::string(segv.what()).find("outside its arguments"), std::string::npos);
  run(0);
  EXPECT_EQ(out[63], 126.0f);

  const tuner::EmulatorFault fpe = fault_of(2);
  EXPECT_EQ(fpe.signal, SIGFPE);
  EXPECT_NE(std::string(fpe.what()).find("division or remainder by zero"), std::string::npos);

  const auto t0 = std::chrono::steady_clock::now();
  const tuner::EmulatorFault hang = fault_of(3);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(hang.timed_out);
  EXPECT_NE(std::string(hang.what()).find("stopped after 0.5 s of CPU time"), std::string::npos);
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 30.0);

  const tuner::EmulatorFault stack = fault_of(4);
  EXPECT_EQ(stack.signal, SIGSEGV);
  EXPECT_NE(std::string(stack.what()).find("stack overflowed"), std::string::npos) << stack.what();

  std::fill(out.begin(), out.end(), -1.0f);
  run(0);
  EXPECT_EQ(out[5], 10.0f);
  EXPECT_EQ(out[63], 126.0f);
}

// The handler only takes what happens inside a launch: a fault elsewhere ends the process as it
// would have without the emulator.
TEST(CpuEmulator, ASignalOutsideALaunchStillEndsTheProcess) {
  tuner::CpuKernel k{"__global__ void nop(float* out) { out[threadIdx.x] = 1.0f; }", "nop", {}, {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<float> out(32);
  float* po = out.data();
  void* args[] = {&po};
  auto launch_then_raise = [&](int sig) {
    m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
    std::raise(sig);
  };
#if GPUTUNE_TEST_ASAN
  // In the checking build AddressSanitizer's handler was there first: the emulator passes the
  // signal on to it, and it ends the process with its report.
  EXPECT_EXIT(launch_then_raise(SIGSEGV), testing::ExitedWithCode(1), "AddressSanitizer: SEGV");
  EXPECT_EXIT(launch_then_raise(SIGFPE), testing::ExitedWithCode(1), "AddressSanitizer: FPE");
#else
  EXPECT_EXIT(launch_then_raise(SIGSEGV), testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(launch_then_raise(SIGFPE), testing::KilledBySignal(SIGFPE), "");
#endif
  m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(out[31], 1.0f);
}

// A failed assert (with or without the kernel's own #include <cassert>) and __trap() stop the
// launch with the place, as a GPU stops the kernel (cudaErrorAssert); the process goes on, and a
// launch that asserts nothing runs again.
TEST(CpuEmulator, AssertAndTrapStopTheLaunchWithTheirPlace) {
  tuner::CpuKernel k{R"(
#include <cassert>
__global__ void checked(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(i < n);
  if (i == 1000) __trap();
  out[i] = 2.0f * i;
}
)",
                     "checked",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<float> out(1024);
  float* po = out.data();
  int n = 128;
  void* args[] = {&po, &n};
  auto failure = [&](unsigned blocks) -> std::string {
    try {
      m.launch(0, {blocks, 1, 1}, {64, 1, 1}, args);
    } catch (const tuner::EmulatorError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(failure(2), "");
  EXPECT_EQ(out[127], 254.0f);
  n = 100;
  EXPECT_EQ(failure(2), "kernel0.cu:5: block (1,0,0), thread (36,0,0): assertion `i < n` failed");
  n = 1024;
  EXPECT_EQ(failure(16), "block (15,0,0), thread (40,0,0) called __trap()");
  n = 128;
  out[127] = 0;
  EXPECT_EQ(failure(2), "");
  EXPECT_EQ(out[127], 254.0f);
}

// The time limit can expire while the kernel is inside malloc or printf, which hold the C
// library's locks: the launch stops once the call returns, so the thread can allocate again.
// Jumping out of malloc would leave its arena locked, and the thread's next allocation would
// wait forever (the child process below is killed by its alarm instead of exiting).
TEST(CpuEmulator, ATimeLimitInsideMallocOrPrintfStopsTheLaunchAfterTheCall) {
  tuner::CpuKernel k{R"(
__global__ void churn(int* out, int n, int print) {
  while (n > 0) {
    if (print) {
      printf("%d %f\n", n, 1.5);
    } else {
      void* p = malloc(4096 + threadIdx.x);
      free(p);
    }
  }
  out[threadIdx.x] = 1;
}
)",
                     "churn",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  m.set_time_limit(0.2);
  auto stop_then_allocate = [&] {
    if (!std::freopen("/dev/null", "w", stdout)) std::_Exit(3);
    alarm(30);
    int code = 0;
    // In a second thread, so that malloc locks its arena (a single-threaded process does not).
    std::thread worker([&] {
      std::vector<int> out(32);
      int* po = out.data();
      int n = 1;
      for (int print = 0; print < 2; ++print)
        for (int round = 0; round < 5; ++round) {
          void* args[] = {&po, &n, &print};
          try {
            m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
            code = 4;
          } catch (const tuner::EmulatorFault& f) {
            if (!f.timed_out) code = 5;
          }
          void* p = std::malloc(1 << 16);
          std::memset(p, 1, 1 << 16);
          std::free(p);
          std::printf("after round %d\n", round);
        }
    });
    worker.join();
    std::fflush(stdout);
    std::_Exit(code);
  };
  EXPECT_EXIT(stop_then_allocate(), testing::ExitedWithCode(0), "");
}

// Warp-level intrinsics wait for their warp only: shuffles of every kind and width, votes,
// warp reductions and block-wide counts give what a GPU gives, and two halves of a warp that
// take different branches each go on by themselves.
TEST(CpuEmulator, WarpIntrinsicsExchangeWithinTheirWarpAsOnAGpu) {
  tuner::CpuKernel k{R"(
__global__ void warp(int* out, int which) {
  const int t = threadIdx.x, lane = t % 32;
  int r = 0;
  if (which == 0) {                       // warp sum: shuffle down by 16, 8, 4, 2, 1
    r = t;
    for (int o = 16; o > 0; o /= 2) r += __shfl_down_sync(0xffffffffu, r, o);
    r = __shfl_sync(0xffffffffu, r, 0);   // broadcast lane 0's total
  } else if (which == 1) {                // votes
    const unsigned b = __ballot_sync(0xffffffffu, t % 3 == 0);
    r = __popc(b) * 100 + __any_sync(0xffffffffu, t == 40) * 10 + __all_sync(0xffffffffu, t < 64);
  } else if (which == 2) {                // width 8: broadcast each group's first lane
    r = __shfl_sync(0xffffffffu, t, 0, 8);
  } else if (which == 3) {                // inclusive scan within groups of 16
    r = 1;
    for (int o = 1; o < 16; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, r, o, 16);
      if (lane % 16 >= o) r += v;
    }
  } else if (which == 4) {                // halves of a warp on different paths
    if (lane < 16) r = __shfl_xor_sync(0x0000ffffu, t, 1);
    else { __syncwarp(0xffff0000u); r = -t; }
  } else if (which == 5) {                // warp reductions, signed
    const int v = (t % 5) - 2;
    r = __reduce_add_sync(0xffffffffu, v) * 10000 + __reduce_min_sync(0xffffffffu, v) * 100 +
        __reduce_max_sync(0xffffffffu, v);
  } else if (which == 7) {                // __activemask: the lanes on this path
    if (lane % 4 == 1) r = static_cast<int>(__activemask());
    else r = __activemask() == 0xddddddddu ? 1 : 0;
  } else if (which == 8) {                // a divergent branch shuffles among its own lanes
    if (lane >= 8) {
      const unsigned m = __activemask();
      r = __shfl_sync(m, t, 8);
    } else {
      r = -1;
    }
  } else if (which == 6) {
    r = __syncthreads_count(t % 4 == 0) * 10 + __syncthreads_and(t < 1000) + __syncthreads_or(t == 7) * 2;
  }
  out[t] = r;
}
)",
                     "warp",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<int> out(96, -999);
  int* po = out.data();
  auto run = [&](int which) {
    void* args[] = {&po, &which};
    m.launch(0, {1, 1, 1}, {96, 1, 1}, args);
  };
  run(0);
  for (int t = 0; t < 96; ++t) {
    const int w = t / 32 * 32;
    EXPECT_EQ(out[t], 32 * w + 31 * 32 / 2) << t;  // w + (w+1) + ... + (w+31)
  }
  run(1);
  // per warp: multiples of 3 (0..30: 11; 33..63: 11; 66..93: 10), any t == 40, all t < 64
  EXPECT_EQ(out[0], 11 * 100 + 0 * 10 + 1);
  EXPECT_EQ(out[33], 11 * 100 + 1 * 10 + 1);
  EXPECT_EQ(out[70], 10 * 100 + 0 * 10 + 0);
  run(2);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], t / 8 * 8) << t;
  run(3);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], t % 16 + 1) << t;
  run(4);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], t % 32 < 16 ? (t ^ 1) : -t) << t;
  run(5);
  // v over a warp: lanes 0..31 of t = 32w + lane; (t % 5) - 2 cycles -2..2; sum per warp below
  for (int w = 0; w < 3; ++w) {
    int sum = 0;
    for (int t = 32 * w; t < 32 * w + 32; ++t) sum += t % 5 - 2;
    EXPECT_EQ(out[32 * w], sum * 10000 - 200 + 2) << w;
  }
  run(7);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], t % 4 == 1 ? 0x22222222 : 1) << t;
  run(8);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], t % 32 >= 8 ? t / 32 * 32 + 8 : -1) << t;
  run(6);
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], 24 * 10 + 1 + 2) << t;
}

// Mistakes with warp intrinsics that hang or are undefined on a GPU stop the launch with a
// message: a mask naming a thread that has exited, a shuffle whose partner waits at a barrier.
// A shuffle from a thread that takes no part gives 0xff bytes, which show in the results.
TEST(CpuEmulator, WarpIntrinsicsThatCannotCompleteStopWithTheReason) {
  tuner::CpuKernel k{R"(
__global__ void bad(int* out, int which) {
  const int t = threadIdx.x;
  if (which == 0 && t == 3) return;
  if (which == 1 && t == 3) __syncthreads();
  int r = t;
  if (which == 2 && t >= 8) { out[t] = 0; return; }
  r = __shfl_down_sync(which == 2 ? 0xffu : 0xffffffffu, r, 4);
  if (which == 1 && t != 3) __syncthreads();
  out[t] = r;
}
)",
                     "bad",
                     {},
                     {}};
  tuner::CpuModule m = tuner::CpuModule::build({k});
  std::vector<int> out(32, -999);
  int* po = out.data();
  auto message = [&](int which) -> std::string {
    void* args[] = {&po, &which};
    try {
      m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
    } catch (const tuner::EmulatorError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(0).find("names thread 3 in its mask, which has exited"), std::string::npos);
  EXPECT_NE(message(1).find("wait at __syncthreads"), std::string::npos) << message(1);
  EXPECT_EQ(message(2), "");
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[3], 7);
  EXPECT_EQ(out[4], -1);  // its source, thread 8, is not in the mask: 0xff bytes
  EXPECT_EQ(out[7], -1);
}

// interrupt_cpu_launches() (Ctrl-C) stops a launch that would never end, whether its kernel spins
// or is inside malloc at the time, and refuses launches until allow_cpu_launches(). The folder the
// kernels were compiled in is gone once they are loaded, so an interrupted process leaves nothing.
TEST(CpuEmulator, AnInterruptStopsTheRunningLaunchAndLaterOnes) {
  tuner::CpuKernel k{R"(
__global__ void spin(int* out, int n, int alloc) {
  while (n > 0) {
    if (alloc) {
      void* p = malloc(64 + threadIdx.x);
      free(p);
    } else {
      atomicAdd(out + 32, 1);
    }
  }
  out[threadIdx.x] = 1;
}
)",
                     "spin",
                     {},
                     {}};
  const char* old_tmp = std::getenv("TMPDIR");
  const std::string saved = old_tmp ? old_tmp : "";
  char tmpl[] = "/tmp/gputune-interrupt-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  setenv("TMPDIR", tmpl, 1);
  tuner::CpuModule m = tuner::CpuModule::build({k});
  if (old_tmp)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_TRUE(std::filesystem::is_empty(tmpl)) << "the compile folder outlives the build";
  std::filesystem::remove_all(tmpl);

  m.set_time_limit(30);  // a launch the interrupt misses ends here, as an EmulatorFault
  std::vector<int> out(33, 0);
  int* po = out.data();
  for (int alloc = 0; alloc < 2; ++alloc) {
    tuner::allow_cpu_launches();
    int n = 1;
    void* args[] = {&po, &n, &alloc};
    std::thread ctrl_c([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      tuner::interrupt_cpu_launches();
    });
    EXPECT_THROW(m.launch(0, {2, 1, 1}, {32, 1, 1}, args), tuner::EmulatorInterrupted) << alloc;
    ctrl_c.join();
    EXPECT_TRUE(tuner::cpu_launches_interrupted());
    // A kernel that would end at once is refused too, until launches are allowed again.
    n = 0;
    EXPECT_THROW(m.launch(0, {1, 1, 1}, {32, 1, 1}, args), tuner::EmulatorInterrupted);
    EXPECT_EQ(out[0], 0);
  }
  EXPECT_GT(out[32], 0);  // the spinning kernel did run before it was stopped
  tuner::allow_cpu_launches();
  EXPECT_FALSE(tuner::cpu_launches_interrupted());
  int n = 0, alloc = 0;
  void* args[] = {&po, &n, &alloc};
  m.launch(0, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(std::count(out.begin(), out.begin() + 32, 1), 32);
  void* p = std::malloc(1 << 16);  // the C library's allocator is free again
  std::free(p);
}

}  // namespace
}  // namespace gputune
