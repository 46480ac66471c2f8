// Naive matrix multiply-accumulate C += A * B (n x n, row-major), written the way many first CUDA
// kernels are: the loop adds straight into c. One thread per element of C. gputune offers
// cache_c = registers: c[idy*n+idx] is one element per thread, so it is loaded once, kept in a
// register through the loop and stored once (the compiler cannot: c may alias a or b).
__global__ void mm_acc(float* c, const float* a, const float* b, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n)
    for (int k = 0; k < n; k++) c[idy * n + idx] += a[idy * n + k] * b[k * n + idx];
}
