// C = A B, written as older CUDA code often is: the type a macro, the counter declared first.
#define DATA_TYPE float
__global__ void gemm_counter(DATA_TYPE *c, const DATA_TYPE *a, const DATA_TYPE *b, int ni, int nj,
                             int nk) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if ((i < ni) && (j < nj)) {
    int k;
    DATA_TYPE acc;
    acc = 0;
    for (k = 0; k < nk; k++) {
      acc += a[i * nk + k] * b[k * nj + j];
    }
    c[i * nj + j] = acc;
  }
}
