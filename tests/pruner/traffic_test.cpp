// The libTooling traffic analysis on kernels whose sector counts and bank conflicts are known by
// hand (no GPU needed).
#include "pruner/traffic.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

namespace gputune::pruner {
namespace {

TrafficInput input(const std::string& src, const std::string& name, std::int64_t threads,
                   std::int64_t blocks) {
  TrafficInput in;
  in.source = src;
  in.kernel_name = name;
  in.block = {threads, 1, 1};
  in.grid = {blocks, 1, 1};
  return in;
}

const Access* find(const TrafficReport& r, const std::string& array, const std::string& kind) {
  for (const auto& a : r.accesses)
    if (a.array == array && a.kind == kind) return &a;
  return nullptr;
}

TEST(Traffic, CoalescedCopyTouchesFourSectorsPerWarpRequest) {
  auto in = input(R"(
extern "C" __global__ void copy(float* out, const float* __restrict__ in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
})",
                  "copy", 256, 4096);
  in.scalars["n"] = 256 * 4096;
  in.array_bytes = {{"out", 4 << 20}, {"in", 4 << 20}};
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.parsed) << r.error;
  ASSERT_TRUE(r.error.empty()) << r.error;
  const Access* ld = find(r, "in", "load");
  const Access* st = find(r, "out", "store");
  ASSERT_TRUE(ld && st);
  EXPECT_EQ(ld->line, 4);
  double warps = 4096.0 * 8;
  EXPECT_DOUBLE_EQ(ld->requests, warps);
  EXPECT_DOUBLE_EQ(ld->sectors, 4 * warps);  // 32 lanes x 4 B = 128 B = 4 sectors
  EXPECT_DOUBLE_EQ(st->sectors, 4 * warps);
  EXPECT_DOUBLE_EQ(r.requested_bytes, 2.0 * 4 * 256 * 4096);
  EXPECT_DOUBLE_EQ(r.compulsory_bytes, 2.0 * (4 << 20));
  EXPECT_EQ(r.unanalysed, 0u);
}

// Issue #45 (the transpose at 4096x4096 on the H100): a warp's global loads come in rounds, the
// loads it issues before it must wait for one. Unrolled loads share a round, a barrier ends
// one, and a loop the compiler keeps ends one per iteration it keeps (unrolled by 4: a quarter
// round per iteration). Only loads count; compulsory load bytes leave the stores out.
TEST(Traffic, GlobalLoadsComeInRounds) {
  const std::string src = R"(
extern "C" __global__ void rows(float* out, const float* __restrict__ in, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int i = 0; i < TILE; i++) out[i * n + x] = in[i * n + x];
#if STAGED
  __shared__ float s[256];
  s[threadIdx.x] = in[x];
  __syncthreads();
  out[x] = s[255 - threadIdx.x] + in[n + x];
#endif
#if LOOP
  float acc = 0.0f;
  for (int k = 0; k < n; k++) acc += in[k * n + x];
  out[x] = acc;
#endif
})";
  auto rounds_per_warp = [&](int tile, bool staged, bool loop) {
    auto in = input(src, "rows", 256, 16);
    in.options = {"-DTILE=" + std::to_string(tile), "-DSTAGED=" + std::to_string(staged),
                  "-DLOOP=" + std::to_string(loop)};
    in.scalars["n"] = 4096;
    in.array_bytes = {{"out", 4096 * 4096 * 4}, {"in", 4096 * 4096 * 4}};
    TrafficReport r = analyse_traffic(in);
    EXPECT_TRUE(r.parsed && r.error.empty()) << r.error;
    EXPECT_GT(r.compulsory_load_bytes, 0);
    EXPECT_LT(r.compulsory_load_bytes, r.compulsory_bytes);  // the stores are not loads
    return r.load_rounds / (16 * 8);
  };
  EXPECT_DOUBLE_EQ(rounds_per_warp(1, false, false), 1);
  EXPECT_DOUBLE_EQ(rounds_per_warp(4, false, false), 1);  // four loads in flight at once
  EXPECT_DOUBLE_EQ(rounds_per_warp(4, true, false), 2);   // the barrier ends the first round
  // The k loop has no compile-time trip count: unrolled by 4, 4096 iterations are 1024 rounds.
  EXPECT_DOUBLE_EQ(rounds_per_warp(1, false, true), 1 + 4096 / 4);
}

