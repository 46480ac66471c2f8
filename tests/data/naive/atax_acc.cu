// tmp += A x, adding straight into the output element inside the loop.
__global__ void atax_acc(float *tmp, const float *a, const float *x, int nx, int ny) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nx) {
    int j;
    for (j = 0; j < ny; j++) {
      tmp[i] += a[i * ny + j] * x[j];
    }
  }
}
