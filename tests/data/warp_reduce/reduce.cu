// Test data (tests/tuner/cpu_check_test.cpp): a templated kernel with warp shuffles, shared
// memory and atomics, the constructs of a tuned reduction.
// Sum of n values: each block reduces block_size_x * items values with warp shuffles and adds its
// total to out[0] (one atomicAdd per block).
template <typename T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
template <typename T>
__global__ void reduce(T* out, const T* in, int n) {
  __shared__ T partial[block_size_x / 32];
  const int base = blockIdx.x * block_size_x * items + threadIdx.x;
  T v = 0;
#pragma unroll
  for (int k = 0; k < items; ++k)
    if (base + k * block_size_x < n) v += in[base + k * block_size_x];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < block_size_x / 32 ? partial[threadIdx.x] : T(0);
    v = warp_sum(v);
    if (threadIdx.x == 0) atomicAdd(out, v);
  }
}
