// Vector add, c = a + b, tuned over block size and elements per thread.
// Each thread handles tile_size_x elements strided by the block size, so warps stay coalesced.
extern "C" __global__ void vector_add(float* __restrict__ c, const float* __restrict__ a,
                                      const float* __restrict__ b, int n) {
  int i = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < tile_size_x; k++) {
    int j = i + k * block_size_x;
    if (j < n) c[j] = a[j] + b[j];
  }
}
