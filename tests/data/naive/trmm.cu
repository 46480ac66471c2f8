// B = L A for L lower triangular (strictly below the diagonal, plus A's own row), one thread per
// output (i, j): row i of L is used up to column i - 1, so the loop's end follows idy.
__global__ void trmm(const float *L, const float *A, float *B, int ni, int nj) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= ni || j >= nj) return;
  float acc = A[i * nj + j];
  for (int k = 0; k < i; ++k) acc += L[i * ni + k] * A[k * nj + j];
  B[i * nj + j] = acc;
}