TEST(Traffic, StridedAccessTouchesOneSectorPerLaneAndBroadcastOne) {
  auto in = input(R"(
#define STRIDE 32
__global__ void k(float* out, const float* a, const float* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = a[i * STRIDE] + b[blockIdx.x];
})",
                  "k", 128, 10);
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  double warps = 10.0 * 4;
  EXPECT_DOUBLE_EQ(find(r, "a", "load")->sectors, 32 * warps);
  EXPECT_DOUBLE_EQ(find(r, "b", "load")->sectors, 1 * warps);
  EXPECT_DOUBLE_EQ(find(r, "a", "load")->ideal, 4 * warps);
  EXPECT_DOUBLE_EQ(r.flops, 10.0 * 128);  // one add per thread
}

TEST(Traffic, SharedColumnAccessConflictsUnlessPadded) {
  const char* src = R"(
__global__ void t(float* out, const float* in) {
  __shared__ float tile[32][32 + PAD];
  int x = threadIdx.x, y = threadIdx.y;
  tile[y][x] = in[(blockIdx.y * 32 + y) * 1024 + blockIdx.x * 32 + x];
  __syncthreads();
  out[(blockIdx.x * 32 + y) * 1024 + blockIdx.y * 32 + x] = tile[x][y];
})";
  for (int pad : {0, 1}) {
    TrafficInput in;
    in.source = src;
    in.kernel_name = "t";
    in.block = {32, 8, 1};
    in.grid = {32, 32, 1};
    in.options = {"-DPAD=" + std::to_string(pad)};
    in.max_warps_per_block = 3;
    TrafficReport r = analyse_traffic(in);
    ASSERT_TRUE(r.error.empty()) << r.error;
    const Access* row = find(r, "tile", "store");
    const Access* col = find(r, "tile", "load");
    ASSERT_TRUE(row && col);
    double requests = 32.0 * 32 * 8;
    EXPECT_DOUBLE_EQ(row->requests, requests);
    EXPECT_DOUBLE_EQ(row->wavefronts, requests);  // a row: 32 banks, no conflict
    // A column tile[x][y]: stride 32 words -> one bank (32-way); stride 33 -> all banks.
    EXPECT_DOUBLE_EQ(col->wavefronts, requests * (pad ? 1 : 32)) << "pad " << pad;
    EXPECT_DOUBLE_EQ(r.shared_ideal, 2 * requests);
  }
}

// Dynamic shared memory (`extern __shared__ T a[];`, sized at launch, as gputune's halo windows)
// is shared memory too: its bank conflicts count like a static array's.
TEST(Traffic, DynamicSharedArrayIsSharedMemory) {
  const char* src = R"(
extern "C" __global__ void t(float* out, const float* in, int pitch) {
  extern __shared__ float win[];
  int x = threadIdx.x, y = threadIdx.y;
  win[y * pitch + x] = in[(blockIdx.y * 32 + y) * 1024 + blockIdx.x * 32 + x];
  __syncthreads();
  out[(blockIdx.x * 32 + y) * 1024 + blockIdx.y * 32 + x] = win[x * pitch + y];
})";
  for (int pitch : {32, 33}) {
    TrafficInput in;
    in.source = src;
    in.kernel_name = "t";
    in.block = {32, 8, 1};
    in.grid = {32, 32, 1};
    in.scalars["pitch"] = pitch;
    TrafficReport r = analyse_traffic(in);
    ASSERT_TRUE(r.error.empty()) << r.error;
    const Access* row = find(r, "win", "store");
    const Access* col = find(r, "win", "load");
    ASSERT_TRUE(row && col) << "pitch " << pitch;
    EXPECT_EQ(row->space, "shared");
    EXPECT_TRUE(col->analysed);
    double requests = 32.0 * 32 * 8;
    EXPECT_DOUBLE_EQ(row->wavefronts, requests);
    EXPECT_DOUBLE_EQ(col->wavefronts, requests * (pitch == 33 ? 1 : 32)) << "pitch " << pitch;
  }
}

