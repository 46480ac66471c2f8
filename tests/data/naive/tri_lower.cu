// c = L b with L lower triangular, in the older style: the counter declared first, the output
// element as the accumulator, the row's end inclusive (j2 <= j1).
#define DATA_TYPE float
__global__ void tri_lower(DATA_TYPE *L, DATA_TYPE *b, DATA_TYPE *c, int n) {
  int j1 = blockIdx.x * blockDim.x + threadIdx.x;
  int j2;
  if (j1 < n) {
    c[j1] = 0;
    for (j2 = 0; j2 <= j1; j2++) {
      c[j1] += L[j1 * n + j2] * b[j2];
    }
  }
}
