// Naive transposed matrix-vector product y = A^T x (A: n rows of m): one thread per element of y.
__global__ void tmv(float* y, const float* a, const float* x, int m, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= m) return;
  float sum = 0.0f;
  for (int i = 0; i < n; i++) sum += a[i * m + idx] * x[i];
  y[idx] = sum;
}