TEST(Traffic, LongLoopsAreSampledAndFlopsCounted) {
  // Naive matrix multiply: n^2 threads, each an n-long dot product (2 flops per step).
  auto in = input(R"(
__global__ void mm(float* C, const float* A, const float* B, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
})",
                  "mm", 32, 0);
  const std::int64_t n = 512;
  in.block = {32, 8, 1};
  in.grid = {n / 32, n / 8, 1};
  in.scalars["n"] = n;
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const double warps = static_cast<double>(n * n / 32);
  EXPECT_DOUBLE_EQ(r.flops, 2.0 * n * n * n);
  EXPECT_DOUBLE_EQ(find(r, "A", "load")->requests, warps * n);
  EXPECT_DOUBLE_EQ(find(r, "A", "load")->sectors, warps * n);      // one row: broadcast
  EXPECT_DOUBLE_EQ(find(r, "B", "load")->sectors, 4 * warps * n);  // coalesced row of B
  EXPECT_DOUBLE_EQ(find(r, "C", "store")->sectors, 4 * warps);
}

// A loop costs a counter update, a compare and a branch per iteration the compiler leaves after
// unrolling: `#pragma unroll N` leaves floor(T/N) + T mod N; no pragma (or a bare `#pragma
// unroll`) on a run-time trip count unrolls by 4; a short constant trip count unrolls fully.
TEST(Traffic, LoopControlFollowsTheUnrollPragma) {
  auto control = [](const std::string& pragma, std::vector<std::string> options = {}) {
    auto in = input(R"(
__global__ void mv(float* y, const float* a, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  )" + pragma + R"(
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 4; ++j) acc += a[(i * n + k) * 4 + j] * x[k];
  }
  y[i] = acc;
})",
                    "mv", 128, 8);
    in.options = std::move(options);
    in.scalars["n"] = 515;
    TrafficReport r = analyse_traffic(in);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_NEAR(r.flops, 8.0 * 128 * 515 * 4 * 2, 1e-3);  // the body is counted in full
    return r.control_instructions;
  };
  const double warps = 8.0 * 4, per = 3 * warps;  // 3 instructions per iteration and warp
  EXPECT_DOUBLE_EQ(control("#pragma unroll 1"), per * 515);
  EXPECT_DOUBLE_EQ(control("#pragma unroll 8"), per * (64 + 3));
  EXPECT_DOUBLE_EQ(control("#pragma unroll UNROLL", {"-DUNROLL=2"}), per * (257 + 1));
  EXPECT_DOUBLE_EQ(control(""), per * (128 + 3));                // the compiler's 4
  EXPECT_DOUBLE_EQ(control("#pragma unroll"), per * (128 + 3));  // run-time trips: the same
  // Kernel Tuner's `loop_unroll_factor_*` = 0: nvcc and NVRTC warn and ignore the pragma (the
  // compiler's 4); clang calls it an error, which must not cost the analysis.
  EXPECT_DOUBLE_EQ(control("#pragma unroll loop_unroll_factor_k", {"-Dloop_unroll_factor_k=0"}),
                   per * (128 + 3));
  {
    auto in = input(
        "__global__ void k(float* y) {\n#pragma unroll 0\n"
        "  for (int i = 0; i < 64; ++i) y[i * 32 + threadIdx.x] = 0.0f;\n}",
        "k", 32, 1);
    TrafficReport r = analyse_traffic(in);
    EXPECT_TRUE(r.parsed && r.error.empty()) << r.error;
    ASSERT_FALSE(r.notes.empty());
    EXPECT_NE(r.notes[0].find("kernel.cu:2:"), std::string::npos) << r.notes[0];
    EXPECT_NE(r.notes[0].find("ignored, as nvcc and NVRTC ignore it"), std::string::npos)
        << r.notes[0];
  }
  // A constant trip count unrolls fully: the inner j loop above costs nothing, and so does a
  // fully unrolled outer loop over a constant bound.
  auto in = input(R"(
#define K 16
__global__ void dot(float* y, const float* a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) acc += a[k * 1024 + i];
#pragma unroll 1
  for (int k = K; k > 0; k -= 2) acc += a[k * 512 + i];
  y[i] = acc;
})",
                  "dot", 128, 8);
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.control_instructions, per * 8);  // only the second: 16 down to 2 by 2
}

