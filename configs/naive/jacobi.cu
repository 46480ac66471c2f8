// Naive 5-point Jacobi step on an n x n grid: one thread per interior point.
__global__ void jacobi(float* out, const float* in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx > 0 && idx < n - 1 && idy > 0 && idy < n - 1)
    out[idy * n + idx] = 0.2f * (in[idy * n + idx] + in[idy * n + idx - 1] +
                                 in[idy * n + idx + 1] + in[(idy - 1) * n + idx] +
                                 in[(idy + 1) * n + idx]);
}
