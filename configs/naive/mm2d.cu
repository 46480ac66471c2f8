// Naive matrix multiply on 2-D arrays with a fixed row length (the source's own 2-D form):
// c = a * b for the top-left n x n corner of N x N arrays, N = 64 here; one thread per element.
#define N 64
__global__ void mm2d(float (*c)[N], const float (*a)[N], const float (*b)[N], int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n) {
    float sum = 0.0f;
    for (int k = 0; k < n; k++) sum += a[idy][k] * b[k][idx];
    c[idy][idx] = sum;
  }
}