TEST(Traffic, DataDependentIndexIsReportedNotGuessed) {
  auto in = input(R"(
__global__ void gather(float* out, const float* in, const int* idx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (in[i] > 0.0f) out[i] = in[idx[i]];
})",
                  "gather", 64, 2);
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.unanalysed, 1u);
  bool gather_found = false;
  for (auto& a : r.accesses)
    if (a.array == "in" && !a.analysed) {
      gather_found = true;
      EXPECT_DOUBLE_EQ(a.sectors, 32.0 * a.requests);  // worst case: a sector per lane
      EXPECT_NE(a.note.find("depends on data"), std::string::npos);
    }
  EXPECT_TRUE(gather_found);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("data-dependent branch at line 4"), std::string::npos) << r.notes[0];
}

// A grid of a few blocks is often a full one and a partial last one (a tile of 248 x 8 rows over
// 2048 rows: the second of two blocks has 64): the analysis counts the last block apart, so the
// lanes that pass the bound check are counted exactly, whichever block is interior.
TEST(Traffic, APartialLastBlockOfAShortGridIsCountedAsItIs) {
  auto bytes = [](std::int64_t n, std::int64_t blocks) {
    auto in = input(R"(
__global__ void copy(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
})",
                    "copy", 32, blocks);
    in.scalars["n"] = static_cast<double>(n);
    TrafficReport r = analyse_traffic(in);
    EXPECT_TRUE(r.error.empty()) << r.error;
    return r.requested_bytes;
  };
  EXPECT_DOUBLE_EQ(bytes(40, 2), 2 * 4 * 40.0);  // 32 + 8 lanes, not 2 x 8 or 2 x 32
  EXPECT_DOUBLE_EQ(bytes(70, 3), 2 * 4 * 70.0);  // 32 + 32 + 6
  EXPECT_DOUBLE_EQ(bytes(64, 2), 2 * 4 * 64.0);  // both full
  // The last block runs all its warps: 22 rows a block, 27 rows, so the second of two blocks
  // has 5 busy warps of 22. Its first, middle and last warp (rows 22, 33, 43) would have stood
  // for 22 / 3 busy warps.
  auto in = input(R"(
__global__ void fill(float* out, int n) {
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (y < n) out[y * 32 + threadIdx.x] = 1.0f;
})",
                  "fill", 32, 1);
  in.block = {32, 22, 1};
  in.grid = {1, 2, 1};
  in.scalars["n"] = 27;
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(find(r, "out", "store")->requests, 27);
}

// A conversion between integer and floating types is an instruction of its own (I2F, F2I), at a
// fraction of the FP32 rate. One of a constant is folded; one no enclosing loop changes runs
// once, before the loops it does not depend on.
TEST(Traffic, ConversionsCountWhereTheCompilerKeepsThem) {
  auto in = input(R"(
__global__ void dedisperse(const unsigned char* in, float* out, const float* shifts, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int dm = blockIdx.y;
  float sum = 0.0f;
  for (int c = 0; c < n; c++) {
    // dm's I2F: once, before the loop; the F2I of the product: every step.
    unsigned int shift = (0.5f + dm * 0.02f) * shifts[c];
    sum += in[c * 64 + x + shift];  // the byte's I2F: every step
  }
  out[dm * 32 + x] = sum * 2;  // 2: folded
  for (int t = 0; t < 3; ++t)
    for (int c = 0; c < n; c++) out[c] = (float)t * shifts[c];  // (float)t: once per t
})",
                  "dedisperse", 32, 1);
  in.grid = {1, 4, 1};
  in.scalars["n"] = 100;  // sampled: 4 of the 100 steps, weighted 25
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.conversion_instructions, 4 * (1 + 2 * 100 + 3));
  in.scalars["n"] = 6;  // run in full
  r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.conversion_instructions, 4 * (1 + 2 * 6 + 3));
}

// A launch passes arguments by position: a job whose arguments are named otherwise than the
// kernel's parameters (Kernel Tuner's T1 files: `input_samples` for `in`) still gives their values.
TEST(Traffic, ArgumentsBindToParametersByPosition) {
  auto in = input(R"(
__global__ void copy(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
})",
                  "copy", 32, 2);
  in.argument_order = {"output_arr", "input_samples", "size"};
  in.scalars["size"] = 40;
  in.array_bytes = {{"output_arr", 160}, {"input_samples", 160}};
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.requested_bytes, 2 * 4 * 40.0);  // n is known: 40 lanes pass
  EXPECT_DOUBLE_EQ(r.compulsory_bytes, 2 * 160.0);    // and the allocations bound DRAM
  EXPECT_TRUE(r.notes.empty()) << r.notes[0];
}

