// One step k of an LU factorisation, in place: the trailing submatrix A[i][j], i, j > k, is
// updated from column k and row k of A, which the bounds check keeps this step from writing.
__global__ void lu_step(float *A, int n, int k) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i > k && j > k && i < n && j < n) {
    A[i * n + j] -= A[i * n + k] * A[k * n + j];
  }
}
