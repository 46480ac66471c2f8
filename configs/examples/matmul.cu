// Tiled single-precision matrix multiply C = A * B (n x n, row-major).
// A block computes a (block_size_y*tile_size_y) x (block_size_x*tile_size_x) tile of C; each
// thread computes tile_size_y x tile_size_x elements strided by the block shape (coalesced).
// use_shared = 1 stages tile_k-wide panels of A and B in shared memory; unroll_k unrolls the inner
// product loop. Guards make every variant correct for every n.
#define BM (block_size_y * tile_size_y)
#define BN (block_size_x * tile_size_x)
#define PRAGMA(x) _Pragma(#x)
#define UNROLL(n) PRAGMA(unroll n)

extern "C" __global__ void matmul(float* __restrict__ C, const float* __restrict__ A,
                                  const float* __restrict__ B, int n) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[tile_size_y][tile_size_x];
#pragma unroll
  for (int i = 0; i < tile_size_y; i++)
#pragma unroll
    for (int j = 0; j < tile_size_x; j++) acc[i][j] = 0.0f;

#if use_shared
  __shared__ float As[BM][tile_k];
  __shared__ float Bs[tile_k][BN + 1];
  const int tid = ty * block_size_x + tx, nthreads = block_size_x * block_size_y;
  for (int k0 = 0; k0 < n; k0 += tile_k) {
    for (int e = tid; e < BM * tile_k; e += nthreads) {
      int r = e / tile_k, k = e % tile_k;
      As[r][k] = (row0 + r < n && k0 + k < n) ? A[(row0 + r) * n + k0 + k] : 0.0f;
    }
    for (int e = tid; e < tile_k * BN; e += nthreads) {
      int k = e / BN, c = e % BN;
      Bs[k][c] = (k0 + k < n && col0 + c < n) ? B[(k0 + k) * n + col0 + c] : 0.0f;
    }
    __syncthreads();
    UNROLL(unroll_k)
    for (int k = 0; k < tile_k; k++) {
      float b[tile_size_x];
#pragma unroll
      for (int j = 0; j < tile_size_x; j++) b[j] = Bs[k][tx + j * block_size_x];
#pragma unroll
      for (int i = 0; i < tile_size_y; i++) {
        float a = As[ty + i * block_size_y][k];
#pragma unroll
        for (int j = 0; j < tile_size_x; j++) acc[i][j] += a * b[j];
      }
    }
    __syncthreads();
  }
#else
  UNROLL(unroll_k)
  for (int k = 0; k < n; k++) {
    float b[tile_size_x];
#pragma unroll
    for (int j = 0; j < tile_size_x; j++) {
      int c = col0 + tx + j * block_size_x;
      b[j] = c < n ? B[k * n + c] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
      int r = row0 + ty + i * block_size_y;
      float a = r < n ? A[r * n + k] : 0.0f;
#pragma unroll
      for (int j = 0; j < tile_size_x; j++) acc[i][j] += a * b[j];
    }
  }
#endif
#pragma unroll
  for (int i = 0; i < tile_size_y; i++)
#pragma unroll
    for (int j = 0; j < tile_size_x; j++) {
      int r = row0 + ty + i * block_size_y, c = col0 + tx + j * block_size_x;
      if (r < n && c < n) C[r * n + c] = acc[i][j];
    }
}
