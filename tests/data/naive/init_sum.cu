// y = b + A x with the sum started from b: a split loop must add b once, not once per thread.
__global__ void init_sum(float *y, const float *a, const float *x, const float *b, int m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) {
    float sum = b[i];
    for (int j = 0; j < n; j++) sum += a[i * n + j] * x[j];
    y[i] = sum;
  }
}
