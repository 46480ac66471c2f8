// The naive-kernel generator: analysis (what it recognises, what it refuses and why) and every
// configs/naive kernel's variants checked against the naive kernel on the CPU emulator, at sizes
// that are not multiples of any tile.
// Over 800 lines on purpose: one test per transformation, each reading the generated text next to
// the kernel it came from; the helpers they share (analyse, ptx_of, count) stay in one place.
#include "variants/naive/naive.h"

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <cmath>
#include <fstream>
#include <numeric>
#include <regex>
#include <set>

#include "cuda/nvrtc.h"
#include "pruner/cubin.h"
#include "tuner/common/tuning_job.h"
#include "tuner/emulator/cpu_check.h"
#include "tuner/emulator/cpu_emulator.h"
#include "tuner/tools/generate.h"
#include "variants/space.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;
using naive::Cache;

const fs::path kNaive = fs::path(GPUTUNE_SOURCE_DIR) / "configs" / "naive";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

naive::NaiveKernel analyse(const std::string& name) {
  return naive::analyse_naive(read(kNaive / (name + ".cu")), name, name + ".cu");
}

std::vector<Cache> allowed(const naive::NaiveKernel& k, const std::string& array) {
  for (const auto& a : naive::array_options(k))
    if (a.array == array) return a.allowed;
  return {};
}

