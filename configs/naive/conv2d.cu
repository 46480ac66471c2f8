// Naive 2-D convolution (valid part): out (h rows of w) from in ((h + fw - 1) rows of (w + fw - 1))
// and an fw x fw filter; one thread per output pixel.
__global__ void conv2d(float* out, const float* in, const float* filt, int w, int h, int fw) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < w && idy < h) {
    float sum = 0.0f;
    for (int fy = 0; fy < fw; fy++)
      for (int fx = 0; fx < fw; fx++)
        sum += in[(idy + fy) * (w + fw - 1) + idx + fx] * filt[fy * fw + fx];
    out[idy * w + idx] = sum;
  }
}
