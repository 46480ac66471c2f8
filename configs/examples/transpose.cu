// Matrix transpose: out (width x height) = in (height x width)^T, row-major.
// A block moves a tile of block_size_x columns x (block_size_y*tile_size_y) rows. With use_shared
// the tile goes through shared memory (pitch padded by `pad_shared` against bank conflicts) so both the
// read and the write are coalesced; without it the write is strided.
#define TH (block_size_y * tile_size_y)

extern "C" __global__ void transpose(float* __restrict__ out, const float* __restrict__ in, int width,
                                     int height) {
  const int x0 = blockIdx.x * block_size_x, y0 = blockIdx.y * TH;
#if use_shared
  __shared__ float tile[TH][block_size_x + pad_shared];
#pragma unroll
  for (int i = 0; i < tile_size_y; i++) {
    int y = y0 + threadIdx.y + i * block_size_y, x = x0 + threadIdx.x;
    if (x < width && y < height) tile[threadIdx.y + i * block_size_y][threadIdx.x] = in[y * width + x];
  }
  __syncthreads();
  // Write: threads walk the tile's rows (input y) along x so output rows are contiguous.
  const int tid = threadIdx.y * block_size_x + threadIdx.x;
  for (int e = tid; e < TH * block_size_x; e += block_size_x * block_size_y) {
    int r = e % TH, c = e / TH;  // r: input row within tile, c: input column within tile
    int y = y0 + r, x = x0 + c;
    if (x < width && y < height) out[x * height + y] = tile[r][c];
  }
#else
#pragma unroll
  for (int i = 0; i < tile_size_y; i++) {
    int y = y0 + threadIdx.y + i * block_size_y, x = x0 + threadIdx.x;
    if (x < width && y < height) out[x * height + y] = in[y * width + x];
  }
#endif
}
