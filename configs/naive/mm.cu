// Naive matrix multiply C = A * B (n x n, row-major): one thread per element of C.
__global__ void mm(float* c, const float* a, const float* b, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n) {
    float sum = 0.0f;
    for (int k = 0; k < n; k++) sum += a[idy * n + k] * b[k * n + idx];
    c[idy * n + idx] = sum;
  }
}
