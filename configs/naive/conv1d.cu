// Naive 1-D convolution (valid part): out[i] = sum_k in[i + k] * filt[k]; one thread per output.
__global__ void conv1d(float* out, const float* in, const float* filt, int n, int fw) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sum = 0.0f;
  for (int k = 0; k < fw; ++k) sum += in[i + k] * filt[k];
  out[i] = sum;
}
