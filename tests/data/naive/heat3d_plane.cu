// A 7-point 3-D stencil, one plane per launch: the plane index i is a kernel argument, the
// neighbours above and below (planes i - 1, i + 1) are read once per thread. Subscripts in the
// nested form (i * n + y) * n + x.
__global__ void heat3d_plane(const float *in, float *out, int n, int i) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= n - 1 || y >= n - 1) return;
  out[(i * n + y) * n + x] =
      0.4f * in[(i * n + y) * n + x] +
      0.1f * (in[(i * n + y) * n + x - 1] + in[(i * n + y) * n + x + 1] +
              in[(i * n + y - 1) * n + x] + in[(i * n + y + 1) * n + x] +
              in[((i - 1) * n + y) * n + x] + in[((i + 1) * n + y) * n + x]);
}