TEST(NaiveAnalysis, MatrixMultiplyStagesBothInputsAndMergesBothDimensions) {
  naive::NaiveKernel k = analyse("mm");
  EXPECT_EQ(k.dims, 2);
  EXPECT_EQ(k.index_names[0], "idx");
  EXPECT_EQ(k.index_names[1], "idy");
  EXPECT_EQ(k.loops, 1);
  EXPECT_EQ(k.guard.size(), 2u);
  EXPECT_EQ(allowed(k, "a"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_EQ(allowed(k, "b"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_TRUE(allowed(k, "c").empty()) << "c is only written: no load path to choose";
  // The accumulator is replicated per merged thread, the loop is kept once.
  ASSERT_EQ(k.locals.size(), 1u);
  EXPECT_TRUE(k.locals[0].replicated);
}

TEST(NaiveAnalysis, OffersStagingOnlyWhereItPays) {
  // tmv reads a[i*m+idx]: coalesced and not reused, so shared memory is not offered (with why).
  naive::NaiveKernel t = analyse("tmv");
  EXPECT_EQ(allowed(t, "a"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly}));
  EXPECT_EQ(allowed(t, "x").back(), Cache::Shared);
  bool said = false;
  for (const auto& a : naive::array_options(t))
    for (const auto& r : a.reasons) said |= r.find("coalesced and not reused") != std::string::npos;
  EXPECT_TRUE(said);
  // mv reads a[idx*n+i]: strided across the warp, so it is staged for coalescing.
  EXPECT_EQ(allowed(analyse("mv"), "a").back(), Cache::Shared);
  // The early-return bounds check of tmv is a guard too.
  EXPECT_EQ(t.guard.size(), 1u);
  // Written arrays never take the read-only path: the reduction's output is read-modify-write.
  naive::NaiveKernel r = analyse("reduction");
  EXPECT_EQ(allowed(r, "in"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly}));
}

// Thread merge keeps the loads its outputs share once: mm's a[idy*n+k] is read once per merged row
// and b[k*n+idx] once per merged column, from whichever path the array takes, under "some output
// of that row (column) passes the bounds check".
TEST(NaiveMerge, LoadsTheMergedOutputsShareAreReadOnceIntoRegisters) {
  naive::NaiveKernel mm = analyse("mm");
  int a = -1, b = -1;
  for (size_t i = 0; i < mm.accesses.size(); ++i) {
    if (mm.accesses[i].store) continue;
    (mm.params[static_cast<size_t>(mm.accesses[i].param)].name == "a" ? a : b) =
        static_cast<int>(i);
  }
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  const std::string ra = "gt_r" + std::to_string(a), rb = "gt_r" + std::to_string(b);
  for (Cache path : {Cache::Global, Cache::ReadOnly, Cache::Shared}) {
    naive::Choice c;
    c.block_x = 16;
    c.block_y = 4;
    c.merge_x = 8;
    c.merge_y = 4;
    c.cache = {{"a", path}, {"b", path}};
    std::string src = naive::emit_variant(mm, c);
    // Loaded under a check (global paths), a register starts at zero; a tile's needs no check.
    const std::string init = path == Cache::Shared ? "" : "{}";
    EXPECT_NE(src.find("float " + ra + "[4]" + init +
                       ";  // a[idy * n + k], read once for the merged outputs of a row"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("float " + rb + "[8]" + init +
                       ";  // b[k * n + idx], read once for the merged outputs of a column"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("sum[gt_my][gt_mx] += " + ra + "[gt_my] * " + rb + "[gt_mx];"),
              std::string::npos)
        << src;
    // From memory only where some output of the row (column) passes the check; a shared tile
    // holds every output of the block, so its loads need no check.
    const std::string row = path == Cache::Shared ? "" : "if (gt_ok_row[gt_my]) ";
    const std::string col = path == Cache::Shared ? "" : "if (gt_ok_col[gt_mx]) ";
    EXPECT_NE(src.find("  " + row + ra + "[gt_my] = "), std::string::npos) << src;
    EXPECT_NE(src.find("  " + col + rb + "[gt_mx] = "), std::string::npos) << src;
  }
  // Merged along x only: a is shared by all of a thread's outputs; b is not shared at all.
  naive::Choice x;
  x.merge_x = 4;
  x.block_y = 8;
  std::string src = naive::emit_variant(mm, x);
  EXPECT_NE(src.find("float " + ra + "{};  // a[idy * n + k], read once for all merged outputs"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("float " + rb), std::string::npos) << src;
  EXPECT_NE(src.find("if (gt_ok_any) " + ra + " = "), std::string::npos) << src;
  // Without merging there is nothing to share.
  EXPECT_EQ(naive::emit_variant(mm, naive::Choice{}).find("gt_r"), std::string::npos);
}

/// The variant's PTX for Hopper (NVRTC, no GPU needed), to count its instructions.
std::string ptx_of(const std::string& source) {
  nvrtcProgram prog;
  EXPECT_EQ(nvrtcCreateProgram(&prog, source.c_str(), "v.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
  const char* opts[] = {"-arch=compute_90", "-w"};
  const nvrtcResult rc = nvrtcCompileProgram(prog, 2, opts);
  size_t n = 0;
  std::string text;
  if (rc == NVRTC_SUCCESS && nvrtcGetPTXSize(prog, &n) == NVRTC_SUCCESS) {
    text.resize(n);
    nvrtcGetPTX(prog, text.data());
  } else {
    nvrtcGetProgramLogSize(prog, &n);
    text.resize(n);
    nvrtcGetProgramLog(prog, text.data());
    ADD_FAILURE() << "NVRTC: " << text << "\n" << source;
    text.clear();
  }
  nvrtcDestroyProgram(&prog);
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Work that only updates an output's own float accumulator from shared tiles, or from registers
// a read shared by merged outputs was hoisted into, runs for every merged output, in range or not
// (the tiles and those registers hold zero outside it, and such a result is never stored): no
// bounds-check predicate on each FMA of the inner loop. A read of memory in the update itself,
// other arithmetic (a division) or a store keep their check.
TEST(NaiveMerge, AccumulationFromTilesAndHoistedReadsNeedsNoCheckPerOutput) {
  const naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 8;
  c.merge_x = 4;
  c.merge_y = 4;
  c.tile_k = 16;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  // Occurrences of `what` (default: the accumulation) right under a test of the output's flag.
  auto checked_updates = [](const std::string& src,
                            const std::string& what = "sum[gt_my][gt_mx] += ") {
    size_t n = 0;
    for (size_t p = src.find(what); p != std::string::npos; p = src.find(what, p + 1)) {
      const size_t end = src.rfind('\n', p), begin = src.rfind('\n', end - 1);
      n += src.substr(begin, end - begin).find("if (gt_ok[gt_my][gt_mx]) {") != std::string::npos;
    }
    return n;
  };
  const std::string shared = naive::emit_variant(mm, c);
  EXPECT_EQ(checked_updates(shared), 0u) << shared;
  EXPECT_NE(shared.find("    sum[gt_my][gt_mx] = 0.0f;"), std::string::npos) << shared;
  EXPECT_NE(shared.find("if (gt_ok[gt_my][gt_mx]) {\n      c[idy * n + idx] = sum[gt_my][gt_mx];"),
            std::string::npos)
      << shared;
  // b through the read-only path: each column's element is read once, under the column's check,
  // into a register that is zero where the column is out of range.
  c.cache = {{"a", Cache::Shared}, {"b", Cache::ReadOnly}};
  const std::string hoisted = naive::emit_variant(mm, c);
  EXPECT_NE(hoisted.find("float gt_r1[4]{};"), std::string::npos) << hoisted;
  EXPECT_NE(hoisted.find("if (gt_ok_col[gt_mx]) gt_r1[gt_mx] = __ldg(&b[k * n + idx]);"),
            std::string::npos)
      << hoisted;
  EXPECT_EQ(checked_updates(hoisted), 0u) << hoisted;
  // The same with 4-wide vector loads of b: one per run of 4 columns, zero where out of range.
  c.merge_x = 8;
  c.vector = 4;
  const std::string runs = naive::emit_variant(mm, c);
  EXPECT_NE(runs.find("float gt_r1[8]{};"), std::string::npos) << runs;
  EXPECT_NE(runs.find("__ldg(reinterpret_cast<const float4*>(gt_p))"), std::string::npos) << runs;
  EXPECT_EQ(checked_updates(runs), 0u) << runs;
  c.merge_x = 4;
  c.vector = 1;
  // NVRTC's PTX: with the check, each FMA of the unrolled strip is followed by a select.
  const std::string p_shared = ptx_of(shared), p_hoisted = ptx_of(hoisted);
  EXPECT_GE(count(p_shared, "fma.rn.f32"), 16u);  // merge 4 x 4: 16 per step of k
  EXPECT_EQ(count(p_shared, "selp.f32"), 0u) << p_shared;
  EXPECT_GE(count(p_hoisted, "fma.rn.f32"), 16u);
  EXPECT_EQ(count(p_hoisted, "selp.f32"), 0u) << p_hoisted;
  // A read of memory in the update itself (each merged output reads its own element of a: no
  // register is shared) keeps the check: out of range, the read could fault.
  const naive::NaiveKernel own = naive::analyse_naive(R"(
__global__ void scaled(float *c, const float *a, const float *b, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n) {
    float sum = 0;
    for (int k = 0; k < n; k++) sum += a[idy * n + idx] * b[k];
    c[idy * n + idx] = sum;
  }
})",
                                                      "scaled", "scaled.cu");
  c.cache = {{"a", Cache::Global}, {"b", Cache::Global}};
  const std::string direct = naive::emit_variant(own, c);
  EXPECT_EQ(checked_updates(direct), 1u) << direct;
  const std::string p_direct = ptx_of(direct);
  EXPECT_GE(count(p_direct, "selp.f32") + count(p_direct, "@%p"), 16u) << p_direct;
  // A division in the update stays under the check: an output out of range could divide by zero.
  const naive::NaiveKernel div = naive::analyse_naive(R"(
__global__ void mmdiv(float *c, const float *a, const float *b, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n) {
    float sum = 0;
    for (int k = 0; k < n; k++) sum += a[idy * n + k] / b[k * n + idx];
    c[idy * n + idx] = sum;
  }
})",
                                                      "mmdiv", "mmdiv.cu");
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  const std::string d = naive::emit_variant(div, c);
  EXPECT_EQ(checked_updates(d), 2u) << d;
  // An output kept in registers (mm_acc's c, zero unless loaded, stored back under the check) is
  // updated without it too; in global memory it keeps it.
  const naive::NaiveKernel acc = analyse("mm_acc");
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}, {"c", Cache::Registers}};
  const std::string in_regs = naive::emit_variant(acc, c);
  EXPECT_EQ(count(in_regs, "gt_reg_c[gt_my][gt_mx] += "), 2u) << in_regs;
  EXPECT_EQ(checked_updates(in_regs, "gt_reg_c[gt_my][gt_mx] += "), 0u) << in_regs;
  EXPECT_NE(in_regs.find("if (gt_ok[gt_my][gt_mx]) c[idy * n + idx] = gt_reg_c[gt_my][gt_mx];"),
            std::string::npos)
      << in_regs;
  c.cache["c"] = Cache::Global;
  const std::string in_memory = naive::emit_variant(acc, c);
  EXPECT_EQ(checked_updates(in_memory, "c[idy * n + idx] += "), 2u) << in_memory;
}

// A staged store's write-back (the tiled transpose) takes `vector` consecutive idy per thread:
// one float4 read of the tile row and one float4 store where the whole run passes the bounds
// check and the address is aligned, element by element otherwise. The tile's pitch is padded by
// the width, so every row stays 16-byte aligned.
TEST(NaiveMerge, StagedStoresGoBackOneVectorPerThread) {
  const naive::NaiveKernel t = analyse("transpose");
  naive::Choice c;
  c.block_x = 32;
  c.block_y = 8;
  c.merge_y = 4;
  c.pad = 1;
  c.vector = 4;
  c.cache["in"] = Cache::ReadOnly;
  c.stage_store.insert("out");
  const std::string src = naive::emit_variant(t, c);
  EXPECT_NE(src.find("__shared__ __align__(16) float gt_w_out[32][36];"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_t0 = gt_e / 8, gt_t1 = gt_e % 8 * 4;"), std::string::npos)
      << src;
  EXPECT_NE(src.find("*reinterpret_cast<float4*>(gt_p) = *reinterpret_cast<const "
                     "float4*>(&gt_w_out[gt_t0][gt_t1]);"),
            std::string::npos)
      << src;
  const std::string vec = ptx_of(src);  // NVVM moves the copy as v4.u32
  EXPECT_GE(count(vec, "st.global.v4."), 1u) << vec;
  EXPECT_GE(count(vec, "ld.shared.v4."), 1u) << vec;
  // Scalar: vector 1, or rows of the tile (block_size_y * merge_y) the width does not divide.
  c.vector = 1;
  const std::string scalar = ptx_of(naive::emit_variant(t, c));
  EXPECT_EQ(count(scalar, "st.global.v4."), 0u);
  EXPECT_GE(count(scalar, "st.global.f32"), 1u);
  c.vector = 4;
  c.block_y = 2;
  c.merge_y = 1;
  const std::string narrow = naive::emit_variant(t, c);
  EXPECT_EQ(narrow.find("reinterpret_cast<float4*>(gt_p)"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("gt_w_out[32][3];"), std::string::npos) << narrow;
  // The space offers vector 2 and 4 with staged stores only where the width divides the rows.
  Job job = load_job(kNaive / "transpose.json");
  naive::apply_to_job(job, t);
  const Space s = build_space(job);
  size_t staged_vectors = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const naive::Choice ch = naive::choice_from_config(t, s.config(i));
    if (ch.stage_store.empty() || ch.vector == 1 || ch.merge_x >= ch.vector) continue;
    ++staged_vectors;
    EXPECT_EQ(ch.block_y * ch.merge_y % ch.vector, 0) << naive::choice_label(t, ch);
  }
  EXPECT_GT(staged_vectors, 0u);
}

// Reads straight from global memory at consecutive idx (transpose's in[idy*n+idx], tmv's
// a[i*m+idx]) take one float2/float4 per run of consecutive merged outputs when every output of
// the run passes the bounds check and the address is aligned, element by element otherwise.
TEST(NaiveMerge, ReadsStraightFromGlobalMemoryTakeOneVectorPerRun) {
  naive::NaiveKernel t = analyse("transpose");
  naive::Choice c;
  c.block_x = 32;
  c.block_y = 4;
  c.merge_x = 4;
  c.vector = 4;
  c.cache["in"] = Cache::ReadOnly;
  const std::string src = naive::emit_variant(t, c);
  EXPECT_NE(src.find("const int gt_x0 = gt_bx + threadIdx.x * 4;"), std::string::npos) << src;
  EXPECT_NE(src.find("const float* gt_p = &in[idy * n + idx];"), std::string::npos) << src;
  EXPECT_NE(src.find("if (gt_ok[gt_q * 4 + 0] && gt_ok[gt_q * 4 + 1] && gt_ok[gt_q * 4 + 2] && "
                     "gt_ok[gt_q * 4 + 3] && reinterpret_cast<unsigned long long>(gt_p) % 16 == "
                     "0) {"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("const float4 gt_v = __ldg(reinterpret_cast<const float4*>(gt_p));"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("if (gt_ok[gt_q * 4 + 3]) gt_r1[gt_q * 4 + 3] = __ldg(gt_p + 3);"),
            std::string::npos)
      << src;
  EXPECT_NE(naive::choice_label(t, c).find("_v4"), std::string::npos);
  // PTX: one 16-byte load per run, against four scalar loads per thread without runs.
  naive::Choice scalar = c;
  scalar.vector = 1;
  const std::string vec = ptx_of(src), sca = ptx_of(naive::emit_variant(t, scalar));
  EXPECT_EQ(count(vec, "ld.global.nc.v4.f32"), 1u) << vec;
  EXPECT_EQ(count(sca, "ld.global.nc.v4.f32"), 0u);
  EXPECT_EQ(count(sca, "ld.global.nc.f32"), 4u);
  // On the plain global path the vector load is a plain dereference; merge 2 gives float2 runs.
  c.cache["in"] = Cache::Global;
  c.merge_x = 2;
  const std::string two = naive::emit_variant(t, c);
  EXPECT_NE(two.find("const float2 gt_v = *reinterpret_cast<const float2*>(gt_p);"),
            std::string::npos)
      << two;
  EXPECT_NE(two.find("gt_x0 = gt_bx + threadIdx.x * 2;"), std::string::npos) << two;
  // mv's a[idx*n+i] is not contiguous along idx and x[i] ignores it: its reads stay scalar
  // (only its store y[idx] goes out per run).
  naive::Choice mvc;
  mvc.block_x = 32;
  mvc.merge_x = 4;
  mvc.vector = 4;
  const std::string mv = naive::emit_variant(analyse("mv"), mvc);
  EXPECT_EQ(mv.find("float* gt_p = &a["), std::string::npos) << mv;
  EXPECT_EQ(mv.find("float* gt_p = &x["), std::string::npos) << mv;
  EXPECT_NE(mv.find("float* gt_p = &y[idx];"), std::string::npos) << mv;
  // conv1d's in[i+k] moves with the loop: a run per step, aligned one step in four.
  naive::Choice cc = mvc;
  EXPECT_NE(naive::emit_variant(analyse("conv1d"), cc).find("const float* gt_p = &in[i + k];"),
            std::string::npos);
  // jacobi's neighbours idx - 1 and idx + 1 take the same runs; their alignment fails at run
  // time and they load element by element (checked on the CPU with the other variants).
  naive::Choice jc;
  jc.block_x = 16;
  jc.block_y = 4;
  jc.merge_x = 4;
  jc.vector = 4;
  const std::string jac = naive::emit_variant(analyse("jacobi"), jc);
  EXPECT_EQ(count(jac, "const float* gt_p = &in["), 5u) << jac;
  // The job offers vector > 1 without tiles only where runs can form.
  Job job = tuner::load_tuning_job(kNaive / "transpose.json");
  Space space = build_space(job);
  size_t runs = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    naive::Choice ch = naive::choice_from_config(*job.naive_kernel, space.config(i));
    if (ch.vector == 1 || !ch.stage_store.empty()) continue;  // staged: vector write-back
    ++runs;
    EXPECT_LE(ch.vector, ch.merge_x) << space.config(i).key();
  }
  EXPECT_GT(runs, 100u);
}

// A plain store at consecutive idx (outer's c[row*n+col] = ...) goes out one float2/float4 per
// run of merged outputs when the whole run passes the bounds check and the address is aligned.
TEST(NaiveMerge, StoresAtConsecutiveIdxGoOutOneVectorPerRun) {
  naive::NaiveKernel k = analyse("outer");
  naive::Choice c;
  c.block_x = 32;
  c.block_y = 4;
  c.merge_x = 4;
  c.vector = 4;
  c.cache["a"] = c.cache["b"] = Cache::ReadOnly;
  const std::string src = naive::emit_variant(k, c);
  EXPECT_NE(src.find("float* gt_p = &c[row * n + col];"), std::string::npos) << src;
  EXPECT_NE(src.find("*reinterpret_cast<float4*>(gt_p) = gt_v;"), std::string::npos) << src;
  EXPECT_NE(src.find("if (gt_ok[gt_q * 4 + 3]) gt_p[3] = "), std::string::npos) << src;
  naive::Choice scalar = c;
  scalar.vector = 1;
  const std::string vec = ptx_of(src), sca = ptx_of(naive::emit_variant(k, scalar));
  EXPECT_EQ(count(vec, "st.global.v4."), 1u) << vec;
  EXPECT_EQ(count(sca, "st.global.v4.f32"), 0u);
  EXPECT_EQ(count(sca, "st.global.f32"), 4u);
  // Staged stores (transpose's write tile) and stores strided along idx are not run stores.
  naive::Choice t;
  t.block_x = 16;
  t.block_y = 4;
  t.merge_x = 4;
  t.vector = 4;
  t.cache["in"] = Cache::ReadOnly;
  EXPECT_EQ(naive::emit_variant(analyse("transpose"), t).find("float* gt_p = &out"),
            std::string::npos);
  // A staged store goes out from its tile (StagedStoresGoBackOneVectorPerThread), not in runs
  // of registers gt_w<site>.
  t.stage_store = {"out"};
  const std::string staged = naive::emit_variant(analyse("transpose"), t);
  EXPECT_FALSE(std::regex_search(staged, std::regex("gt_w[0-9]"))) << staged;
  EXPECT_NE(staged.find("gt_w_out[gt_t0][gt_t1]"), std::string::npos) << staged;
}

// cache_<array> = registers: an array every access of which is one element per output (mm_acc's
// c[idy*n+idx] += ... inside the loop) is loaded once per output before the work, kept in a
// register through the loop and, when written, stored once after it. The compiler cannot do this
// itself: c may alias a or b, so every iteration loads and stores c.
TEST(NaiveRegisters, AnOutputTheLoopUpdatesStaysInARegister) {
  naive::NaiveKernel k = analyse("mm_acc");
  EXPECT_EQ(allowed(k, "c"), (std::vector<Cache>{Cache::Global, Cache::Registers}));
  EXPECT_EQ(allowed(k, "a"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  for (const auto& a : naive::array_options(k))
    if (a.array == "a") {
      ASSERT_FALSE(a.reasons.empty());
      EXPECT_NE(a.reasons.back().find("not kept in registers: line 9: the subscript changes with a "
                                      "loop"),
                std::string::npos)
          << a.reasons.back();
    }
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 8;
  c.merge_x = 2;
  c.merge_y = 2;
  c.cache["c"] = Cache::Registers;
  const std::string src = naive::emit_variant(k, c);
  EXPECT_NE(src.find("float gt_reg_c[2][2] = {};"), std::string::npos) << src;
  EXPECT_NE(src.find("if (gt_ok[gt_my][gt_mx]) gt_reg_c[gt_my][gt_mx] = c[idy * n + idx];"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("gt_reg_c[gt_my][gt_mx] += gt_r1[gt_my] * gt_r2[gt_mx];"), std::string::npos)
      << src;
  EXPECT_NE(src.find("if (gt_ok[gt_my][gt_mx]) c[idy * n + idx] = gt_reg_c[gt_my][gt_mx];"),
            std::string::npos)
      << src;
  const size_t body = src.find("__global__");
  EXPECT_EQ(count(src.substr(body), "c[idy * n + idx]"), 3u)
      << "the register's comment, one load, one store:\n"
      << src;
  EXPECT_NE(naive::choice_label(k, c).find("_c-registers"), std::string::npos);
  // PTX, loop unrolled by 4: four stores (one per merged output) after the loop, against four
  // in each unrolled step (and the remainder's).
  c.unroll = 4;
  naive::Choice direct = c;
  direct.cache.clear();
  EXPECT_EQ(count(ptx_of(naive::emit_variant(k, c)), "st.global"), 4u);
  EXPECT_GE(count(ptx_of(naive::emit_variant(k, direct)), "st.global"), 16u);
  // Where the pattern does not allow it, with the reason.
  auto refusal = [](const std::string& body) {
    const std::string src =
        "__global__ void k(float* c, const float* a, int n) {\n"
        "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  int idy = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  if (idx < n && idy < n) {\n" +
        body + "\n  }\n}\n";
    naive::NaiveKernel r = naive::analyse_naive(src, "k", "k.cu");
    for (const auto& a : naive::array_options(r))
      if (a.array == "c")
        for (const std::string& why : a.reasons)
          if (why.rfind("not kept in registers: ", 0) == 0) return why.substr(23);
    return std::string("offered");
  };
  EXPECT_NE(refusal("for (int k = 0; k < n; k++) c[idx] += a[idy * n + k];").find("ignores idy"),
            std::string::npos);
  EXPECT_NE(refusal("for (int k = 0; k < n; k++) if (a[k] > 0) c[idy * n + idx] += a[k];")
                .find("under a condition"),
            std::string::npos);
  EXPECT_NE(refusal("for (int k = 0; k < n; k++) c[idy * n + idx] += c[idy * n + idx + 1];")
                .find("another element than line"),
            std::string::npos);
  EXPECT_NE(refusal("c[idy * n + idx] += a[idx];").find("no access inside a loop"),
            std::string::npos);
  EXPECT_EQ(refusal("c[idy * n + idx] = 0;\n for (int k = 0; k < n; k++) c[n * idy + idx] += "
                    "a[idy * n + k];"),
            "offered")
      << "the same element, written differently";
  EXPECT_NE(allowed(analyse("jacobi"), "in").back(), Cache::Registers);
  EXPECT_NE(allowed(analyse("mv"), "x").back(), Cache::Registers);
}

// A read-only array read at one element per output inside a loop (w[idx]) is loaded once, on the
// read-only path, before the loop, also in split and merged variants; checked on the CPU.
TEST(NaiveRegisters, ALoopInvariantReadIsLoadedOncePerOutput) {
  fs::path dir = fs::path(GPUTUNE_TEST_STATE_DIR) / "naive-registers";
  fs::create_directories(dir);
  std::ofstream(dir / "wtmv.cu") << R"(
__global__ void wtmv(float* y, const float* a, const float* x, const float* w, int m, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < m) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i * m + idx] * x[i] * w[idx];
    y[idx] = sum;
  }
}
)";
  std::ofstream(dir / "job.json") << R"({
  "KernelSpecification": {"Language": "CUDA", "KernelName": "wtmv", "KernelFile": "wtmv.cu",
    "GlobalSize": {"X": "ProblemSize[0]", "Y": "1", "Z": "1"}, "GlobalSizeType": "OpenCL",
    "Arguments": [
      {"Name": "y", "Type": "float", "MemoryType": "Vector", "AccessType": "WriteOnly", "Size": "ProblemSize[0]", "FillType": "Constant", "FillValue": 0.0, "Output": 1},
      {"Name": "a", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]*ProblemSize[1]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "x", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[1]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "w", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "m", "Type": "int32", "MemoryType": "Scalar", "FillType": "Constant", "FillValue": "ProblemSize[0]"},
      {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillType": "Constant", "FillValue": "ProblemSize[1]"}]},
  "GPUTune": {"Naive": true, "Contexts": [{"Name": "t", "ProblemSize": [37, 29]}],
    "Verification": {"AbsoluteTolerance": 1e-4, "RelativeTolerance": 1e-4}}
})";
  Job job = tuner::load_tuning_job(dir / "job.json");
  ASSERT_TRUE(job.naive_kernel) << job.naive_fallback;
  const naive::NaiveKernel& k = *job.naive_kernel;
  ASSERT_EQ(allowed(k, "w").back(), Cache::Registers);
  naive::Choice c;
  c.block_x = 32;
  c.merge_x = 2;
  c.cache["w"] = Cache::Registers;
  const std::string src = naive::emit_variant(k, c);
  EXPECT_NE(src.find("float gt_reg_w[2] = {};"), std::string::npos) << src;
  EXPECT_NE(src.find("if (gt_ok[gt_mx]) gt_reg_w[gt_mx] = __ldg(&w[idx]);"), std::string::npos)
      << src;
  EXPECT_NE(src.find("const float* __restrict__ w"), std::string::npos) << src;
  EXPECT_EQ(count(src, "w[idx]"), 2u) << "the register's comment and its one load:\n" << src;
  std::vector<naive::Choice> variants;
  for (int split : {1, 4, 32})
    for (int merge : {1, 2})
      for (Cache wc : {Cache::Global, Cache::Registers}) {
        naive::Choice v = c;
        v.split = split;
        v.merge_x = merge;
        v.cache["w"] = wc;
        variants.push_back(v);
      }
  ContextSpec ctx;
  ctx.name = "test";
  ctx.problem_size = {Value(37), Value(29)};
  std::vector<std::string> bad =
      tuner::check_on_cpu(job, load_kernel_source(job), k, variants, ctx, 2, nullptr);
  EXPECT_TRUE(bad.empty()) << bad.size() << " differ, first: " << bad.front();
}

// With a vector width, tiles are read with vector loads in the work too, not only staged with
// them. The merged outputs along x come in runs of consecutive elements, so a read of an x-fast
// tile (mm's b[k*n+idx]) is one float2/float4 shared load per run instead of one scalar load per
// output; a read of a loop-fast tile (mm's a[idy*n+k]) is one vector load per `vector` steps of
// the loop. Without an x-fast tile the outputs stay strided by the block (coalesced).
// Transposed staging (Choice::transpose): a's tile, read along k by idy, is stored [k][idy] and
// the merged rows come in runs of `vector` consecutive idy, so one step of k reads a run's rows
// with one float4 from the tile, as the parametric sgemm reads its transposed A panel. The
// global reads stay coalesced along k (4 element copies per float4 of a row); the registers
// per step are one per merged row, not `vector` steps' worth: double-buffered 16x16 blocks of
// 8x8 outputs fit 128 registers without spilling (bench/results/naive-transposed-vm-2026-12-03.md).
TEST(NaiveMerge, ATransposedTileGivesARunOfRowsOneVectorLoadPerStep) {
  naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16, c.block_y = 16, c.merge_x = 8, c.merge_y = 8, c.unroll = 4, c.tile_k = 16;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  c.vector = 4, c.pad = true, c.transpose = true;
  const std::string src = naive::emit_variant(mm, c);
  EXPECT_NE(src.find("const int gt_y0 = gt_by + threadIdx.y * 4;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int idy = gt_y0 + gt_my / 4 * 64 + gt_my % 4;"), std::string::npos)
      << src;
  // [k][idy], the pitch padded by the vector width (rows stay 16-byte aligned).
  EXPECT_NE(src.find("__shared__ __align__(16) float gt_s_a[16][132];"), std::string::npos) << src;
  EXPECT_NE(src.find("const float4 gt_v = *reinterpret_cast<const float4*>(&gt_s_a[k - "
                     "gt_k_base][idy - gt_by]);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("sum[gt_my][gt_mx] += gt_r0[gt_my] * gt_r1[gt_mx];"), std::string::npos)
      << src;
  EXPECT_EQ(src.find("gt_l0"), std::string::npos) << "no steps of k held per row\n" << src;
  // Staged from rows of a along k (a float4 where aligned), element by element into the tile.
  EXPECT_NE(src.find("gt_s_a[gt_t1 + 3][gt_t0] = gt_v.w;"), std::string::npos) << src;
  EXPECT_EQ(naive::shared_bytes(mm, c), (16 * 132 + 16 * 128) * 4);
  EXPECT_NE(naive::choice_label(mm, c).find("_tr"), std::string::npos);
  // Same FMAs; per step 2 float4 reads of a (8 rows) where untransposed a float4 holds 4 steps
  // of one row: fewer registers, not fewer loads.
  naive::Choice plain = c;
  plain.transpose = false;
  const std::string tr = ptx_of(src), un = ptx_of(naive::emit_variant(mm, plain));
  EXPECT_EQ(count(tr, "fma.rn.f32"), count(un, "fma.rn.f32"));
  EXPECT_GE(count(tr, "ld.shared.v4.f32"), 16u) << tr;
  // Pipelined, the transposed tile is copied element by element with cp.async (4 bytes each).
  naive::Choice st = c;
  st.stages = 2;
  const std::string src2 = naive::emit_variant(mm, st);
  EXPECT_NE(
      src2.find("gt_cp_async(&gt_s_a[(gt_stage0 + 1) % 2][gt_t1 + 3][gt_t0], gt_p + 3, true);"),
      std::string::npos)
      << src2;
  // merge_y 2 with vector 4: runs of 2 rows, float2 reads.
  naive::Choice two = c;
  two.merge_y = 2;
  EXPECT_NE(naive::emit_variant(mm, two).find("*reinterpret_cast<const float2*>(&gt_s_a[k"),
            std::string::npos);
  // Without a vector width or merged rows there is nothing to gain: the tile stays as it is.
  naive::Choice one = c;
  one.vector = 1;
  EXPECT_NE(naive::emit_variant(mm, one).find("float gt_s_a[128][17];"), std::string::npos)
      << naive::emit_variant(mm, one);

  // Every variant agrees with the naive kernel at odd and aligned sizes: runs, pads, stages,
  // vector 2 and 4, merged rows 2 to 8, partial tiles.
  Job job = tuner::load_tuning_job(kNaive / "mm.json");
  std::vector<naive::Choice> variants;
  for (int merge_y : {2, 4, 8})
    for (int vector : {2, 4})
      for (int stages : {1, 2, 3})
        for (bool pad : {false, true}) {
          naive::Choice v = c;
          v.block_x = 8, v.block_y = 4, v.merge_x = 4, v.merge_y = merge_y, v.tile_k = 8;
          v.vector = vector, v.stages = stages, v.pad = pad;
          variants.push_back(v);
        }
  for (const std::vector<std::int64_t>& size :
       {std::vector<std::int64_t>{37}, std::vector<std::int64_t>{36}}) {
    ContextSpec ctx;
    ctx.name = "test";
    for (std::int64_t d : size) ctx.problem_size.push_back(Value(d));
    std::vector<std::string> bad =
        tuner::check_on_cpu(job, load_kernel_source(job), mm, variants, ctx, 2, nullptr);
    EXPECT_TRUE(bad.empty()) << bad.size() << " differ, first: " << bad.front();
  }
}

// Warps arranged over the block (Choice::warp_x): a thread's place follows from its lane and
// warp, so that a warp covers warp_x x (32 / warp_x) threads. With 16 x 16 threads each warp
// launched is 16 x 2: its float4 reads of b's tile row are 16 distinct addresses (256 bytes, two
// shared-memory wavefronts); as 8 x 4 they are 8 (one), and a's transposed column reads 4.
// syrk (C = A A^T) reads a along k by both indices: a[i * m + k] (idy) and a[j * m + k] (idx).
// Both tiles may be stored transposed, [k][i] read by runs of rows and [k][j] by runs along j.
TEST(NaiveMerge, BothTilesOfASyrkAreStoredTransposedForTheirRuns) {
  const fs::path file = fs::path(GPUTUNE_SOURCE_DIR) / "tests" / "data" / "naive" / "syrk.cu";
  naive::NaiveKernel k = naive::analyse_naive(read(file), "syrk", "syrk.cu");
  naive::Choice c;
  c.block_x = 16, c.block_y = 16, c.merge_x = 4, c.merge_y = 4, c.unroll = 4, c.tile_k = 16;
  c.cache = {{"a", Cache::Shared}};
  c.vector = 4, c.transpose = true;
  const std::string src = naive::emit_variant(k, c);
  EXPECT_NE(
      src.find("float gt_s_a[16][64];  // a[i * m + k] for i x k, stored transposed ([k][i])"),
      std::string::npos)
      << src;
  EXPECT_NE(
      src.find("float gt_s_a1[16][64];  // a[j * m + k] for j x k, stored transposed ([k][j])"),
      std::string::npos)
      << src;
  EXPECT_NE(src.find("*reinterpret_cast<const float4*>(&gt_s_a[k - gt_k_base][i - gt_by]);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("*reinterpret_cast<const float4*>(&gt_s_a1[k - gt_k_base][j - gt_bx]);"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("gt_l"), std::string::npos) << "no steps of k held per row or column\n" << src;
  // Merged along x only: the [k][j] tile alone is transposed (no runs of rows to serve).
  naive::Choice x = c;
  x.merge_y = 1;
  const std::string sx = naive::emit_variant(k, x);
  EXPECT_NE(sx.find("stored transposed ([k][j])"), std::string::npos) << sx;
  EXPECT_EQ(sx.find("stored transposed ([k][i])"), std::string::npos) << sx;
}

TEST(NaiveMerge, WarpsArrangedOverTheBlockPlaceEachThreadByItsLaneAndWarp) {
  naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16, c.block_y = 16, c.merge_x = 8, c.merge_y = 8, c.unroll = 4, c.tile_k = 16;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  c.vector = 4, c.pad = true, c.transpose = true, c.warp_x = 8;
  const std::string src = naive::emit_variant(mm, c);
  EXPECT_NE(src.find("const int gt_tx = gt_wi % 2 * 8 + gt_wl % 8;  // warps of 8 x 4 threads"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("const int gt_ty = gt_wi / 2 * 4 + gt_wl / 8;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_x0 = gt_bx + gt_tx * 4;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_y0 = gt_by + gt_ty * 4;"), std::string::npos) << src;
  EXPECT_NE(naive::choice_label(mm, c).find("_w8x4"), std::string::npos);
  // Cooperative staging stays by the launched thread index (coalesced global loads).
  EXPECT_NE(src.find("for (int gt_e = gt_tid; gt_e <"), std::string::npos) << src;
  naive::Choice bad = c;
  bad.block_x = 4;  // warps of 8 threads along x do not tile 4 x 16
  EXPECT_THROW(naive::emit_variant(mm, bad), naive::NaiveError);

  // Any arrangement computes the same: every warp shape, with and without runs or transposing.
  Job job = tuner::load_tuning_job(kNaive / "mm.json");
  std::vector<naive::Choice> variants;
  for (int warp_x : {4, 8, 16})
    for (bool transpose : {false, true})
      for (int vector : {1, 4}) {
        naive::Choice v = c;
        v.block_x = 16, v.block_y = 8, v.merge_x = 4, v.merge_y = 4, v.tile_k = 8;
        v.warp_x = warp_x, v.transpose = transpose && vector > 1, v.vector = vector;
        variants.push_back(v);
      }
  ContextSpec ctx;
  ctx.name = "test";
  ctx.problem_size = {Value(37)};
  std::vector<std::string> wrong =
      tuner::check_on_cpu(job, load_kernel_source(job), mm, variants, ctx, 2, nullptr);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differ, first: " << wrong.front();
}

TEST(NaiveMerge, VectorWidthReadsTilesWithVectorLoadsInTheWork) {
  naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 8;
  c.merge_x = 8;
  c.merge_y = 4;
  c.unroll = 4;
  c.tile_k = 8;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  naive::Choice scalar = c;
  c.vector = 4;
  const std::string src = naive::emit_variant(mm, c);
  EXPECT_NE(src.find("const int gt_x0 = gt_bx + threadIdx.x * 4;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int idx = gt_x0 + gt_mx / 4 * 64 + gt_mx % 4;"), std::string::npos)
      << src;
  EXPECT_NE(src.find("__shared__ __align__(16) float gt_s_b1[8][128];"), std::string::npos) << src;
  EXPECT_NE(src.find("const float4 gt_v = *reinterpret_cast<const float4*>(&gt_s_b1[k - "
                     "gt_k_base][idx - gt_bx]);"),
            std::string::npos)
      << src;
  // a: 4 steps of k per float4, for each merged row.
  EXPECT_NE(src.find("__shared__ __align__(16) float gt_s_a[32][8];"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int gt_kk = 0; gt_kk < 8; gt_kk += 4) {"), std::string::npos) << src;
  EXPECT_NE(src.find("const float4 gt_v = *reinterpret_cast<const float4*>(&gt_s_a[idy - "
                     "gt_by][k - gt_k_base]);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("sum[gt_my][gt_mx] += gt_l0[gt_my][gt_kv] * gt_r1[gt_mx];"), std::string::npos)
      << src;
  // PTX, same FMAs (4 steps of k unrolled in both, strip and remainder): per step of a full
  // strip, 2 float4 loads of b and 4/4 float4 loads of a instead of 8 + 4 scalar loads.
  const std::string vec = ptx_of(src), sca = ptx_of(naive::emit_variant(mm, scalar));
  EXPECT_EQ(count(vec, "fma.rn.f32"), count(sca, "fma.rn.f32"));
  EXPECT_GE(count(vec, "ld.shared.v4."), 4u * 2 + 4) << vec;
  EXPECT_EQ(count(sca, "ld.shared.v4.f32"), 0u);
  EXPECT_LT(2 * count(vec, "ld.shared"), count(sca, "ld.shared"));
  // A run is never longer than the merge: merge_x 2 with vector 4 reads float2.
  naive::Choice two = c;
  two.merge_x = 2;
  const std::string src2 = naive::emit_variant(mm, two);
  EXPECT_NE(src2.find("*reinterpret_cast<const float2*>(&gt_s_b1"), std::string::npos) << src2;
  EXPECT_NE(ptx_of(src2).find("ld.shared.v2.f32"), std::string::npos);
  // b not in a tile: its runs come straight from global memory (one float4 __ldg per run where
  // aligned); a still reads 4 steps per load.
  naive::Choice ro = c;
  ro.cache["b"] = Cache::ReadOnly;
  const std::string src3 = naive::emit_variant(mm, ro);
  EXPECT_NE(src3.find("const int gt_x0 = gt_bx + threadIdx.x * 4;"), std::string::npos) << src3;
  EXPECT_NE(src3.find("const float* gt_p = &b[k * n + idx];"), std::string::npos) << src3;
  EXPECT_NE(src3.find("*reinterpret_cast<const float4*>(&gt_s_a"), std::string::npos) << src3;
  // A pad adds the vector width to a's pitch, so its rows stay aligned for the float4 reads;
  // without a vector width it adds one element. b (x-fast, never padded) keeps its runs.
  naive::Choice pad = c;
  pad.pad = true;
  const std::string src4 = naive::emit_variant(mm, pad);
  EXPECT_NE(src4.find("__shared__ __align__(16) float gt_s_a[32][12];"), std::string::npos) << src4;
  EXPECT_NE(src4.find("reinterpret_cast<const float4*>(&gt_s_a"), std::string::npos) << src4;
  EXPECT_NE(src4.find("reinterpret_cast<const float4*>(&gt_s_b1"), std::string::npos) << src4;
  EXPECT_EQ(naive::shared_bytes(mm, pad), (32 * 12 + 8 * 128) * 4);
  naive::Choice pad1 = scalar;
  pad1.pad = true;
  EXPECT_NE(naive::emit_variant(mm, pad1).find("__shared__ float gt_s_a[32][9];"),
            std::string::npos);
}

// --- halo windows ----------------------------------------------------------------------------

naive::Choice halo_choice(int bx, int by, const std::string& array) {
  naive::Choice c;
  c.block_x = bx;
  c.block_y = by;
  c.cache[array] = Cache::Shared;
  return c;
}

TEST(NaiveHalo, ConvolutionAndStencilReadThroughOneWindowSizedAtLaunch) {
  naive::NaiveKernel conv = analyse("conv2d");
  EXPECT_EQ(allowed(conv, "in").back(), Cache::Shared);
  auto windows = naive::halo_windows(conv);
  ASSERT_EQ(windows.size(), 1u);  // filt is a plain tile: it does not move with idx
  EXPECT_EQ(windows[0], "in: 1 read(s), offsets up to 0 x 0, loop fx along idx, loop fy along idy");
  naive::Choice c = halo_choice(16, 4, "in");
  std::string src = naive::emit_variant(conv, c);
  EXPECT_NE(src.find("extern __shared__ float gt_halo[];"), std::string::npos) << src;
  EXPECT_EQ(count(src, "__ldg(&in["), 1u) << "every read of in comes from the window:\n" << src;
  EXPECT_NE(src.find("gt_halo[gt_ho_in + (idy - gt_by + fy) * gt_hp_in + idx - gt_bx + fx]"),
            std::string::npos)
      << src;
  // (block rows + fw - 1) x (block columns + fw - 1 [+ pad]) floats, from the scalar fw.
  const std::map<std::string, double> fw3{{"w", 100}, {"h", 50}, {"fw", 3}};
  EXPECT_EQ(naive::dynamic_shared_bytes(conv, c, fw3), (4 + 2) * (16 + 2) * 4);
  EXPECT_EQ(naive::dynamic_shared_bytes(conv, c, {{"fw", 17}}), (4 + 16) * (16 + 16) * 4);
  c.pad = true;
  EXPECT_EQ(naive::dynamic_shared_bytes(conv, c, fw3), (4 + 2) * (16 + 2 + 1) * 4);
  c.merge_x = 2;
  c.merge_y = 4;
  EXPECT_EQ(naive::dynamic_shared_bytes(conv, c, fw3), (16 + 2) * (32 + 2 + 1) * 4);
  EXPECT_THROW(naive::dynamic_shared_bytes(conv, c, {{"w", 1}}), naive::NaiveError)
      << "fw sizes the window: without it there is no size";
  EXPECT_EQ(naive::dynamic_shared_bytes(conv, naive::Choice{}, fw3), 0);
  EXPECT_EQ(naive::shared_bytes(conv, halo_choice(16, 4, "in")), 0) << "no static shared memory";

  // Jacobi: five reads at constant offsets, a window one element wider on each side.
  naive::NaiveKernel jac = analyse("jacobi");
  windows = naive::halo_windows(jac);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0], "in: 5 read(s), offsets up to 2 x 2");
  naive::Choice j = halo_choice(32, 8, "in");
  EXPECT_EQ(naive::dynamic_shared_bytes(jac, j, {{"n", 4096}}), (8 + 2) * (32 + 2) * 4);
  src = naive::emit_variant(jac, j);
  EXPECT_EQ(count(src, "__ldg(&in["), 1u) << src;
  // The bounds check's intervals clip the window: idx > 0 and idx < n - 1.
  EXPECT_NE(src.find("gt_vx0 = max(gt_vx0, (0) + 1);"), std::string::npos) << src;
  EXPECT_NE(src.find("gt_vx1 = min(gt_vx1, (n - 1) - 1);"), std::string::npos) << src;

  // NVRTC compiles both for Hopper; the windows are not in the cubin's static shared memory.
  std::vector<Variant> vs(2);
  vs[0].kernel_name = "conv2d";
  vs[0].source = naive::emit_variant(conv, c);
  vs[1].kernel_name = "jacobi";
  vs[1].source = src;
  auto compiled = cuda::compile_all(vs, "sm_90", cuda::CubinCache(""), 2);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(compiled[i].ok) << compiled[i].log << "\n" << vs[i].source;
    auto res = pruner::read_cubin_resources(compiled[i].cubin, compiled[i].lowered_name);
    EXPECT_EQ(res.static_smem, 0) << vs[i].kernel_name;
  }
}

TEST(NaiveHalo, OtherReadPatternsAreRefusedWithTheReason) {
  auto reasons = [](const std::string& src, const std::string& name) {
    naive::NaiveKernel k = naive::analyse_naive(src, name, name + ".cu");
    std::string all;
    for (const auto& a : naive::array_options(k))
      if (a.array == "in") {
        EXPECT_EQ(a.allowed.back(), Cache::ReadOnly) << src;
        for (const auto& r : a.reasons) all += r + "\n";
      }
    EXPECT_TRUE(naive::halo_windows(k).empty()) << src;
    return all;
  };
  EXPECT_NE(reasons(R"(
__global__ void odd(float* out, const float* in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx % 2 == 0 && idy < n) out[idy * n + idx] = in[idy * n + idx] + in[idy * n + idx + 1];
})",
                    "odd")
                .find("is not an interval on one index"),
            std::string::npos);
  EXPECT_NE(reasons(R"(
__global__ void dilated(float* out, const float* in, int w, int h, int fw) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < w && idy < h) {
    float s = 0;
    for (int f = 0; f < fw; ++f) s += in[(idy + 2 * f) * w + idx];
    out[idy * w + idx] = s;
  }
})",
                    "dilated")
                .find("loop counter f advances the subscript by neither"),
            std::string::npos);
  EXPECT_NE(reasons(R"(
__global__ void copy2(float* out, const float* in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int idy = blockIdx.y * blockDim.y + threadIdx.y;
  if (idx < n && idy < n) out[idy * n + idx] = 2.0f * in[idy * n + idx];
})",
                    "copy2")
                .find("read once per thread: no reuse to stage"),
            std::string::npos);
  EXPECT_NE(reasons(R"(
__global__ void tri(float* out, const float* in, int n, int fw) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) {
    float s = 0;
    for (int f = 0; f < fw / 2; ++f) s += in[idx + f];
    out[idx] = s;
  }
})",
                    "tri")
                .find("bounds that are not +, -, * of (unassigned) scalar arguments"),
            std::string::npos);
  EXPECT_NE(reasons(R"(
__global__ void shrink(float* out, const float* in, int n, int fw) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) {
    fw = fw - 1;  // the window would be sized from fw before this
    float s = 0;
    for (int f = 0; f < fw; ++f) s += in[idx + f];
    out[idx] = s;
  }
})",
                    "shrink")
                .find("bounds that are not +, -, * of (unassigned) scalar arguments"),
            std::string::npos);
}

