// Single-precision matrix multiply C = A * B (n x n, row-major, fp32), in the style of the fastest
// hand-written CUDA SGEMMs (warp tiling as in CUTLASS and in siboehm's SGEMM worklog, kernels
// 9/10). Every variant is correct for every n: tiles reaching past the matrix are zero-filled,
// stores are guarded, and vector loads and stores are used only where they are legal.
//
// Tuning parameters (each a #define):
//   BM, BN        the block tile: a thread block computes a BM x BN tile of C.
//   BK            tile_k: each k-step stages a BM x BK panel of A and a BK x BN panel of B in
//                 shared memory; A is stored transposed (As[k][m]) so that the inner loop reads
//                 a thread's rows with float4 loads, as it reads B (Bs[k][n]).
//   WM, WN        the warp tile: each warp computes a WM x WN tile of the block tile; the block
//                 has (BM / WM) x (BN / WN) warps.
//   TM, TN        the thread tile: each thread accumulates TM x TN elements of C in registers,
//                 as (TM / 4) x (TN / 4) sub-tiles of 4 x 4 spread over the warp tile (a warp's
//                 32 threads form a (WM / TM) x (WN / TN) grid, so WM * WN == 32 * TM * TN); the
//                 inner loop is an outer product of TM values of A and TN values of B per k.
//   vector_width  1, 2 or 4: global loads of A and B, and stores of C, are float, float2 or
//                 float4. A vector access is only legal at an address that is a multiple of its
//                 size, so it is taken only where n % vector_width == 0 (the column is then a
//                 multiple of the width too) and the whole vector lies inside the matrix; other
//                 loads and stores fall back to guarded scalar ones.
//   stages        1: load a k-step's panels, __syncthreads, compute, __syncthreads.
//                 2: double-buffered shared memory: the next panels are loaded from global memory
//                 into registers while the current ones are computed on, then stored into the
//                 other buffer; one __syncthreads per k-step.
//
// Threads per block: one warp per warp tile, (BM / WM) * (BN / WN) warps of 32 threads, so
//   threads = (BM / WM) * (BN / WN) * 32 = BM * BN / (TM * TN)   (the job's LocalSize X).
// Each thread loads BM * BK / vector_width / threads vectors of A and BK * BN / vector_width /
// threads vectors of B per k-step (the job's conditions make both whole numbers).
// Static shared memory: 4 * stages * BK * ((BM + 4) + BN) bytes (As rows are padded by 4 floats,
// which keeps them 16-byte aligned and spreads the transposing stores over the banks).
#define SG_THREADS ((BM / WM) * (BN / WN) * 32)
#define SG_WARP_THREADS_M (WM / TM)  // a warp's threads along M
#define SG_WARP_THREADS_N (WN / TN)  // and along N
#define SG_AS_LD (BM + 4)            // row length of the transposed A panel
#define SG_LOADS_A (BM * BK / vector_width / SG_THREADS)
#define SG_LOADS_B (BK * BN / vector_width / SG_THREADS)

__device__ __forceinline__ void sg_unpack4(const float4& v, float* f) {
  f[0] = v.x;
  f[1] = v.y;
  f[2] = v.z;
  f[3] = v.w;
}

#if vector_width == 4
typedef float4 sg_vec;
__device__ __forceinline__ void sg_unpack(const float4& v, float* f) { sg_unpack4(v, f); }
__device__ __forceinline__ float4 sg_pack(const float* f) {
  float4 v;
  v.x = f[0];
  v.y = f[1];
  v.z = f[2];
  v.w = f[3];
  return v;
}
#elif vector_width == 2
typedef float2 sg_vec;
__device__ __forceinline__ void sg_unpack(const float2& v, float* f) {
  f[0] = v.x;
  f[1] = v.y;
}
__device__ __forceinline__ float2 sg_pack(const float* f) {
  float2 v;
  v.x = f[0];
  v.y = f[1];
  return v;
}
#else
typedef float sg_vec;
__device__ __forceinline__ void sg_unpack(const float& v, float* f) { f[0] = v; }
__device__ __forceinline__ float sg_pack(const float* f) { return f[0]; }
#endif

