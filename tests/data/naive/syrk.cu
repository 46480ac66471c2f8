// C = A * A^T (n x m A, row-major): one thread per element of C.
__global__ void syrk(float *c, const float *a, int n, int m) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < n && j < n) {
    float s = 0.0f;
    for (int k = 0; k < m; k++) s += a[i * m + k] * a[j * m + k];
    c[i * n + j] = s;
  }
}
