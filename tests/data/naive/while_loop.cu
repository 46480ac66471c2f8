// y = A x with the row's loop written as a while loop.
__global__ void while_loop(float *y, const float *a, const float *x, int m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) {
    float s = 0.0f;
    int k = 0;
    while (k < n) {
      s += a[i * n + k] * x[k];
      k++;
    }
    y[i] = s;
  }
}