// Loads the BM x BK panel of A at (row0, k0) into registers, vector_width consecutive k per
// vector. kGuard: some of the panel lies outside the matrix, or n is no multiple of the width.
template <bool kGuard>
__device__ __forceinline__ void sg_load_a(float (&ra)[SG_LOADS_A][vector_width],
                                          const float* __restrict__ A, int n, int row0, int k0,
                                          int tid) {
#pragma unroll
  for (int i = 0; i < SG_LOADS_A; i++) {
    const int e = tid + i * SG_THREADS;
    const int r = row0 + e / (BK / vector_width), k = k0 + e % (BK / vector_width) * vector_width;
    if (!kGuard || (n % vector_width == 0 && r < n && k + vector_width <= n)) {
      sg_unpack(*reinterpret_cast<const sg_vec*>(A + r * n + k), ra[i]);
    } else {
#pragma unroll
      for (int j = 0; j < vector_width; j++)
        ra[i][j] = (r < n && k + j < n) ? A[r * n + k + j] : 0.0f;
    }
  }
}

// Loads the BK x BN panel of B at (k0, col0) into registers, vector_width consecutive columns per
// vector.
template <bool kGuard>
__device__ __forceinline__ void sg_load_b(float (&rb)[SG_LOADS_B][vector_width],
                                          const float* __restrict__ B, int n, int k0, int col0,
                                          int tid) {
#pragma unroll
  for (int i = 0; i < SG_LOADS_B; i++) {
    const int e = tid + i * SG_THREADS;
    const int k = k0 + e / (BN / vector_width), c = col0 + e % (BN / vector_width) * vector_width;
    if (!kGuard || (n % vector_width == 0 && k < n && c + vector_width <= n)) {
      sg_unpack(*reinterpret_cast<const sg_vec*>(B + k * n + c), rb[i]);
    } else {
#pragma unroll
      for (int j = 0; j < vector_width; j++)
        rb[i][j] = (k < n && c + j < n) ? B[k * n + c + j] : 0.0f;
    }
  }
}

// Stores the panels held in registers into shared-memory buffer s: A transposed (one scalar store
// per element, As[k][m]), B as it is (one vector store per vector, Bs[k][n]).
__device__ __forceinline__ void sg_store(float* __restrict__ as, float* __restrict__ bs,
                                         const float (&ra)[SG_LOADS_A][vector_width],
                                         const float (&rb)[SG_LOADS_B][vector_width], int tid) {
#pragma unroll
  for (int i = 0; i < SG_LOADS_A; i++) {
    const int e = tid + i * SG_THREADS;
    const int r = e / (BK / vector_width), k = e % (BK / vector_width) * vector_width;
#pragma unroll
    for (int j = 0; j < vector_width; j++) as[(k + j) * SG_AS_LD + r] = ra[i][j];
  }
#pragma unroll
  for (int i = 0; i < SG_LOADS_B; i++) {
    const int e = tid + i * SG_THREADS;
    const int k = e / (BN / vector_width), c = e % (BN / vector_width) * vector_width;
    *reinterpret_cast<sg_vec*>(bs + k * BN + c) = sg_pack(rb[i]);
  }
}

