// Row sums of squares: an early return for the bounds, sizes from macros, counters declared
// together with a value that stays.
#define M_ROWS m
#define N_COLS n
__global__ void early_return(float *y, const float *a, int m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M_ROWS) return;
  int j, stride = N_COLS;
  float s;
  s = 0.0f;
  for (j = 0; j < N_COLS; j++) s += a[i * stride + j] * a[i * stride + j];
  y[i] = s;
}
