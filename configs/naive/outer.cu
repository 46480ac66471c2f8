// Naive vector outer product C = a b^T (C: m rows of n): one thread per element of C.
__global__ void outer(float* c, const float* a, const float* b, int m, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col < n && row < m) c[row * n + col] = a[row] * b[col];
}
