// Naive transpose: out (n rows of m) = in^T (in: m rows of n); one thread per input element.
__global__ void transpose(float* out, const float* in, int m, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < m) out[idx * m + idy] = in[idy * n + idx];
}