// A lambda's call passes the lambda object first: its parameters take the arguments after it
// (found by the sgemm example, whose lambda version read shared memory at unknown addresses:
// 32 wavefronts per access, a prediction 7x too slow).
TEST(Traffic, ALambdaTakesItsArgumentsAfterItsObject) {
  auto in = input(R"(
__global__ void k(float* out, const float* in) {
  __shared__ float s[64];
  auto at = [&](int row, int col) { return s[row * 32 + col]; };
  s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = at(1, threadIdx.x);
})",
                  "k", 32, 1);
  in.array_bytes = {{"out", 128}, {"in", 128}};
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const Access* ld = find(r, "s", "load");
  ASSERT_TRUE(ld);
  EXPECT_TRUE(ld->analysed) << ld->note;
  EXPECT_DOUBLE_EQ(ld->wavefronts, 1);  // 32 consecutive words: no conflict
}

// Dedispersion's pattern: each row y adds a data-dependent shift (`shifts[c]` times a function of
// y) to a coalesced run of samples x. Lanes of one row share the shift, so the run's bytes are
// counted together at an unknown alignment; lanes of different rows never share a sector.
TEST(Traffic, LanesThatShareLoadedDataAreCountedRelativeToEachOther) {
  const std::string src = R"(
__global__ void shifted(float* out, const unsigned char* in, const float* shifts, const int* off) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  float acc = 0.0f;
  for (int c = 0; c < 8; ++c) {
    unsigned int shift = (0.5f + y * 0.25f) * shifts[c];
    acc += in[(c * 4096) + (x + shift)];
  }
  out[y * 1024 + x] = acc + out[off[0] + x];
})";
  auto per_request = [&](std::int64_t bx, std::int64_t by, const std::string& array,
                         const std::string& kind) {
    TrafficInput in = input(src, "shifted", bx, 1);
    in.block = {bx, by, 1};
    in.grid = {1024 / bx, 256 / by, 1};
    TrafficReport r = analyse_traffic(in);
    EXPECT_TRUE(r.parsed && r.error.empty()) << r.error;
    const Access* a = find(r, array, kind);
    EXPECT_TRUE(a) << array;
    return a ? a->sectors / a->requests : -1.0;
  };
  // A warp is one row of 32 samples: 32 bytes at an unknown base, aligned to a sector in 1 of
  // the 32 byte offsets it may start at (1 sector), split over two in the other 31.
  EXPECT_DOUBLE_EQ(per_request(32, 4, "in", "load"), (1 + 31 * 2) / 32.0);
  // Four rows of 8 samples: four groups of 8 bytes, each split over two sectors when it starts
  // at byte 25..31 of one.
  EXPECT_DOUBLE_EQ(per_request(8, 4, "in", "load"), 4 * (25 + 7 * 2) / 32.0);
  // 32 rows of one sample: 32 shifts, 32 sectors.
  EXPECT_DOUBLE_EQ(per_request(1, 32, "in", "load"), 32.0);
  // Every lane reads the same shift: one sector.
  EXPECT_DOUBLE_EQ(per_request(32, 4, "shifts", "load"), 1.0);
  // A base every lane loads from the same address: 32 floats at a 4-byte-aligned unknown base,
  // 4 sectors when it starts a sector (1 of 8 offsets), else 5.
  EXPECT_DOUBLE_EQ(per_request(32, 4, "out", "load"), (4 + 7 * 5) / 8.0);

  TrafficInput in = input(src, "shifted", 32, 32);
  in.block = {32, 4, 1};
  TrafficReport r = analyse_traffic(in);
  const Access* a = find(r, "in", "load");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->analysed);  // still reported: the address depends on data
  EXPECT_NE(a->note.find("share the data-dependent part"), std::string::npos) << a->note;
  EXPECT_EQ(r.unanalysed, 2u);  // in[...] and out[off[0] + x]
}

