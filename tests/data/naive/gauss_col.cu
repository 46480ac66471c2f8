// Gaussian elimination's multipliers, in place, with the pivot row read through a macro and the
// update written as an assignment: column k of rows below the pivot, divided by the pivot.
#define N n
__global__ void gauss_col(float *M, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= k || i >= N) return;
  M[i * N + k] = M[i * N + k] / M[k * N + k];
}