TEST(NaiveHalo, TheJobLaunchesWindowsWithTheBytesTheVariantNeeds) {
  Job job = tuner::load_tuning_job(kNaive / "conv2d.json");
  ASSERT_TRUE(job.naive_kernel);
  ContextSpec ctx;
  ctx.name = "64x32 f5";
  for (std::int64_t v : {64, 32, 5}) ctx.problem_size.emplace_back(v);
  Space space = build_space(job);
  size_t windows = 0, plain = 0;
  for (size_t i = 0; i < space.size() && (windows < 20 || plain < 20); i += 97) {
    Config cfg = space.config(i);
    naive::Choice ch = naive::choice_from_config(*job.naive_kernel, cfg);
    LaunchGeometry g = launch_geometry(job, cfg, ctx);
    const long long tx = ch.block_x * ch.merge_x, ty = ch.block_y * ch.merge_y;
    if (cfg["cache_in"].as_str() == "shared") {
      ++windows;
      EXPECT_EQ(g.dynamic_smem, (ty + 4) * (tx + 4 + (ch.pad ? 1 : 0)) * 4) << cfg.key();
    } else {
      ++plain;
      EXPECT_EQ(g.dynamic_smem, 0) << cfg.key();
    }
  }
  EXPECT_GT(windows, 0u);
  EXPECT_GT(plain, 0u);
}