// Floating-point values the analysis can compute (literals, conversions, arithmetic in single
// precision) and the contents of read-only arrays the job gives set addresses exactly: a
// dedispersion warp of 32 rows whose shifts differ by less than a sample reads one sector.
TEST(Traffic, KnownFloatsAndTheJobsReadOnlyDataSetAddresses) {
  auto in = input(R"(
__global__ void k(float* out, const unsigned char* in, const float* shifts, const float* a) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  unsigned int shift = (0.0f + y * 0.02f) * shifts[3];
  int half = (int)(threadIdx.y * 0.5f);
  out[y * 4096 + x] = in[4096 + x + shift] + a[half];
})",
                  "k", 1, 1);
  in.block = {1, 32, 1};
  in.grid = {4096, 4, 1};
  auto per_request = [&](const TrafficReport& r, const std::string& array) {
    const Access* a = find(r, array, "load");
    EXPECT_TRUE(a) << array;
    return a ? a->sectors / a->requests : -1.0;
  };
  // (int)(y * 0.5f): pairs of lanes read the same float: 16 floats, 64 bytes, 2 sectors.
  TrafficReport without = analyse_traffic(in);
  ASSERT_TRUE(without.error.empty()) << without.error;
  EXPECT_DOUBLE_EQ(per_request(without, "a"), 2.0);
  EXPECT_DOUBLE_EQ(per_request(without, "in"), 32.0);  // shifts unknown: a sector per row
  // With the shifts' contents: shifts[3] = 1.5, so the rows of the interior block (y 64..95)
  // shift by (unsigned)(y * 0.02f * 1.5f) = 1 or 2 samples and those of the last (96..127) by 2
  // or 3: every lane in the sector at byte 4096 + 2048 (x = 2048).
  std::vector<float> shifts(8, 0.0f);
  shifts[3] = 1.5f;
  auto bytes = std::make_shared<std::vector<unsigned char>>(shifts.size() * 4);
  std::memcpy(bytes->data(), shifts.data(), bytes->size());
  in.array_data["shifts"] = {bytes, "digest"};
  TrafficReport with = analyse_traffic(in);
  ASSERT_TRUE(with.error.empty()) << with.error;
  EXPECT_DOUBLE_EQ(per_request(with, "in"), 1.0);
  const Access* a = find(with, "in", "load");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->analysed);  // every address known
  // A read outside the data given (shifts[3] of 2 floats) is not guessed: back to symbols.
  bytes->resize(8);
  TrafficReport outside = analyse_traffic(in);
  EXPECT_DOUBLE_EQ(per_request(outside, "in"), 32.0);

  // A sampled loop sees 4 of its iterations: a float it carries is unknown after it, so a
  // branch on it counts both sides instead of taking the side 4 iterations would give.
  auto sum = input(R"(
__global__ void k(float* out) {
  float s = 0.0f;
  for (int i = 0; i < 64; ++i) s += 1.0f;
  if (s > 10.0f) out[threadIdx.x] = s;
})",
                   "k", 32, 1);
  TrafficReport r = analyse_traffic(sum);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(find(r, "out", "store"));
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("data-dependent branch at line 5"), std::string::npos) << r.notes[0];
}

// The tuner caches reports as JSON: every field comes back as it was, and text that is not a
// whole report is refused (read as a cache miss).
TEST(Traffic, AReportSurvivesJsonExactly) {
  auto in = input(R"(
__global__ void gather(float* out, const float* in, const int* idx, int n) {
  __shared__ float tile[33][32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x % 32][threadIdx.x / 32] = in[i];
  __syncthreads();
  float s = 0;
  for (int k = 0; k < n; ++k) s += tile[k % 32][threadIdx.x % 32] * 0.3f;
  if (in[i] > 0.0f) out[i] = s + in[idx[i]] + (float)i;
})",
                  "gather", 128, 7);
  in.scalars["n"] = 100;
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_GE(r.accesses.size(), 4u);
  EXPECT_FALSE(r.notes.empty());
  EXPECT_GT(r.flops, 0);
  EXPECT_GT(r.conversion_instructions, 0);
  const std::string text = traffic_to_json(r);
  const auto back = traffic_from_json(text);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == r);
  EXPECT_EQ(traffic_to_json(*back), text);
  TrafficReport failed = analyse_traffic(input("__global__ void k() {}", "other", 32, 1));
  ASSERT_TRUE(traffic_from_json(traffic_to_json(failed)));
  EXPECT_TRUE(*traffic_from_json(traffic_to_json(failed)) == failed);
  EXPECT_FALSE(traffic_from_json(text.substr(0, text.size() / 2)));  // torn
  EXPECT_FALSE(traffic_from_json("{}"));                             // another version's
  r.flops = std::numeric_limits<double>::infinity();                 // JSON has no infinity
  EXPECT_FALSE(traffic_from_json(traffic_to_json(r)));
}

