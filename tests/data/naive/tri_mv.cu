// y = U x with U upper triangular: thread i sums its row from the diagonal on.
__global__ void tri_mv(const float *U, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.0f;
    for (int j = i; j < n; j++) s += U[i * n + j] * x[j];
    y[i] = s;
  }
}
