// 2-D convolution (cross-correlation) of an (h+fh-1) x (w+fw-1) image with an fh x fw filter into
// an h x w output. Each thread computes tile_size_x x tile_size_y outputs strided by the block
// shape; use_shared stages the block's input window (with its halo) in shared memory.
#define TW (block_size_x * tile_size_x)
#define TH (block_size_y * tile_size_y)

extern "C" __global__ void convolution(float* __restrict__ out, const float* __restrict__ in,
                                       const float* __restrict__ filter, int w, int h) {
  const int iw = w + filter_width - 1;
  const int x0 = blockIdx.x * TW, y0 = blockIdx.y * TH;
  float acc[tile_size_y][tile_size_x];
#pragma unroll
  for (int i = 0; i < tile_size_y; i++)
#pragma unroll
    for (int j = 0; j < tile_size_x; j++) acc[i][j] = 0.0f;
#if use_shared
  __shared__ float win[TH + filter_height - 1][TW + filter_width - 1];
  const int tid = threadIdx.y * block_size_x + threadIdx.x;
  const int ww = TW + filter_width - 1, wh = TH + filter_height - 1;
  const int ih = h + filter_height - 1;
  for (int e = tid; e < ww * wh; e += block_size_x * block_size_y) {
    int r = e / ww, c = e % ww;
    win[r][c] = (y0 + r < ih && x0 + c < iw) ? in[(y0 + r) * iw + x0 + c] : 0.0f;
  }
  __syncthreads();
#endif
  for (int fy = 0; fy < filter_height; fy++) {
#pragma unroll
    for (int fx = 0; fx < filter_width; fx++) {
      float f = filter[fy * filter_width + fx];
#pragma unroll
      for (int i = 0; i < tile_size_y; i++)
#pragma unroll
        for (int j = 0; j < tile_size_x; j++) {
          int ly = threadIdx.y + i * block_size_y, lx = threadIdx.x + j * block_size_x;
#if use_shared
          acc[i][j] += win[ly + fy][lx + fx] * f;
#else
          int y = y0 + ly, x = x0 + lx;
          if (y < h && x < w) acc[i][j] += in[(y + fy) * iw + x + fx] * f;
#endif
        }
    }
  }
#pragma unroll
  for (int i = 0; i < tile_size_y; i++)
#pragma unroll
    for (int j = 0; j < tile_size_x; j++) {
      int y = y0 + threadIdx.y + i * block_size_y, x = x0 + threadIdx.x + j * block_size_x;
      if (y < h && x < w) out[y * w + x] = acc[i][j];
    }
}
