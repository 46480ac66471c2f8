// A kernel whose compile-time evaluation keeps NVRTC's front end busy for about 1.5 s on the
// 2-core VM (36 evaluations, each under NVRTC's constexpr step limit; six took 0.3 s, too short
// a window for a signal sent 0.3 s into the run): the window in which NVRTC's own SIGINT/SIGTERM
// handlers are installed during a process's first compile. Used by the tests of what a stop
// signal does then (run_test, daemon_test).
__device__ constexpr unsigned long long spin(unsigned long long n) {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < n; ++i) s = s * 6364136223846793005ull + i;
  return s;
}
__device__ constexpr unsigned long long kSpin =
    spin(300001) ^ spin(300002) ^ spin(300003) ^ spin(300004) ^ spin(300005) ^ spin(300006) ^
    spin(300007) ^ spin(300008) ^ spin(300009) ^ spin(300010) ^ spin(300011) ^ spin(300012) ^
    spin(300013) ^ spin(300014) ^ spin(300015) ^ spin(300016) ^ spin(300017) ^ spin(300018) ^
    spin(300019) ^ spin(300020) ^ spin(300021) ^ spin(300022) ^ spin(300023) ^ spin(300024) ^
    spin(300025) ^ spin(300026) ^ spin(300027) ^ spin(300028) ^ spin(300029) ^ spin(300030) ^
    spin(300031) ^ spin(300032) ^ spin(300033) ^ spin(300034) ^ spin(300035) ^ spin(300036);
extern "C" __global__ void slow(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = static_cast<float>(kSpin & 1u);
}
