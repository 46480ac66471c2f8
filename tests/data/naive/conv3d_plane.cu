// One plane of a 3-D stencil: the host launches the kernel once per plane i, a kernel argument,
// and each thread updates B[i][j][k] from neighbours in planes i - 1, i and i + 1 of A.
#define DATA_TYPE float
#define PLANE (nk * nj)
__global__ void conv3d_plane(DATA_TYPE *A, DATA_TYPE *B, int ni, int nj, int nk, int i) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;
  DATA_TYPE c0, c1, c2, c3;
  c0 = 0.5f;
  c1 = 0.125f;
  c2 = -0.25f;
  c3 = 0.0625f;
  if ((i < ni - 1) && (j < nj - 1) && (k < nk - 1) && (i > 0) && (j > 0) && (k > 0)) {
    B[i * PLANE + j * nk + k] =
        c0 * A[i * PLANE + j * nk + k] +
        c1 * (A[i * PLANE + j * nk + (k - 1)] + A[i * PLANE + j * nk + (k + 1)] +
              A[i * PLANE + (j - 1) * nk + k] + A[i * PLANE + (j + 1) * nk + k]) +
        c2 * (A[(i - 1) * PLANE + j * nk + k] + A[(i + 1) * PLANE + j * nk + k]) +
        c3 * (A[(i - 1) * PLANE + (j - 1) * nk + (k - 1)] +
              A[(i + 1) * PLANE + (j + 1) * nk + (k + 1)]);
  }
}