const naive::OutputOptions* output(const std::vector<naive::OutputOptions>& all,
                                   const std::string& array) {
  for (const auto& o : all)
    if (o.array == array) return &o;
  return nullptr;
}

TEST(NaiveAnalysis, StagesTheTransposeStoresAndNotTheCoalescedOnes) {
  // transpose writes out[idx*m+idy]: consecutive idx are m apart, consecutive idy adjacent, so a
  // tile [idx][idy] written back along idy coalesces the stores.
  naive::NaiveKernel t = analyse("transpose");
  auto to = naive::output_options(t);
  ASSERT_NE(output(to, "out"), nullptr);
  EXPECT_TRUE(output(to, "out")->stage);
  EXPECT_FALSE(output(to, "out")->reduce);
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 8;
  c.merge_y = 4;
  c.pad = true;
  c.stage_store = {"out"};
  std::string src = naive::emit_variant(t, c);
  EXPECT_NE(src.find("__shared__ float gt_w_out[16][33]"), std::string::npos) << src;
  EXPECT_NE(src.find("out[idx * m + idy] = gt_w_out[gt_t0][gt_t1]"), std::string::npos) << src;
  EXPECT_EQ(naive::shared_bytes(t, c), 16 * 33 * 4);
  // mm writes c[idy*n+idx]: already coalesced, so there is nothing to stage, and it says why.
  auto mo = naive::output_options(analyse("mm"));
  ASSERT_NE(output(mo, "c"), nullptr);
  EXPECT_FALSE(output(mo, "c")->stage);
  ASSERT_FALSE(output(mo, "c")->reasons.empty());
  EXPECT_NE(output(mo, "c")->reasons[0].find("coalesced already"), std::string::npos);
}

TEST(NaiveAnalysis, SumsAtomicAddsPerBlockBeforeOneAtomicPerBlock) {
  naive::NaiveKernel r = analyse("reduction");
  auto ro = naive::output_options(r);
  ASSERT_NE(output(ro, "sum"), nullptr);
  EXPECT_TRUE(output(ro, "sum")->reduce);
  EXPECT_TRUE(r.params[0].written) << "the sum is an output the checks compare";
  naive::Choice c;
  c.block_x = 96;  // three warps
  c.merge_x = 2;
  c.block_reduce = {"sum"};
  std::string src = naive::emit_variant(r, c);
  size_t first = src.find("atomicAdd(", src.find("__global__"));  // past the header comment
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(src.find("atomicAdd(", first + 1), std::string::npos) << "one atomic per block:\n"
                                                                  << src;
  EXPECT_NE(src.find("if (gt_tid == 0) atomicAdd(sum, gt_v_sum);"), std::string::npos) << src;
  EXPECT_NE(src.find("gt_acc_sum += in[idx];"), std::string::npos) << src;
  // Each warp sums by shuffles, lane 0 leaves it in shared memory, every warp sums the 3 again.
  EXPECT_EQ(count(src, "gt_v_sum += __shfl_xor_sync(0xffffffffu, gt_v_sum, gt_o);"), 2u) << src;
  EXPECT_NE(src.find("__shared__ float gt_red_sum[3];"), std::string::npos) << src;
  EXPECT_NE(src.find("gt_v_sum = gt_tid % 32 < 3 ? gt_red_sum[gt_tid % 32] : float(0);"),
            std::string::npos)
      << src;
  EXPECT_EQ(naive::shared_bytes(r, c), 3 * 4);
  // And it adds up on the CPU, for 1, 3 and 32 warps, at a size no block divides.
  Job job = load_job(kNaive / "reduction.json");
  naive::apply_to_job(job, r);
  ContextSpec ctx;
  ctx.name = "test";
  ctx.problem_size = {Value(100003)};
  std::vector<naive::Choice> sizes;
  for (int bx : {32, 96, 1024}) {
    naive::Choice v = c;
    v.block_x = bx;
    sizes.push_back(v);
  }
  std::vector<std::string> bad =
      tuner::check_on_cpu(job, load_kernel_source(job), r, sizes, ctx, 2, nullptr);
  EXPECT_TRUE(bad.empty()) << bad.front();
  // Without the choice the kernel keeps its atomics.
  c.block_reduce.clear();
  EXPECT_NE(naive::emit_variant(r, c).find("atomicAdd(sum, in[idx]);"), std::string::npos);
}

TEST(NaiveAnalysis, TwoDimensionalArraysAreAccessesAtTheirLinearIndex) {
  naive::NaiveKernel k = analyse("mm2d");
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[1].row, 64);
  EXPECT_EQ(k.params[1].element, "float");
  // a[idy][k]: k is contiguous (coefficient 1), idy strides a row; b[k][idx]: idx contiguous.
  for (const auto& s : k.accesses) {
    if (k.params[s.param].name == "a") {
      EXPECT_EQ(s.unit.at("y"), 64);
      EXPECT_EQ(s.unit.at("loop:0"), 1);
    }
    if (k.params[s.param].name == "b") {
      EXPECT_EQ(s.unit.at("loop:0"), 64);
      EXPECT_EQ(s.unit.at("x"), 1);
    }
  }
  EXPECT_EQ(allowed(k, "a").back(), Cache::Shared);
  EXPECT_EQ(allowed(k, "b").back(), Cache::Shared);
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 4;
  c.cache = {{"a", Cache::ReadOnly}};
  std::string src = naive::emit_variant(k, c);
  EXPECT_NE(src.find("const float (*__restrict__ a)[64]"), std::string::npos) << src;
  EXPECT_NE(src.find("__ldg(&a[idy][k]) * b[k][idx]"), std::string::npos) << src;
  EXPECT_NE(src.find("c[idy][idx] = sum;"), std::string::npos) << src;
  // A row on its own, and a 3-D array, are refused with the reason.
  const std::string row = R"(
__global__ void k(float (*out)[8], int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  float* r = out[idx];
  r[0] = 1.0f;
}
)";
  try {
    naive::analyse_naive(row, "k", "row.cu");
    FAIL() << "a row used as a pointer must be refused";
  } catch (const naive::NaiveError& e) {
    EXPECT_NE(std::string(e.what()).find("index it as out[i][j]"), std::string::npos) << e.what();
  }
  const std::string cube = R"(
__global__ void k(float (*out)[8][8], int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  out[idx][0][0] = 1.0f;
}
)";
  EXPECT_THROW(naive::analyse_naive(cube, "k", "cube.cu"), naive::NaiveError);
}

TEST(NaiveAnalysis, NamesTheConstructOutsideTheSubset) {
  const std::string direct = R"(
__global__ void k(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * threadIdx.x;
}
)";
  try {
    naive::analyse_naive(direct, "k", "direct.cu");
    FAIL() << "threadIdx used directly must be refused";
  } catch (const naive::NaiveError& e) {
    EXPECT_NE(std::string(e.what()).find("direct.cu:4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("threadIdx.x"), std::string::npos) << e.what();
  }
  const std::string sync = R"(
__global__ void k(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __syncthreads();
  out[i] = 1.0f;
}
)";
  EXPECT_THROW(naive::analyse_naive(sync, "k", "sync.cu"), naive::NaiveError);
  try {
    naive::analyse_naive(sync, "nope", "sync.cu");
    FAIL();
  } catch (const naive::NaiveError& e) {
    EXPECT_NE(std::string(e.what()).find("the file has: k"), std::string::npos) << e.what();
  }
}

// The analysis is built without RTTI (LLVM 14 is), yet what it throws must be an ordinary
// exception: typeid works on it (gtest's EXPECT_NO_THROW reads it; a vtable from code built
// without RTTI has none and crashes it).
TEST(NaiveAnalysis, ItsErrorsCarryTheirTypeInformation) {
  try {
    naive::analyse_naive("__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }", "nope", "k.cu");
    FAIL() << "no kernel named nope";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(typeid(e).name()), typeid(naive::NaiveSourceError).name());
  }
  try {
    naive::analyse_naive("__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }", "k", "k.cu");
    FAIL() << "threadIdx used directly must be refused";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(typeid(e).name()), typeid(naive::NaiveError).name());
  }
}

