// y = A x - rowsum(A): two loops share the counter j, declared before the bounds check.
__global__ void shared_counter(float *y, const float *a, const float *x, int m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j;
  if (i < m) {
    float s = 0.0f;
    float t = 0.0f;
    for (j = 0; j < n; j++) s += a[i * n + j] * x[j];
    for (j = 0; j < n; j++) t += a[i * n + j];
    y[i] = s - t;
  }
}
