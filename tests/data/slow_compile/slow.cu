// A kernel whose compile-time evaluation keeps NVRTC's front end busy for about a second (six
// evaluations, each under NVRTC's constexpr step limit): the window in which NVRTC's own
// SIGINT/SIGTERM handlers are installed during a process's first compile. Used by the tests of
// what a stop signal does then (run_test, daemon_test).
__device__ constexpr unsigned long long spin(unsigned long long n) {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < n; ++i) s = s * 6364136223846793005ull + i;
  return s;
}
__device__ constexpr unsigned long long kSpin =
    spin(300001) ^ spin(300002) ^ spin(300003) ^ spin(300004) ^ spin(300005) ^ spin(300006);
extern "C" __global__ void slow(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = static_cast<float>(kSpin & 1u);
}