// clang's builtin headers (its stddef.h, the CUDA wrappers) live in its resource directory, found
// at configure time; $GPUTUNE_CLANG_RESOURCE_DIR names another (the GPU kit carries a copy).
TEST(NaiveAnalysis, ClangsResourceDirectoryCanBeMoved) {
  const std::string src = R"(#include <gputune_probe.h>
__global__ void k(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + GPUTUNE_PROBE;
}
)";
  auto error_of = [&] {
    try {
      naive::analyse_naive(src, "k", "k.cu");
      return std::string();
    } catch (const naive::NaiveError& e) {
      return std::string(e.what());
    }
  };
  fs::path dir = fs::path(GPUTUNE_TEST_STATE_DIR) / "moved-resource-dir";
  fs::create_directories(dir / "include");
  std::ofstream(dir / "include" / "gputune_probe.h") << "#define GPUTUNE_PROBE 7\n";
  ASSERT_TRUE(std::getenv("GPUTUNE_CLANG_RESOURCE_DIR") == nullptr) << "the test sets it itself";
  EXPECT_NE(error_of().find("'gputune_probe.h' file not found"), std::string::npos);
  setenv("GPUTUNE_CLANG_RESOURCE_DIR", dir.c_str(), 1);
  std::string moved = error_of();
  unsetenv("GPUTUNE_CLANG_RESOURCE_DIR");
  EXPECT_EQ(moved, "");
}

TEST(NaiveAnalysis, KernelOutsideTheSubsetIsStillTunedOverBlockShape) {
  fs::path dir = fs::path(GPUTUNE_TEST_STATE_DIR) / "naive-fallback";
  fs::create_directories(dir);
  std::ofstream(dir / "k.cu") << R"(
__global__ void k(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __shared__ float s[256];
  s[threadIdx.x] = in[i];
  __syncthreads();
  if (i < n) out[i] = s[threadIdx.x];
}
)";
  std::ofstream(dir / "job.json") << R"({
  "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
    "GlobalSize": {"X": "ProblemSize[0]", "Y": "1", "Z": "1"}, "GlobalSizeType": "OpenCL",
    "Arguments": [
      {"Name": "out", "Type": "float", "MemoryType": "Vector", "AccessType": "WriteOnly", "Size": "ProblemSize[0]", "FillType": "Constant", "FillValue": 0.0, "Output": 1},
      {"Name": "in", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillType": "Constant", "FillValue": "ProblemSize[0]"}]},
  "GPUTune": {"Naive": true, "Contexts": [{"Name": "1000", "ProblemSize": [1000]}]}
})";
  Job job = tuner::load_tuning_job(dir / "job.json");
  EXPECT_EQ(job.naive_fallback.rfind("k.cu:", 0), 0u) << job.naive_fallback;
  EXPECT_FALSE(job.naive_kernel);
  // Every command that loads the job prints its notes: the user hears why (run, prune, space).
  ASSERT_EQ(job.notes.size(), 1u);
  EXPECT_EQ(job.notes[0], job.naive_fallback +
                              "; the naive kernel is outside the generator's subset, so it is "
                              "tuned over its block shape only, as written (`gputune generate "
                              "k.cu --kernel k` explains)");
  ASSERT_EQ(job.parameters.size(), 1u);
  EXPECT_EQ(job.parameters[0].name, "block_size_x");
  EXPECT_EQ(build_space(job).size(), 6u);
}

TEST(NaiveJob, AJobNarrowsGeneratedParametersAndUnknownNamesAreRefused) {
  naive::NaiveKernel k = analyse("mv");
  Job job = load_job(kNaive / "mv.json");
  Job full = job;
  naive::apply_to_job(full, k);
  Parameter narrow;
  narrow.name = "block_size_x";
  narrow.type = "int";
  narrow.values = {Value(64)};
  job.parameters = {narrow};
  naive::apply_to_job(job, k);
  Space narrowed = build_space(job), all = build_space(full);
  size_t with64 = 0;
  for (size_t i = 0; i < all.size(); ++i) with64 += all.config(i)["block_size_x"].as_int() == 64;
  EXPECT_GT(with64, 0u);
  EXPECT_EQ(narrowed.size(), with64) << "the job's values replace the generated ones, nothing else";
  for (size_t i = 0; i < narrowed.size(); ++i)
    EXPECT_EQ(narrowed.config(i)["block_size_x"].as_int(), 64);
  EXPECT_EQ(job.global_size_type, "CUDA");
  EXPECT_EQ(job.local_size.x, "block_size_x*split");  // mv offers split
  Job bad = load_job(kNaive / "mv.json");
  Parameter unknown;
  unknown.name = "tile_size_x";
  unknown.type = "int";
  unknown.values = {Value(1)};
  bad.parameters = {unknown};
  try {
    naive::apply_to_job(bad, k);
    FAIL() << "a parameter the generator does not have must be refused";
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "ConfigurationSpace.TuningParameters.tile_size_x");
    EXPECT_NE(e.fix.find("merge_x"), std::string::npos) << e.fix;
  }
  // A value the emitter does not know is refused, not read as the default.
  auto refused = [&](const std::string& name, Value v) {
    Job j = load_job(kNaive / "mv.json");
    Parameter q;
    q.name = name;
    q.type = v.is_str() ? "string" : "int";
    q.values = {v};
    j.parameters = {q};
    try {
      naive::apply_to_job(j, k);
    } catch (const JobError& e) {
      EXPECT_EQ(e.field, "ConfigurationSpace.TuningParameters." + name);
      return e.fix;
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("cache_a", "texture").find("'global', 'readonly', 'shared'"),
            std::string::npos);
  EXPECT_NE(refused("merge_x", 0).find("positive integers"), std::string::npos);
  EXPECT_NE(refused("unroll", "4").find("integers"), std::string::npos);
  EXPECT_EQ(refused("merge_x", 16), "accepted");  // beyond the generated values, still valid
  EXPECT_EQ(refused("cache_a", "shared"), "accepted");
}

// --- split reduction loops -------------------------------------------------------------------