// The outer products of one k-step on shared-memory buffers as (BK x SG_AS_LD) and bs (BK x BN):
// per k, TM / 4 + TN / 4 float4 loads from shared memory and TM * TN FMAs. (m, n): where this
// thread's first 4 x 4 sub-tile lies in the block tile.
__device__ __forceinline__ void sg_compute(const float* __restrict__ as,
                                           const float* __restrict__ bs, float (&acc)[TM][TN],
                                           int m, int n) {
#pragma unroll
  for (int k = 0; k < BK; k++) {
    float a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM / 4; i++)
      sg_unpack4(
          *reinterpret_cast<const float4*>(as + k * SG_AS_LD + m + i * SG_WARP_THREADS_M * 4),
          a + 4 * i);
#pragma unroll
    for (int j = 0; j < TN / 4; j++)
      sg_unpack4(*reinterpret_cast<const float4*>(bs + k * BN + n + j * SG_WARP_THREADS_N * 4),
                 b + 4 * j);
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
  }
}

extern "C" __global__ void __launch_bounds__(SG_THREADS)
    sgemm(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int n) {
  __shared__ __align__(16) float As[stages][BK][SG_AS_LD];
  __shared__ __align__(16) float Bs[stages][BK][BN];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  // This thread's first 4 x 4 sub-tile in the block tile: its warp's tile, and its place in the
  // warp's (WM / TM) x (WN / TN) thread grid.
  const int tm0 = warp / (BN / WN) * WM + lane / SG_WARP_THREADS_N * 4;
  const int tn0 = warp % (BN / WN) * WN + lane % SG_WARP_THREADS_N * 4;
  // Whether n allows vector accesses at all (uniform), and whether this block's panels of A and
  // B lie inside the matrix in M and N (uniform; K is checked per k-step).
  const bool vec_ok = n % vector_width == 0;
  const bool rows_in = vec_ok && row0 + BM <= n, cols_in = vec_ok && col0 + BN <= n;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

  // Step t computes on the panels at k = t * BK; the iteration before it (t = -1) only loads.
  // stages 2: the next step's panels are loaded into registers before this step's products, so
  // the loads are in flight while they run, and stored into the other buffer after them (the one
  // every thread finished reading before the last barrier): one __syncthreads per step.
  // stages 1: load, store, __syncthreads, compute, __syncthreads.
  float ra[SG_LOADS_A][vector_width], rb[SG_LOADS_B][vector_width];
  const int steps = (n + BK - 1) / BK;
  for (int t = stages == 2 ? -1 : 0; t < steps; t++) {
    const int next = stages == 2 ? t + 1 : t;  // the step whose panels are loaded now
    if (next < steps) {
      const int k0 = next * BK;
      if (rows_in && k0 + BK <= n)
        sg_load_a<false>(ra, A, n, row0, k0, tid);
      else
        sg_load_a<true>(ra, A, n, row0, k0, tid);
      if (cols_in && k0 + BK <= n)
        sg_load_b<false>(rb, B, n, k0, col0, tid);
      else
        sg_load_b<true>(rb, B, n, k0, col0, tid);
#if stages == 1
      sg_store(&As[0][0][0], &Bs[0][0][0], ra, rb, tid);
      __syncthreads();
#endif
    }
    if (t >= 0) sg_compute(&As[t % stages][0][0], &Bs[t % stages][0][0], acc, tm0, tn0);
#if stages == 2
    if (next < steps) sg_store(&As[next % 2][0][0], &Bs[next % 2][0][0], ra, rb, tid);
#endif
    __syncthreads();
  }

  // Each row of a 4 x 4 sub-tile is 4 consecutive columns: vector stores where legal.
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const int r = row0 + tm0 + i / 4 * SG_WARP_THREADS_M * 4 + i % 4;
    if (r >= n) continue;
#pragma unroll
    for (int j = 0; j < TN; j += vector_width) {
      const int c = col0 + tn0 + j / 4 * SG_WARP_THREADS_N * 4 + j % 4;
      if (vec_ok && c + vector_width <= n) {
        *reinterpret_cast<sg_vec*>(C + r * n + c) = sg_pack(&acc[i][j]);
      } else {
#pragma unroll
        for (int v = 0; v < vector_width; v++)
          if (c + v < n) C[r * n + c + v] = acc[i][j + v];
      }
    }
  }
}