TEST(Traffic, UnparsableKernelSaysWhy) {
  auto in =
      input("#include <no_such_header.h>\n__global__ void k(float* a) { a[0] = 1; }", "k", 32, 1);
  TrafficReport r = analyse_traffic(in);
  EXPECT_FALSE(r.parsed);
  EXPECT_NE(r.error.find("no_such_header.h"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("kernel.cu:1"), std::string::npos) << r.error;

  auto missing = input("__global__ void k(float* a) { a[0] = 1; }", "other", 32, 1);
  TrafficReport m = analyse_traffic(missing);
  EXPECT_FALSE(m.parsed);
  EXPECT_NE(m.error.find("'other'"), std::string::npos);
}

// A kernel named as a template's instance ("copy<double>", as Kernel Tuner and NVRTC name them)
// is analysed in that instance: its element type sets the bytes, and another instance of the
// same template is another kernel.
TEST(Traffic, TemplateInstancesAreAnalysedWithTheirTypes) {
  const std::string src = R"(
namespace k {
template <typename T, int N>
__global__ void copy(T* out, const T* __restrict__ in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < N; ++j) out[i * N + j] = in[i * N + j];
}
})";
  auto f = input(src, "k::copy<float, 1>", 256, 64);
  TrafficReport rf = analyse_traffic(f);
  ASSERT_TRUE(rf.parsed) << rf.error;
  ASSERT_TRUE(rf.error.empty()) << rf.error;
  EXPECT_DOUBLE_EQ(rf.requested_bytes, 2.0 * 4 * 256 * 64);
  auto d = input(src, "k::copy<double,2>", 256, 64);
  TrafficReport rd = analyse_traffic(d);
  ASSERT_TRUE(rd.parsed) << rd.error;
  EXPECT_DOUBLE_EQ(rd.requested_bytes, 2.0 * 8 * 2 * 256 * 64);
  auto other = input(src, "k::move<float, 1>", 256, 64);
  TrafficReport ro = analyse_traffic(other);
  EXPECT_FALSE(ro.parsed);
  EXPECT_NE(ro.error.find("move"), std::string::npos) << ro.error;
}

TEST(Traffic, VectorLoadsAndDeviceFunctionsAndGridStrideLoops) {
  auto in = input(R"(
__device__ int at(int i, int w) { return i * w; }
__global__ void v(float4* out, const float4* __restrict__ in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float4 x = __ldg(&in[at(i, 1)]);
    out[i] = x;
  }
})",
                  "v", 128, 8);
  in.scalars["n"] = 128 * 8 * 64;  // 64 iterations per thread: sampled
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  double requests = 8.0 * 4 * 64;
  const Access* ld = find(r, "in", "load");
  ASSERT_TRUE(ld);
  EXPECT_EQ(ld->element_bytes, 16);
  // (The grid's last block is weighted apart from the interior one: sums of thirds, exact to
  // rounding.)
  EXPECT_NEAR(ld->requests, requests, 1e-9);
  EXPECT_NEAR(ld->sectors, 16 * requests, 1e-9);  // 32 lanes x 16 B = 512 B
  const Access* st = find(r, "out", "store");
  ASSERT_TRUE(st);
  EXPECT_NEAR(st->sectors, 16 * requests, 1e-9);
}

// A generated variant tests a pointer's alignment before a vector load and falls back to scalar
// loads: the test evaluates (offsets from a 256-byte aligned allocation), so only the path that
// runs is counted, per lane.
TEST(Traffic, AlignmentTestsOnPointersPickThePathThatRuns) {
  auto in = input(R"(
__global__ void v(float* out, const float* in, int off) {
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4 + off;
  const float* p = &in[i];
  if (reinterpret_cast<unsigned long long>(p) % 16 == 0) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(p));
    out[i] = x.x + x.y + x.z + x.w;
  } else {
    float s = 0;
    for (int j = 0; j < 4; ++j) s += __ldg(&in[i + j]);
    out[i] = s;
  }
})",
                  "v", 128, 8);
  in.array_bytes["in"] = 4 * (128 * 8 * 4 + 4);
  for (int off : {0, 1}) {
    in.scalars["off"] = off;
    TrafficReport r = analyse_traffic(in);
    ASSERT_TRUE(r.error.empty()) << r.error;
    double vector = 0, scalar = 0;
    for (const Access& a : r.accesses)
      if (a.array == "in") (a.element_bytes == 16 ? vector : scalar) += a.requests;
    EXPECT_NEAR(vector, off == 0 ? 8.0 * 4 : 0.0, 1e-9) << "off " << off;
    EXPECT_NEAR(scalar, off == 0 ? 0.0 : 8.0 * 4 * 4, 1e-9) << "off " << off;
  }
}

