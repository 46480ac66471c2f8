// Naive matrix-vector product y = A x (A: m rows of n): one thread per element of y.
__global__ void mv(float* y, const float* a, const float* x, int m, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < m) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[idx * n + i] * x[i];
    y[idx] = sum;
  }
}