// mv at 4096 rows is 128 warps: `split` lets several threads per output share the loop, each
// taking every split-th step, their partial sums meeting through warp shuffles, lane 0 writing.
TEST(NaiveSplit, SeveralThreadsPerOutputShareTheReductionLoop) {
  naive::NaiveKernel mv = analyse("mv");
  naive::SplitOption sp = naive::split_loop(mv);
  ASSERT_EQ(sp.loop, 0) << sp.reason;
  ASSERT_EQ(sp.locals.size(), 1u);
  EXPECT_EQ(mv.locals[static_cast<size_t>(sp.locals[0])].name, "sum");
  naive::Choice c;
  c.block_x = 32;
  c.merge_x = 2;
  c.split = 32;
  c.cache["x"] = Cache::ReadOnly;
  const std::string src = naive::emit_variant(mv, c);
  EXPECT_NE(src.find("__launch_bounds__(1024)"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_lane = threadIdx.x % 32;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_x0 = gt_bx + threadIdx.x / 32;"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int i = 0 + gt_lane; i < n; i += 32) {"), std::string::npos) << src;
  EXPECT_NE(src.find("sum[gt_mx] += __shfl_xor_sync(0xffffffffu, sum[gt_mx], gt_o);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("if (gt_ok[gt_mx] && gt_lane == 0) {\n      y[idx] = sum[gt_mx];"),
            std::string::npos)
      << src;
  EXPECT_NE(naive::choice_label(mv, c).find("_s32"), std::string::npos);
  // NVRTC: one shfl per merged output per butterfly step (5 steps for 32 lanes).
  EXPECT_EQ(count(ptx_of(src), "shfl.sync.bfly"), 2u * 5);
  // Not offered where it cannot apply, with the reason; refused in a variant that asks anyway.
  EXPECT_EQ(naive::split_loop(analyse("mm")).loop, -1);
  EXPECT_NE(naive::split_loop(analyse("mm")).reason.find("2-D kernel"), std::string::npos);
  EXPECT_NE(naive::split_loop(analyse("reduction")).reason.find("no loop"), std::string::npos);
  naive::Choice tiled = c;
  tiled.cache["a"] = Cache::Shared;
  EXPECT_THROW(naive::emit_variant(mv, tiled), naive::NaiveError);
  // The job launches block_size_x * split threads along x and keeps the grid of outputs.
  Job job = tuner::load_tuning_job(kNaive / "mv.json");  // the generated space applied
  ASSERT_TRUE(job.naive_kernel);
  EXPECT_EQ(job.local_size.x, "block_size_x*split");
  Space space = build_space(job);
  ContextSpec ctx;
  ctx.name = "4096x4096";
  ctx.problem_size = {Value(4096), Value(4096)};
  size_t split = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    Config cfg = space.config(i);
    naive::Choice ch = naive::choice_from_config(mv, cfg);
    if (ch.split == 1) continue;
    ++split;
    EXPECT_NE(cfg["cache_a"].as_str(), "shared") << cfg.key();
    EXPECT_NE(cfg["cache_x"].as_str(), "shared") << cfg.key();
    LaunchGeometry g = launch_geometry(job, cfg, ctx);
    EXPECT_EQ(g.block[0], ch.block_x * ch.split) << cfg.key();
    EXPECT_LE(g.threads_per_block(), 1024) << cfg.key();
    EXPECT_EQ(g.grid[0], (4096 + ch.block_x * ch.merge_x - 1) / (ch.block_x * ch.merge_x));
  }
  EXPECT_GT(split, 100u);
  EXPECT_FALSE(sp.across_warps) << "mv's a[idx*n+i] is coalesced along i: lanes in a warp";
}

// tmv reads a[i*m+idx], coalesced along idx: its lanes are rows of the block (threadIdx.y), so
// each warp still reads 32 consecutive idx, and the parts meet in shared memory.
TEST(NaiveSplit, CoalescedReadsKeepTheirWarpsAndSplitAcrossRows) {
  naive::NaiveKernel tmv = analyse("tmv");
  naive::SplitOption sp = naive::split_loop(tmv);
  ASSERT_GE(sp.loop, 0) << sp.reason;
  EXPECT_TRUE(sp.across_warps);
  naive::Choice c;
  c.block_x = 128;
  c.merge_x = 2;
  c.split = 8;
  const std::string src = naive::emit_variant(tmv, c);
  EXPECT_EQ(naive::launch_block(tmv, c), (std::array<int, 2>{128, 8}));
  EXPECT_NE(src.find("__launch_bounds__(1024)"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_lane = threadIdx.y;"), std::string::npos) << src;
  EXPECT_NE(src.find("const int gt_x0 = gt_bx + threadIdx.x;"), std::string::npos) << src;
  EXPECT_NE(src.find("__shared__ float gt_sp_sum[8][256];"), std::string::npos) << src;
  EXPECT_EQ(src.find("__shfl"), std::string::npos) << src;
  EXPECT_EQ(naive::shared_bytes(tmv, c), 8 * 256 * 4);
  Job job = tuner::load_tuning_job(kNaive / "tmv.json");
  EXPECT_EQ(job.local_size.x, "block_size_x");
  EXPECT_EQ(job.local_size.y, "split");
  ContextSpec ctx;
  ctx.name = "37x29";
  ctx.problem_size = {Value(37), Value(29)};
  Space space = build_space(job);
  std::vector<naive::Choice> splits;
  for (size_t i = 0; i < space.size() && splits.size() < 48; i += 7) {
    Config cfg = space.config(i);
    naive::Choice ch = naive::choice_from_config(tmv, cfg);
    if (ch.split == 1) continue;
    LaunchGeometry g = launch_geometry(job, cfg, ctx);
    EXPECT_EQ(g.block[0], ch.block_x) << cfg.key();
    EXPECT_EQ(g.block[1], ch.split) << cfg.key();
    splits.push_back(ch);
  }
  ASSERT_GE(splits.size(), 20u);
  std::vector<std::string> bad =
      tuner::check_on_cpu(job, load_kernel_source(job), tmv, splits, ctx, 2, nullptr);
  EXPECT_TRUE(bad.empty()) << bad.size() << " differ, first: " << bad.front();
}

// --- the CPU emulator ------------------------------------------------------------------------

// With a vector width, a halo window whose columns are consecutive floats is loaded four
// columns at a time: each row is cut into groups that start where its address is a multiple of
// 16 bytes (odd row lengths start anywhere), so a group the block's valid outputs need in full is
// one aligned float4 load, and the groups at the window's edges go element by element.
TEST(NaiveHalo, WindowsLoadFourColumnsPerVectorWhereTheRowAllows) {
  naive::NaiveKernel jac = analyse("jacobi");
  naive::Choice c = halo_choice(32, 4, "in");
  c.vector = 4;
  const std::string src = naive::emit_variant(jac, c);
  EXPECT_NE(src.find("const int gt_hg_in = (gt_hw_in + 6) / 4;  // groups per row"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("gt_c0 = (gt_e % gt_hg_in) * 4 - static_cast<int>((reinterpret_cast<unsigned "
                     "long long>(in) / 4 + static_cast<unsigned long long>(static_cast<long "
                     "long>(idy * n + idx))) % 4);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("const float4 gt_v = __ldg(reinterpret_cast<const float4*>(gt_p));"),
            std::string::npos)
      << src;
  naive::Choice scalar = c;
  scalar.vector = 1;
  const std::string vec_ptx = ptx_of(src), sca_ptx = ptx_of(naive::emit_variant(jac, scalar));
  EXPECT_EQ(count(vec_ptx, "ld.global.nc.v4.f32"), 1u) << vec_ptx;
  EXPECT_EQ(count(sca_ptx, "ld.global.nc.v4.f32"), 0u);

  // On the CPU: n = 64 (rows of 256 bytes, the array page-aligned by the emulator), grid 2 x 16.
  // A block's needed columns are its valid outputs +-1 (clipped to 1..62): 8 aligned groups per
  // row, and 7 in the rows above and below, where only the centre column is read. Rows: blocks
  // at the top and bottom edge have 3 valid rows (1 x 7 + 3 x 8 + 1 x 7 = 38 groups), the 14
  // others 4 (7 + 32 + 7 = 46): 2 x (2 x 38 + 14 x 46) = 1440 float4 loads; none without vectors.
  Job job = load_job(kNaive / "jacobi.json");
  const std::string naive_src = load_kernel_source(job);
  naive::apply_to_job(job, jac);
  ContextSpec ctx;
  ctx.name = "64";
  ctx.problem_size.emplace_back(std::int64_t{64});
  unsigned long long loads = 0;
  EXPECT_TRUE(tuner::check_on_cpu(job, naive_src, jac, {c}, ctx, 1, &loads).empty());
  EXPECT_EQ(loads, 1440u);
  EXPECT_TRUE(tuner::check_on_cpu(job, naive_src, jac, {scalar}, ctx, 1, &loads).empty());
  EXPECT_EQ(loads, 0u);
  // n = 37: every row starts at another alignment; the groups follow it and still agree.
  ctx.problem_size = {Value(std::int64_t{37})};
  EXPECT_TRUE(tuner::check_on_cpu(job, naive_src, jac, {c}, ctx, 1, &loads).empty());
  EXPECT_GT(loads, 0u);
  // The space offers the width for a window where nothing else takes vectors (merge_x 1).
  Space s = build_space(job);
  bool offered = false;
  for (size_t i = 0; i < s.size() && !offered; ++i) {
    naive::Choice ch = naive::choice_from_config(jac, s.config(i));
    offered = ch.vector == 4 && ch.merge_x == 1 && ch.cache["in"] == Cache::Shared;
  }
  EXPECT_TRUE(offered);
}

// With merged outputs in runs of consecutive x, output j of a run reads at step k + 1 of a
// filter loop what output j + 1 read at step k: the run keeps those elements in a register window
// that slides along the loop (conv1d's in[i + k]: 3 loaded before the loop, one per step, shifted
// after it), so a step reads the halo window once per run instead of once per output.
TEST(NaiveHalo, ARegisterWindowSlidesAlongTheFilterLoop) {
  naive::NaiveKernel conv = analyse("conv1d");
  naive::Choice c = halo_choice(64, 1, "in");
  c.merge_x = 4;
  c.vector = 4;
  c.unroll = 4;
  c.cache["filt"] = Cache::ReadOnly;
  const std::string src = naive::emit_variant(conv, c);
  EXPECT_NE(src.find("float gt_sw0[4];  // in[i + k]: a window sliding along k, 4 consecutive "
                     "outputs per run"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("gt_sw0[gt_q * 4 + 2] = gt_halo[gt_ho_in + i - gt_bx + k];"),
            std::string::npos)
      << src;  // before the loop, at k = 0
  EXPECT_NE(src.find("gt_sw0[gt_q * 4 + 3] = gt_halo[gt_ho_in + i - gt_bx + k];"),
            std::string::npos)
      << src;  // each step: the run's last output's element
  EXPECT_NE(src.find("gt_sw0[gt_q * 4 + 0] = gt_sw0[gt_q * 4 + 1];"), std::string::npos) << src;
  EXPECT_NE(src.find("sum[gt_mx] += gt_sw0[gt_mx] * gt_r1;"), std::string::npos) << src;
  // The filter's register starts at zero (it is loaded under a check): left undefined, NVVM
  // reuses the previous step's products on the skipped path and splits every FMA.
  EXPECT_NE(src.find("float gt_r1{};  // filt[k]"), std::string::npos) << src;
  const std::string ptx = ptx_of(src);
  EXPECT_EQ(count(ptx, "fma.rn.f32"), 20u) << ptx;  // 4 outputs x (4 unrolled + 1 remainder)
  EXPECT_EQ(count(ptx, "mul.f32"), 0u) << ptx;
  EXPECT_LE(count(ptx, "ld.shared"), 6u) << ptx;  // 20 without the window: one per output, step
  // Every form of the loop moves the window: plain, strip-mined with the filter in shared memory
  // (full strips, vector steps, remainder), pipelined; 2-D along fx inside fy (conv2d).
  Job job = load_job(kNaive / "conv1d.json");
  const std::string naive_src = load_kernel_source(job);
  naive::apply_to_job(job, conv);
  std::vector<naive::Choice> variants;
  for (Cache f : {Cache::ReadOnly, Cache::Shared})
    for (int stages : {1, 3})
      for (int merge : {2, 8}) {
        naive::Choice v = c;
        v.cache["filt"] = f;
        v.stages = f == Cache::Shared ? stages : 1;
        v.merge_x = merge;
        v.tile_k = 8;
        variants.push_back(v);
      }
  for (const naive::Choice& v : variants)
    EXPECT_NE(naive::emit_variant(conv, v).find("a window sliding along k"), std::string::npos);
  ContextSpec ctx;
  ctx.name = "1001x7";
  ctx.problem_size = {Value(std::int64_t{1001}), Value(std::int64_t{7})};
  EXPECT_TRUE(tuner::check_on_cpu(job, naive_src, conv, variants, ctx, 2).empty());
  naive::NaiveKernel conv2 = analyse("conv2d");
  naive::Choice c2 = halo_choice(8, 2, "in");
  c2.merge_x = 4;
  c2.merge_y = 2;
  c2.vector = 2;
  const std::string src2 = naive::emit_variant(conv2, c2);
  EXPECT_NE(src2.find("a window sliding along fx, 2 consecutive outputs per run"),
            std::string::npos)
      << src2;
  Job job2 = load_job(kNaive / "conv2d.json");
  const std::string naive2 = load_kernel_source(job2);
  naive::apply_to_job(job2, conv2);
  ctx.problem_size = {Value(std::int64_t{37}), Value(std::int64_t{29}), Value(std::int64_t{5})};
  EXPECT_TRUE(tuner::check_on_cpu(job2, naive2, conv2, {c2}, ctx, 1).empty());
}

// stages = 2: each strip-mined loop's tiles get two buffers; the first strip is copied before the
// loop and every step starts the cp.async copy of the next strip into the other buffer, waits for
// its own (wait_group 1) and works on it. stages = S: S-1 strips ahead, wait_group S-1. On sm_80+
// the copies are cp.async (16 bytes where the vector staging aligns, zero-fill out of range); for
// older targets a plain copy.
TEST(NaivePipeline, TheNextStripIsCopiedWhileTheWorkUsesThisOne) {
  const naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 16;
  c.merge_x = 4;
  c.merge_y = 4;
  c.vector = 4;
  c.stages = 2;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  const std::string src = naive::emit_variant(mm, c);
  EXPECT_NE(src.find("__shared__ __align__(16) float gt_s_a[2][64][16];"), std::string::npos)
      << src;
  EXPECT_NE(src.find("const int gt_stage0 = (gt_k_base - (0)) / 16 % 2;"), std::string::npos)
      << src;
  EXPECT_NE(src.find("gt_cp_wait<1>();"), std::string::npos) << src;
  EXPECT_NE(src.find("gt_s_a[(gt_stage0 + 1) % 2]"), std::string::npos) << src;
  EXPECT_NE(src.find("gt_s_a[gt_stage0][idy - gt_by]"), std::string::npos) << src;
  EXPECT_EQ(naive::shared_bytes(mm, c), 2 * 2 * 64 * 16 * 4);
  const std::string ptx = ptx_of(src);
  EXPECT_GE(count(ptx, "cp.async.cg.shared.global"), 2u) << "16-byte copies of a and b";
  EXPECT_GE(count(ptx, "cp.async.ca.shared.global"), 2u) << "element copies at the edges";
  EXPECT_GE(count(ptx, "cp.async.wait_group 1"), 1u);
  EXPECT_EQ(count(ptx, "ld.global"), 0u) << "every tile load is a copy";
  // Three stages: two strips copied ahead, each step copies into the buffer the previous step
  // used and waits for all but the two newest groups.
  c.stages = 3;
  const std::string three = naive::emit_variant(mm, c);
  EXPECT_NE(three.find("__shared__ __align__(16) float gt_s_a[3][64][16];"), std::string::npos)
      << three;
  EXPECT_NE(three.find("gt_k_ahead < 2; ++gt_k_ahead) {  // the first 2 strips"), std::string::npos)
      << three;
  EXPECT_NE(three.find("const int gt_k_next = gt_k_base + 2 * 16;"), std::string::npos) << three;
  EXPECT_NE(three.find("gt_s_a[(gt_stage0 + 2) % 3]"), std::string::npos) << three;
  EXPECT_EQ(naive::shared_bytes(mm, c), 3 * 2 * 64 * 16 * 4);
  const std::string ptx3 = ptx_of(three);
  EXPECT_GE(count(ptx3, "cp.async.wait_group 2"), 1u);
  EXPECT_EQ(count(ptx3, "cp.async.wait_group 1"), 0u);
  // One stage: the tiles are loaded and stored by the threads, no cp.async.
  c.stages = 1;
  EXPECT_EQ(naive::emit_variant(mm, c).find("gt_cp_"), std::string::npos);
  // The job offers stages 2-4 only with a shared tile, and only where every buffer fits.
  Job job = load_job(kNaive / "mm.json");
  naive::apply_to_job(job, mm);
  Space space = build_space(job);
  std::map<int, size_t> by_stages;
  for (size_t i = 0; i < space.size(); i += 7) {
    const naive::Choice ch = naive::choice_from_config(mm, space.config(i));
    ++by_stages[ch.stages];
    if (ch.stages == 1) continue;
    EXPECT_TRUE(ch.cache.at("a") == Cache::Shared || ch.cache.at("b") == Cache::Shared)
        << naive::choice_label(mm, ch);
    EXPECT_LE(naive::shared_bytes(mm, ch), 48 * 1024) << naive::choice_label(mm, ch);
  }
  for (int stages : {1, 2, 3, 4}) EXPECT_GT(by_stages[stages], 0u) << stages << " stages";
  EXPECT_EQ(by_stages.size(), 4u);
}

// launch_bounds: every variant says __launch_bounds__(threads) unless told otherwise, and under it
// ptxas's register choice swings: NVRTC gives mm's sgemm tile (16x16 threads, merge 8x8, two
// stages) 128 registers and spills (which the spill rule prunes), while without the bound it takes
// 167 and spills nothing; `two_blocks` asks for two blocks per SM (at most 128 registers at 256
// threads). Offered for 2-D kernels with a shared tile and 32 outputs or more per thread: `none`
// up to 256 threads (any register count launches), `two_blocks` from 256 (where the cap binds)
// while the cap stays above the outputs per thread.
TEST(NaiveLaunchBounds, TheRegisterBudgetIsATunedDimension) {
  const naive::NaiveKernel mm = analyse("mm");
  naive::Choice c;
  c.block_x = 16;
  c.block_y = 16;
  c.merge_x = 8;
  c.merge_y = 8;
  c.unroll = 4;
  c.vector = 4;
  c.stages = 2;
  c.cache = {{"a", Cache::Shared}, {"b", Cache::Shared}};
  const std::vector<naive::LaunchBounds> all = {
      naive::LaunchBounds::Threads, naive::LaunchBounds::None, naive::LaunchBounds::TwoBlocks};
  std::vector<Variant> vs;
  for (naive::LaunchBounds b : all) {
    c.bounds = b;
    Variant v;
    v.kernel_name = "mm";
    v.source = naive::emit_variant(mm, c);
    vs.push_back(v);
  }
  EXPECT_NE(vs[0].source.find("void __launch_bounds__(256) mm("), std::string::npos);
  EXPECT_NE(vs[1].source.find("__global__ void mm("), std::string::npos) << vs[1].source;
  EXPECT_NE(vs[2].source.find("void __launch_bounds__(256, 2) mm("), std::string::npos);
  EXPECT_NE(naive::choice_label(mm, c).find("_lb-two_blocks"), std::string::npos);
  // Not offered: two blocks of 32x16 threads cap registers at 64, what merge 8x8's accumulators
  // alone need, so ptxas spills.
  c.block_x = 32;
  c.bounds = naive::LaunchBounds::TwoBlocks;
  Variant wide;
  wide.kernel_name = "mm";
  wide.source = naive::emit_variant(mm, c);
  vs.push_back(wide);
  c.block_x = 16;
  // Nor are 1024 threads (64K / 1024 = 64 registers) with merge 8x8 under any bound (one stage
  // of 8-deep strips, so the tiles fit 48 KB of static shared memory).
  naive::Choice full = c;
  full.block_x = 64;
  full.bounds = naive::LaunchBounds::Threads;
  full.stages = 1;
  full.tile_k = 8;
  Variant v1024;
  v1024.kernel_name = "mm";
  v1024.source = naive::emit_variant(mm, full);
  vs.push_back(v1024);
  auto compiled = cuda::compile_all(vs, "sm_90", cuda::CubinCache(""), 2);
  std::vector<pruner::Resources> res;
  for (const auto& cv : compiled) {
    ASSERT_TRUE(cv.ok) << cv.log;
    res.push_back(pruner::read_cubin_resources(cv.cubin, cv.lowered_name));
    pruner::apply_ptxas_log(res.back(), cv.log, cv.lowered_name);
  }
  EXPECT_LE(res[4].registers, 64);
  EXPECT_GT(res[4].spill_stores, 256) << res[4].registers << " registers";
  // The compiler's own choice spills nothing; the bounded ones stay within their caps.
  EXPECT_EQ(res[1].spill_stores, 0) << res[1].registers << " registers";
  EXPECT_GT(res[1].registers, 128);
  EXPECT_LE(res[0].registers, 255);
  EXPECT_LE(res[2].registers, 128);
  EXPECT_EQ(res[0].max_threads, 256);
  EXPECT_EQ(res[1].max_threads, 0);
  EXPECT_LE(res[3].registers, 64);
  EXPECT_GT(res[3].spill_stores, 256) << res[3].registers << " registers";
  // The job offers the other two only for the heaviest register tiles, each where it can matter.
  Job job = load_job(kNaive / "mm_sgemm.json");
  naive::apply_to_job(job, mm);
  Space space = build_space(job);
  std::map<naive::LaunchBounds, size_t> seen;
  for (size_t i = 0; i < space.size(); ++i) {
    const naive::Choice ch = naive::choice_from_config(mm, space.config(i));
    ++seen[ch.bounds];
    const int threads = ch.block_x * ch.block_y;
    EXPECT_LT(ch.merge_x * ch.merge_y, 65536 / threads) << naive::choice_label(mm, ch);
    if (ch.bounds == naive::LaunchBounds::Threads) continue;
    EXPECT_GE(ch.merge_x * ch.merge_y, 32) << naive::choice_label(mm, ch);
    if (ch.bounds == naive::LaunchBounds::None) {
      EXPECT_LE(threads, 256) << naive::choice_label(mm, ch);
    } else {
      EXPECT_GE(threads, 256) << naive::choice_label(mm, ch);
      // The cap for two blocks (64K registers / (2 x threads)) is above the accumulators.
      EXPECT_LT(ch.merge_x * ch.merge_y, 32768 / threads) << naive::choice_label(mm, ch);
    }
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_GT(seen[naive::LaunchBounds::Threads], seen[naive::LaunchBounds::None]);
  // 1-D kernels do not get the dimension.
  Job mv = load_job(kNaive / "mv.json");
  naive::apply_to_job(mv, analyse("mv"));
  EXPECT_TRUE(std::none_of(mv.parameters.begin(), mv.parameters.end(),
                           [](const Parameter& p) { return p.name == "launch_bounds"; }));
}

// The generated space keeps a configuration exactly when the variant's static shared memory fits
// in 48 KiB: the job's condition computes the same pitches (pads, vector widths) the emitter
// declares. Checked over mv's, mm_sgemm's and tmv's spaces (tmv: split buffers) with and
// without that condition (mv has configurations where a pad of 4 crosses 48 KiB and a pad of 1
// does not).
TEST(NaiveJob, TheSharedMemoryConditionAgreesWithTheVariantsBytes) {
  for (const auto& [file, kernel] :
       {std::pair{"mv.json", "mv"}, {"mm_sgemm.json", "mm"}, {"tmv.json", "tmv"}}) {
    Job job = load_job(kNaive / file);
    naive::NaiveKernel k = naive::analyse_naive(load_kernel_source(job), kernel, "k.cu");
    naive::apply_to_job(job, k);
    Job open = job;
    const size_t before = open.conditions.size();
    std::erase_if(open.conditions, [](const Condition& c) {
      return c.expression.find("<= 48 * 1024") != std::string::npos;
    });
    ASSERT_EQ(open.conditions.size() + 1, before) << file;
    Space all = build_space(open), kept = build_space(job);
    std::set<std::string> in_space;
    for (size_t i = 0; i < kept.size(); ++i) in_space.insert(kept.config(i).json());
    size_t fits = 0, wrong = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const Config c = all.config(i);
      const long long bytes = naive::shared_bytes(k, naive::choice_from_config(k, c));
      if ((bytes <= 48 * 1024) != (in_space.count(c.json()) > 0) && ++wrong <= 3)
        ADD_FAILURE() << file << ": " << c.json() << " declares " << bytes << " bytes";
      fits += bytes <= 48 * 1024;
    }
    EXPECT_EQ(wrong, 0u) << file;
    EXPECT_EQ(fits, kept.size()) << file;
    if (std::string(file) != "tmv.json") {  // tmv: its split buffers always fit
      EXPECT_GT(all.size(), kept.size()) << file << ": no configuration exceeds 48 KiB";
    }
  }
}

TEST(NaiveJob, EveryShippedNaiveJobLoadsIntoAGeneratedSpace) {
  size_t jobs = 0;
  for (const auto& e : fs::directory_iterator(kNaive)) {
    if (e.path().extension() != ".json") continue;
    Job job = tuner::load_tuning_job(e.path());
    EXPECT_TRUE(job.naive) << e.path();
    EXPECT_TRUE(job.naive_fallback.empty()) << e.path() << ": " << job.naive_fallback;
    ASSERT_TRUE(job.naive_kernel) << e.path();
    EXPECT_GT(build_space(job).size(), 0u) << e.path();
    ++jobs;
  }
  EXPECT_GE(jobs, 10u);
}

TEST(NaiveText, BindingsNothingReadsAreDropped) {
  const std::string src =
      "__global__ void k(float* out, int n) {\n"
      "  const int gt_x0 = blockIdx.x * 32 + threadIdx.x;  // used by idx below\n"
      "  const int gt_y0 = blockIdx.y * 4;\n"  // only idy below uses it, and idy goes
      "  for (int gt_mx = 0; gt_mx < 2; ++gt_mx)\n"
      "  {\n"
      "    const int idx = gt_x0 + gt_mx * 32;\n"
      "    const int idy = gt_y0 + (gt_mx - 1);\n"
      "    out[idx] = 0;\n"
      "  }\n"
      "  {\n"
      "    const int idx = 3;  // idx is read in another block only\n"
      "  }\n"
      "  const int tail = gt_x0; out[tail] = 1;\n"  // not a binding on its own line: kept
      "  const int c = min(n, 4);\n"                // a call: kept
      "  const int w = n;  // used after a nested block closes\n"
      "  { { } }\n"
      "  out[w] = 2;\n"
      "#define AT(i) out[(i) + m]\n"
      "  const int m = n;\n"  // a macro reads it: kept
      "  AT(0) = 3;\n"
      "}\n";
  const std::string out = naive::drop_unused_bindings(src);
  for (const char* kept : {"const int gt_x0", "const int idx = gt_x0", "const int tail",
                           "const int c = min", "const int w = n", "const int m = n"})
    EXPECT_NE(out.find(kept), std::string::npos) << kept << "\n" << out;
  for (const char* gone : {"const int gt_y0", "const int idy", "const int idx = 3"})
    EXPECT_EQ(out.find(gone), std::string::npos) << gone << "\n" << out;
  EXPECT_EQ(naive::drop_unused_bindings(out), out);  // nothing left to drop
}

// Every shipped naive kernel's variants, spread over its whole space, compile without a single
// NVRTC warning (the per-output bindings a loop does not read were ~5 per variant).
TEST(NaiveText, GeneratedVariantsCompileWithoutWarnings) {
  size_t compiled = 0;
  for (const auto& e : fs::directory_iterator(kNaive)) {
    if (e.path().extension() != ".json") continue;
    Job job = tuner::load_tuning_job(e.path());
    ASSERT_TRUE(job.naive_kernel) << e.path();
    Space s = build_space(job);
    for (size_t at : spread(s, 12)) {
      const std::string src = naive::emit_variant(
          *job.naive_kernel, naive::choice_from_config(*job.naive_kernel, s.config(at)));
      nvrtcProgram prog;
      ASSERT_EQ(nvrtcCreateProgram(&prog, src.c_str(), "v.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
      const char* opts[] = {"-arch=compute_90"};
      const nvrtcResult rc = nvrtcCompileProgram(prog, 1, opts);
      size_t size = 0;
      nvrtcGetProgramLogSize(prog, &size);
      std::string log(size, '\0');
      nvrtcGetProgramLog(prog, log.data());
      nvrtcDestroyProgram(&prog);
      EXPECT_EQ(rc, NVRTC_SUCCESS) << e.path() << " #" << at << "\n" << log;
      EXPECT_EQ(log.find("warning"), std::string::npos) << e.path() << " #" << at << "\n"
                                                        << log << "\n"
                                                        << src;
      ++compiled;
    }
  }
  EXPECT_GE(compiled, 100u);
}

// --- every kernel's variants against the kernel ----------------------------------------------

struct Case {
  std::string kernel;
  std::vector<std::int64_t> size;  // ProblemSize: primes, so no tile divides them
  bool aligned = false;  // sizes are multiples of 4 (not of the tiles): vector loads must happen
  size_t most = 0;       // variants spread over the test space (0: all)
  std::string name = kernel + (aligned ? "_aligned" : "");
  fs::path dir = kNaive;  // where the kernel and its job are
};

class NaiveVariants : public ::testing::TestWithParam<Case> {};

/// The generated space narrowed to small blocks and two values of each numeric dimension (the
/// emulator runs every thread; CI time), with every load path of every array, pad on and off.
Space test_space(Job& job, const naive::NaiveKernel& k) {
  naive::apply_to_job(job, k);
  for (Parameter& p : job.parameters) {
    List keep;
    for (const Value& v : p.values) {
      std::int64_t x = v.is_int() ? v.as_int() : 0;
      if (p.name == "block_size_x" && (k.dims == 2 ? (x != 8 && x != 16) : x > 64)) continue;
      if (p.name == "block_size_y" && x != 2 && x != 4) continue;
      if (p.name == "merge_x" && x != 1 && x != 4) continue;
      if (p.name == "merge_y" && x != 1 && x != 2) continue;
      if (p.name == "unroll" && x != 1 && x != 4) continue;
      if (p.name == "tile_k" && x == 32) continue;
      if (p.name == "vector" && x == 2) continue;
      if (p.name == "split" && x != 1 && x != 4 && x != 32) continue;
      if (p.name == "stages" && x != 1 && x != 4) continue;  // one path for every S: the deepest
      keep.push_back(v);
    }
    p.values = keep;
  }
  return build_space(job);
}

TEST_P(NaiveVariants, EveryVariantComputesWhatTheNaiveKernelComputes) {
  const Case& c = GetParam();
  Job job = load_job(c.dir / (c.kernel + ".json"));
  ASSERT_TRUE(job.naive);
  std::string source = load_kernel_source(job);
  naive::NaiveKernel k = naive::analyse_naive(source, c.kernel, c.kernel + ".cu");
  const Space space = test_space(job, k);
  std::vector<size_t> at(space.size());
  std::iota(at.begin(), at.end(), size_t{0});
  auto choice = [&](size_t i) { return naive::choice_from_config(k, space.config(i)); };
  if (c.aligned)  // this case is there for the vector loads; the other one covers the rest
    std::erase_if(at, [&](size_t i) { return choice(i).vector == 1; });
  if (c.most) at = spread_among(space, at, c.most);
  std::vector<naive::Choice> variants;
  for (size_t i : at) variants.push_back(choice(i));
  ASSERT_GE(variants.size(), 8u);
  // Every load path the analysis offers appears in the tested variants.
  for (const auto& a : naive::array_options(k)) {
    if (c.aligned) break;
    for (Cache want : a.allowed) {
      bool seen = std::any_of(variants.begin(), variants.end(), [&](const naive::Choice& ch) {
        auto it = ch.cache.find(a.array);
        return (it == ch.cache.end() ? Cache::Global : it->second) == want;
      });
      EXPECT_TRUE(seen) << a.array << " " << naive::cache_name(want);
    }
  }
  const bool splits = std::any_of(variants.begin(), variants.end(),
                                  [](const naive::Choice& ch) { return ch.split > 1; });
  EXPECT_EQ(splits, !c.aligned && naive::split_loop(k).loop >= 0) << "split variants";
  for (const auto& o : naive::output_options(k)) {
    auto count = [&](auto pick) { return std::count_if(variants.begin(), variants.end(), pick); };
    if (o.stage) {
      EXPECT_GT(count([&](const naive::Choice& ch) { return ch.stage_store.count(o.array) > 0; }),
                0)
          << o.array << " staged stores";
    }
    if (o.reduce) {
      EXPECT_GT(count([&](const naive::Choice& ch) { return ch.block_reduce.count(o.array) > 0; }),
                0)
          << o.array << " block sums";
    }
  }
  ContextSpec ctx;
  ctx.name = "test";
  for (auto v : c.size) ctx.problem_size.emplace_back(v);
  unsigned long long vector_loads = 0;
  std::vector<std::string> bad =
      tuner::check_on_cpu(job, source, k, variants, ctx, 2, &vector_loads);
  EXPECT_TRUE(bad.empty()) << bad.size() << " of " << variants.size()
                           << " differ, first: " << (bad.empty() ? "" : bad.front());
  // NVRTC accepts them for Hopper: a spread of a dozen per kernel (every one costs ~0.1 s).
  std::vector<Variant> sample;
  for (size_t i : spread_among(space, at, 12)) {
    Variant v;
    v.kernel_name = k.name;
    v.source = naive::emit_variant(k, choice(i));
    v.options = job.compiler_options;
    sample.push_back(v);
  }
  auto compiled = cuda::compile_all(sample, "sm_90", cuda::CubinCache(""), 2);
  for (size_t i = 0; i < compiled.size(); ++i)
    EXPECT_TRUE(compiled[i].ok) << compiled[i].log << "\n" << sample[i].source;
  bool vectors = std::any_of(variants.begin(), variants.end(),
                             [](const naive::Choice& ch) { return ch.vector > 1; });
  if (c.aligned) {
    ASSERT_TRUE(vectors) << "the space offers no vector loads";
    EXPECT_GT(vector_loads, 0u) << "aligned sizes, yet every staging load was scalar";
  }
  std::cout << "[          ] " << c.name << ": " << variants.size()
            << " variants agree with the naive kernel (" << vector_loads << " vector loads), "
            << sample.size() << " of them compiled for sm_90\n";
}

INSTANTIATE_TEST_SUITE_P(
    ConfigsNaive, NaiveVariants,
    ::testing::Values(Case{"mm", {37}}, Case{"mm", {44}, true}, Case{"mv", {37, 29}},
                      Case{"mv", {36, 44}, true}, Case{"tmv", {37, 29}}, Case{"outer", {37, 29}},
                      Case{"outer", {44, 36}, true}, Case{"transpose", {37, 29}},
                      Case{"transpose", {44, 36}, true}, Case{"conv2d", {23, 19, 3}},
                      Case{"jacobi", {37}}, Case{"jacobi", {44}, true},
                      Case{"conv2d", {24, 20, 3}, true, 96}, Case{"conv1d", {1031, 7}},
                      Case{"reduction", {1031}}, Case{"mm2d", {37}, false, 120},
                      Case{"mm_acc", {37}, false, 160}),
    [](const auto& info) { return info.param.name; });

// --- the spellings people write (issue #63): tests/data/naive ---------------------------------

const fs::path kSpellings = fs::path(GPUTUNE_SOURCE_DIR) / "tests" / "data" / "naive";

naive::NaiveKernel analyse_spelling(const std::string& name) {
  return naive::analyse_naive(read(kSpellings / (name + ".cu")), name, name + ".cu");
}

bool says(const naive::NaiveKernel& k, const std::string& what) {
  return std::any_of(k.rewrites.begin(), k.rewrites.end(),
                     [&](const std::string& r) { return r.find(what) != std::string::npos; });
}

std::string all_rewrites(const naive::NaiveKernel& k) {
  std::string s;
  for (const std::string& r : k.rewrites) s += r + "\n";
  return s;
}

TEST(NaiveSpellings, ACounterDeclaredBeforeItsLoopIsTheLoopsOwn) {
  naive::NaiveKernel k = analyse_spelling("gemm_counter");
  EXPECT_EQ(k.loops, 1) << all_rewrites(k);
  EXPECT_EQ(k.guard.size(), 2u);
  EXPECT_EQ(allowed(k, "a"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_EQ(allowed(k, "b"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_TRUE(says(k, "line 8: 'k' is declared before its loop(s) (line 11)")) << all_rewrites(k);
  EXPECT_TRUE(says(k, "line 10: 'acc' (declared at line 9) is first set here")) << all_rewrites(k);
  // The variants' text is the kernel's with the counter in the loop header.
  naive::Choice plain;
  plain.block_x = 16, plain.block_y = 4;
  const std::string v = naive::emit_variant(k, plain);
  EXPECT_NE(v.find("for (int k = 0; k < nk; ++k)"), std::string::npos) << v;

  naive::NaiveKernel two = analyse_spelling("shared_counter");
  EXPECT_EQ(two.loops, 2) << all_rewrites(two);
  EXPECT_TRUE(says(two, "line 4: 'j' is declared before its loop(s) (lines 8, 9)"))
      << all_rewrites(two);
  EXPECT_EQ(allowed(two, "x"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));

  naive::NaiveKernel w = analyse_spelling("while_loop");
  EXPECT_EQ(w.loops, 1) << all_rewrites(w);
  EXPECT_GE(naive::split_loop(w).loop, 0) << naive::split_loop(w).reason;
  EXPECT_TRUE(says(w,
                   "line 7: the while loop counted by 'k' (declared at line 6, stepped at "
                   "line 9) is read as `for (int k = 0; ...; k++)`"))
      << all_rewrites(w);

  naive::NaiveKernel ret = analyse_spelling("early_return");
  EXPECT_EQ(ret.loops, 1) << all_rewrites(ret);
  EXPECT_EQ(ret.guard.size(), 1u);
  EXPECT_TRUE(says(ret, "'j' is declared before its loop(s)")) << all_rewrites(ret);
  EXPECT_TRUE(says(ret, "line 10: 's' (declared at line 9) is first set here"))
      << all_rewrites(ret);
}

TEST(NaiveSpellings, AssignmentsBeforeTheBoundsCheckAreDeclarations) {
  naive::NaiveKernel k = analyse_spelling("conv2d_assign");
  EXPECT_EQ(k.guard.size(), 4u) << all_rewrites(k);
  EXPECT_EQ(std::count_if(k.rewrites.begin(), k.rewrites.end(),
                          [](const std::string& r) {
                            return r.find("is first set here: read as one initialised") !=
                                   std::string::npos;
                          }),
            9)
      << all_rewrites(k);
  const std::vector<std::string> halos = naive::halo_windows(k);
  ASSERT_EQ(halos.size(), 1u) << "the 3x3 reads of A get a window";
  EXPECT_EQ(halos[0].rfind("A: 9 read(s)", 0), 0u) << halos[0];
}

// A 3-D stencil launched once per plane: the plane index is a kernel argument, a constant of the
// launch, so the reads of planes i - 1, i and i + 1 are three windows (one per plane), and a plane
// read once per thread stays on the read-only path.
TEST(NaiveSpellings, APlaneIndexThatIsAnArgumentGivesAWindowPerPlane) {
  naive::NaiveKernel k = analyse_spelling("conv3d_plane");
  EXPECT_EQ(allowed(k, "A"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  const std::vector<std::string> w = naive::halo_windows(k);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], "A: plane 1 of 3, 5 read(s), offsets up to 2 x 2");
  EXPECT_EQ(w[1], "A: plane 2 of 3, 2 read(s), offsets up to 1 x 1");
  EXPECT_EQ(w[2], "A: plane 3 of 3, 2 read(s), offsets up to 1 x 1");
  naive::Choice c;
  c.block_x = 32, c.block_y = 4, c.cache["A"] = Cache::Shared;
  const std::string v = naive::emit_variant(k, c);
  for (const char* name : {"gt_ho_A ", "gt_ho_A_1 ", "gt_ho_A_2 "})
    EXPECT_NE(v.find(std::string("const int ") + name), std::string::npos) << name << "\n" << v;
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(v, "__ldg(&A["), 3u) << "A is read from memory by the windows' loads only\n" << v;
  EXPECT_EQ(count(v, "gt_v = __ldg(&A["), 3u) << v;
  // A plane window's shared memory is sized at launch like any window's: three of them here.
  const std::map<std::string, double> at{{"ni", 9}, {"nj", 23}, {"nk", 19}, {"i", 4}};
  EXPECT_EQ(naive::dynamic_shared_bytes(k, c, at), 4 * ((32 + 2) * (4 + 2) + 2 * (33 * 5)));

  naive::NaiveKernel heat = analyse_spelling("heat3d_plane");
  const std::vector<std::string> hw = naive::halo_windows(heat);
  ASSERT_EQ(hw.size(), 1u);
  EXPECT_EQ(hw[0],
            "in: plane 1 of 3, 5 read(s), offsets up to 2 x 2; 2 plane(s) read once per thread, "
            "on the read-only path (line 12, 12)");
  naive::Choice h;
  h.block_x = 16, h.block_y = 8, h.cache["in"] = Cache::Shared;
  const std::string hv = naive::emit_variant(heat, h);
  EXPECT_NE(hv.find("__ldg(&in[((i - 1) * n + y) * n + x])"), std::string::npos) << hv;
  EXPECT_EQ(hv.find("gt_ho_in_1"), std::string::npos) << "one window" << hv;
  // Without a launch constant between them the reads are one window, as before.
  EXPECT_EQ(naive::halo_windows(analyse_spelling("conv2d_assign")).size(), 1u);
}

const naive::Stmt* first_loop(const naive::NaiveKernel& k) {
  for (const naive::Stmt& s : k.body)
    if (s.kind == naive::Stmt::Loop) return &s;
  return nullptr;
}

// A triangular loop (its start or end follows the thread's index) runs over the block's range,
// each output doing its own steps: it is a loop every thread runs alike, so its reads are staged,
// its sum split and unrolled, as any loop's.
TEST(NaiveSpellings, ATriangularLoopRunsOverTheBlocksRangeEachOutputItsOwnSteps) {
  naive::NaiveKernel up = analyse_spelling("tri_mv");
  ASSERT_EQ(up.loops, 1);
  ASSERT_NE(first_loop(up), nullptr);
  EXPECT_EQ(first_loop(up)->lo_dim, 0);
  EXPECT_EQ(first_loop(up)->hi_dim, -1);
  EXPECT_EQ(allowed(up, "x"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_EQ(allowed(up, "U"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  EXPECT_GE(naive::split_loop(up).loop, 0) << naive::split_loop(up).reason;
  EXPECT_TRUE(std::any_of(up.notes.begin(), up.notes.end(), [](const std::string& n) {
    return n ==
           "line 6: loop j is triangular (its start follows i): a variant runs it over the "
           "block's outputs, each output doing its own steps";
  }));
  // The loop starts at the block's first valid output; each output runs from its own start.
  naive::Choice c;
  c.block_x = 64, c.merge_x = 2, c.cache["x"] = Cache::Shared, c.tile_k = 16;
  const std::string v = naive::emit_variant(up, c);
  EXPECT_NE(v.find("for (int gt_j_base = gt_vx0; gt_j_base < n; gt_j_base += 16)"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("j >= (i)"), std::string::npos) << v;

  // The counter declared first, the end inclusive and following the thread, the output element
  // the accumulator: every spelling at once.
  naive::NaiveKernel low = analyse_spelling("tri_lower");
  ASSERT_EQ(low.loops, 1) << all_rewrites(low);
  ASSERT_NE(first_loop(low), nullptr);
  EXPECT_EQ(first_loop(low)->hi_dim, 0);
  EXPECT_TRUE(first_loop(low)->inclusive);
  EXPECT_GE(naive::split_loop(low).loop, 0) << naive::split_loop(low).reason;
  EXPECT_EQ(allowed(low, "b"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));
  naive::Choice l;
  l.block_x = 32;
  const std::string lv = naive::emit_variant(low, l);
  EXPECT_NE(lv.find("j2 < (gt_vx1) + 1"), std::string::npos) << lv;
  EXPECT_NE(lv.find("j2 <= (j1)"), std::string::npos) << lv;

  // 2-D: the end follows idy; A's tile [k][j] is shared by the block's rows.
  naive::NaiveKernel tr = analyse_spelling("trmm");
  ASSERT_EQ(tr.loops, 1);
  ASSERT_NE(first_loop(tr), nullptr);
  EXPECT_EQ(first_loop(tr)->hi_dim, 1);
  EXPECT_EQ(allowed(tr, "A"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly, Cache::Shared}));

  // A bound that follows the thread otherwise is said, with its line and the fix.
  const std::string twice = R"(
__global__ void twice(const float *a, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.0f;
    for (int j = 2 * i; j < n; j++) s += a[j];
    y[i] = s;
  }
})";
  naive::NaiveKernel t = naive::analyse_naive(twice, "twice", "twice.cu");
  EXPECT_EQ(t.loops, 0);
  EXPECT_TRUE(says(t,
                   "line 6: loop 'j' not recognised: its bound `2 * i` is not the thread's index "
                   "plus a constant of the launch. Fix: write it as `i + E` with E the same for "
                   "every thread"))
      << all_rewrites(t);
}

// An in-place update whose bounds check keeps its reads off what it writes (LU's row and column
// k, read while the trailing submatrix i, j > k is written) reads them on the read-only path,
// under a check at launch that the bounds keep them apart; the element it updates stays a plain
// load, and so does every read of a variant where the check fails.
TEST(NaiveSpellings, ReadsAnInPlaceUpdateKeepsOffWhatItWritesGoOnTheReadOnlyPath) {
  naive::NaiveKernel lu = analyse_spelling("lu_step");
  EXPECT_EQ(allowed(lu, "A"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly}));
  const auto options = naive::array_options(lu);
  const auto a = std::find_if(options.begin(), options.end(),
                              [](const naive::ArrayOptions& o) { return o.array == "A"; });
  ASSERT_NE(a, options.end());
  EXPECT_TRUE(std::any_of(a->reasons.begin(), a->reasons.end(), [](const std::string& r) {
    return r.rfind("readonly: the 2 reads at line 7 at launches whose bounds check keeps", 0) == 0;
  }));
  naive::Choice c;
  c.block_x = 16, c.block_y = 8, c.merge_x = 2, c.cache["A"] = Cache::ReadOnly;
  const std::string v = naive::emit_variant(lu, c);
  EXPECT_NE(v.find("A[i * n + j] -= (gt_apart1 ? __ldg(&A[i * n + k]) : A[i * n + k]) * "
                   "(gt_apart2 ? __ldg(&A[k * n + j]) : A[k * n + j]);"),
            std::string::npos)
      << v;
  // The interval of the index the reads' distance moves with is the bounds check's: (k, n).
  EXPECT_NE(v.find("gt_lo = static_cast<long long>(k) + 1;"), std::string::npos) << v;
  EXPECT_NE(v.find("gt_hi = static_cast<long long>(n) - 1;"), std::string::npos) << v;
  EXPECT_EQ(v.find("const float* __restrict__ A"), std::string::npos) << "A is written\n" << v;

  // The element the output updates (read as `M[i * N + k] / ...`) stays a plain load; the pivot
  // M[k * N + k] (a guard with an early return and a macro) goes on the read-only path.
  naive::NaiveKernel g = analyse_spelling("gauss_col");
  EXPECT_EQ(allowed(g, "M"), (std::vector<Cache>{Cache::Global, Cache::ReadOnly}));
  naive::Choice gc;
  gc.block_x = 64, gc.cache["M"] = Cache::ReadOnly;
  const std::string gv = naive::emit_variant(g, gc);
  EXPECT_NE(gv.find("M[i * N + k] = M[i * N + k] / (gt_apart"), std::string::npos) << gv;

  // Without a bounds check that keeps them apart, or through a local, it is said why.
  const std::string through_local = R"(
__global__ void lu2(float *A, int n, int k) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  int row = k * n;
  if (i > k && j > k && i < n && j < n) A[i * n + j] = A[i * n + j] - A[row + j];
})";
  naive::NaiveKernel l2 = naive::analyse_naive(through_local, "lu2", "lu2.cu");
  const auto o2 = naive::array_options(l2);
  const auto a2 = std::find_if(o2.begin(), o2.end(),
                               [](const naive::ArrayOptions& o) { return o.array == "A"; });
  ASSERT_NE(a2, o2.end());
  EXPECT_EQ(a2->allowed, (std::vector<Cache>{Cache::Global}));
  auto has = [&](const std::string& what) {
    return std::any_of(a2->reasons.begin(), a2->reasons.end(),
                       [&](const std::string& r) { return r.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(
      has("not read-only at line 6: the subscript uses the local 'row' (write the "
          "scalars it stands for in the subscript)"))
      << ::testing::PrintToString(a2->reasons);
  EXPECT_TRUE(has("written by the kernel: never on the read-only path or staged"));
}

TEST(NaiveSpellings, AnArrayElementALoopAddsToIsItsAccumulator) {
  naive::NaiveKernel k = analyse_spelling("atax_acc");
  const naive::SplitOption sp = naive::split_loop(k);
  EXPECT_GE(sp.loop, 0) << sp.reason << "\n" << all_rewrites(k);
  EXPECT_TRUE(says(k, "line 6: loop adds to tmp[i]")) << all_rewrites(k);
  EXPECT_TRUE(says(k, "'j' is declared before its loop(s)")) << all_rewrites(k);
  // mm_acc's 2-D loop is not split (enough threads): it stays as written, c kept in registers.
  naive::NaiveKernel acc = analyse("mm_acc");
  EXPECT_TRUE(acc.rewrites.empty()) << all_rewrites(acc);
  EXPECT_EQ(allowed(acc, "c"), (std::vector<Cache>{Cache::Global, Cache::Registers}));
}

TEST(NaiveSpellings, WhatCannotBeRewrittenIsSaidWithItsLineAndTheFix) {
  naive::NaiveKernel k = analyse_spelling("counter_after");
  EXPECT_EQ(k.loops, 0);
  ASSERT_TRUE(says(k,
                   "line 5: 'k' is declared before its loop(s) and not read as their counter: "
                   "it is used outside its loops (line 8)"))
      << all_rewrites(k);
  EXPECT_TRUE(says(k, "Fix: declare it in the loop header (`for (int k = ...`)"));
  // The job says it too, wherever it is tuned.
  Job job = tuner::load_tuning_job(kSpellings / "counter_after.json");
  EXPECT_TRUE(std::any_of(job.notes.begin(), job.notes.end(), [](const std::string& n) {
    return n.rfind("counter_after.cu line 5: 'k'", 0) == 0;
  }));
  // Nothing of the shipped kernels is rewritten: their variants are as before.
  for (const char* name : {"mm", "mv", "tmv", "outer", "transpose", "conv2d", "jacobi", "conv1d",
                           "reduction", "mm2d", "mm_acc"})
    EXPECT_TRUE(analyse(name).rewrites.empty()) << name << ": " << all_rewrites(analyse(name));
}

Case spelling(std::string kernel, std::vector<std::int64_t> size, size_t most = 0) {
  Case c{std::move(kernel), std::move(size), false, most};
  c.name = c.kernel;
  c.dir = kSpellings;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Spellings, NaiveVariants,
    ::testing::Values(spelling("gemm_counter", {37}, 120),
                      spelling("shared_counter", {37, 29}, 160),
                      spelling("conv2d_assign", {23, 19}, 96), spelling("atax_acc", {37, 29}, 160),
                      spelling("counter_after", {37, 29}), spelling("early_return", {37, 29}),
                      spelling("init_sum", {37, 29}, 200), spelling("while_loop", {37, 29}, 160),
                      spelling("conv3d_plane", {9, 23, 19}, 120),
                      spelling("heat3d_plane", {29}, 120), spelling("tri_mv", {37}, 160),
                      spelling("tri_lower", {37}, 160), spelling("trmm", {37, 29}, 160),
                      spelling("lu_step", {37}, 160), spelling("gauss_col", {37}, 60),
                      spelling("syrk", {37, 29}, 160)),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gputune