// The generated variants keep per-output flags in local arrays (`bool gt_ok[2]`, indexed by
// unrolled constants) and branch on them: the analysis remembers their values per lane, so each
// side of such a branch is counted for the lanes that take it, not for every lane.
TEST(Traffic, BranchesOnLocalFlagArraysAreDecidedPerLane) {
  auto in = input(R"(
__global__ void v(float* out, const float* in, int n) {
  const int x0 = blockIdx.x * 256 + threadIdx.x;
  bool ok[2];
  bool never[2] = {};
  for (int m = 0; m < 2; ++m) ok[m] = threadIdx.x % 32 + m * 32 < n;
  for (int m = 0; m < 2; ++m) {
    if (ok[m])
      out[x0 + m * 128] = in[x0 + m * 128];
    else
      out[m] = 0.0f;
  }
  if (never[1]) out[2] = in[2];
})",
                  "v", 128, 8);
  in.scalars["n"] = 20;  // lanes 0..19 of every warp pass for m = 0, none for m = 1
  in.array_bytes["in"] = in.array_bytes["out"] = 4 * 2048;
  TrafficReport r = analyse_traffic(in);
  ASSERT_TRUE(r.error.empty()) << r.error;
  double loaded = 0, stored = 0, requests = 0;
  for (const Access& a : r.accesses) {
    if (a.array == "in") loaded += a.bytes;
    if (a.array == "out") stored += a.bytes;
    if (a.array == "out") requests += a.requests;
  }
  const double warps = 8 * 4;
  EXPECT_NEAR(loaded, warps * 20 * 4, 1e-6) << "only the lanes whose flag is set read";
  EXPECT_NEAR(stored, warps * (20 + 12 + 32) * 4, 1e-6) << "each lane stores once a step";
  EXPECT_NEAR(requests, warps * 3, 1e-6) << "then and else at m = 0, else at m = 1, never[1] never";
}

TEST(Traffic, MatmulExampleSharedTilingCutsGlobalSectors) {
  std::ifstream f(std::string(GPUTUNE_SOURCE_DIR) + "/configs/examples/matmul.cu");
  std::stringstream ss;
  ss << f.rdbuf();
  auto run = [&](int shared) {
    TrafficInput in;
    in.source = ss.str();
    in.kernel_name = "matmul";
    in.options = {"-std=c++17",
                  "-Dblock_size_x=32",
                  "-Dblock_size_y=8",
                  "-Dtile_size_x=2",
                  "-Dtile_size_y=4",
                  "-Dtile_k=32",
                  "-Duse_shared=" + std::to_string(shared),
                  "-Dunroll_k=4"};
    in.block = {32, 8, 1};
    in.grid = {4096 / 64, 4096 / 32, 1};
    in.scalars["n"] = 4096;
    return analyse_traffic(in);
  };
  TrafficReport g = run(0), s = run(1);
  ASSERT_TRUE(g.error.empty()) << g.error;
  ASSERT_TRUE(s.error.empty()) << s.error;
  const double n = 4096;
  EXPECT_NEAR(g.flops, 2 * n * n * n, 1e-6 * n * n * n);
  EXPECT_NEAR(s.flops, 2 * n * n * n, 1e-6 * n * n * n);
  // Without shared memory every thread reads its rows of A and columns of B from global memory;
  // with 64x32 tiles staged in shared memory, each element is read once per tile.
  EXPECT_GT(g.load_sectors, 4 * s.load_sectors);
  EXPECT_GT(s.shared_wavefronts, 0);
  EXPECT_EQ(g.shared_wavefronts, 0);
  EXPECT_EQ(s.unanalysed, 0u);
}

}  // namespace
}  // namespace gputune::pruner
