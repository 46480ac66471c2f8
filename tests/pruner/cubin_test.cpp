#include "pruner/cubin.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>

#include "cuda/nvrtc.h"
#include "test_util.h"

namespace gputune::pruner {
namespace {

const char* kKernels = R"(
extern "C" __global__ void with_smem(const float* a, float* c, int n) {
  __shared__ float s[SMEM];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = a[i];
  __syncthreads();
  if (i < n) c[i] = s[SMEM - 1 - threadIdx.x];
}
extern "C" __global__ void __launch_bounds__(128) bounded(float* c, int n) {
  float loc[64];
  for (int k = 0; k < 64; k++) loc[k] = c[k * n + threadIdx.x];
  float s = 0;
  for (int k = 0; k < n; k++) s += loc[(k * 7) % 64];
  c[threadIdx.x] = s;
}
extern "C" __global__ void plain(float* c) { c[threadIdx.x] *= 2.0f; }
extern "C" __global__ void named_barriers(float* c) {
  c[threadIdx.x] = 1.0f;
  asm volatile("bar.sync 5, 64;");
  c[threadIdx.x + 1] = 2.0f;
  __syncthreads();
}
template <int N> __global__ void templated(float* c) { c[threadIdx.x] += N; }
struct Three { float a, b, c; };
extern "C" __global__ void mixed(float* c, double d, int unused, char ch, float4 v, Three t,
                                 short s, const float* __restrict__ in) {
  c[0] = d + ch + v.x + t.b + s + in[0];
}
template __global__ void templated<3>(float*);
)";

struct PtxasReport {
  int registers = -1, smem = 0, stack = -1, barriers = 0;
};

// Parses ptxas -v output for one entry function, independently of the code under test.
PtxasReport ptxas_report(const std::string& log, const std::string& kernel) {
  PtxasReport r;
  auto pos = log.find("Compiling entry function '" + kernel + "'");
  EXPECT_NE(pos, std::string::npos) << log;
  std::string part = log.substr(pos);
  auto next = part.find("Compiling entry function", 10);
  if (next != std::string::npos) part = part.substr(0, next);
  std::smatch m;
  if (std::regex_search(part, m, std::regex(R"(Used (\d+) registers)")))
    r.registers = std::stoi(m[1]);
  if (std::regex_search(part, m, std::regex(R"((\d+) bytes smem)"))) r.smem = std::stoi(m[1]);
  if (std::regex_search(part, m, std::regex(R"((\d+) bytes stack frame)")))
    r.stack = std::stoi(m[1]);
  if (std::regex_search(part, m, std::regex(R"(used (\d+) barriers)")))
    r.barriers = std::stoi(m[1]);
  return r;
}

cuda::CompiledVariant compile(const std::string& kernel, const std::string& arch, int smem = 256) {
  Variant v;
  v.kernel_name = kernel;
  v.source = kKernels;
  v.options = {"-DSMEM=" + std::to_string(smem)};
  auto c = cuda::compile_variant(v, arch);
  EXPECT_TRUE(c.ok) << c.log;
  return c;
}

class CubinVsPtxas : public ::testing::TestWithParam<std::tuple<std::string, std::string, int>> {};

TEST_P(CubinVsPtxas, ResourcesEqualWhatPtxasReports) {
  auto [kernel, arch, smem] = GetParam();
  auto c = compile(kernel, arch, smem);
  Resources r = read_cubin_resources(c.cubin, c.lowered_name);
  PtxasReport p = ptxas_report(c.log, c.lowered_name);
  EXPECT_EQ(r.registers, p.registers) << c.log;
  EXPECT_EQ(r.static_smem, p.smem) << c.log;
  EXPECT_EQ(r.local_bytes, p.stack) << c.log;
  EXPECT_EQ(r.barriers, p.barriers) << c.log;
}

INSTANTIATE_TEST_SUITE_P(Kernels, CubinVsPtxas,
                         ::testing::Values(std::make_tuple("with_smem", "sm_90", 256),
                                           std::make_tuple("with_smem", "sm_90", 100),
                                           std::make_tuple("with_smem", "sm_80", 1000),
                                           std::make_tuple("with_smem", "sm_75", 64),
                                           std::make_tuple("bounded", "sm_90", 256),
                                           std::make_tuple("bounded", "sm_86", 256),
                                           std::make_tuple("bounded", "sm_80", 256),
                                           std::make_tuple("plain", "sm_90", 256),
                                           std::make_tuple("plain", "sm_75", 256),
                                           std::make_tuple("named_barriers", "sm_90", 256),
                                           std::make_tuple("named_barriers", "sm_80", 256)));

// bar.sync 5 uses barriers 0 to 5: six, which on sm_90 hold 64 / 6 = 10 blocks per SM.
TEST(Cubin, NamedBarriersAreCounted) {
  auto c = compile("named_barriers", "sm_90");
  EXPECT_EQ(read_cubin_resources(c.cubin, "named_barriers").barriers, 6);
  auto p = compile("plain", "sm_90");
  EXPECT_EQ(read_cubin_resources(p.cubin, "plain").barriers, 0);
  auto s = compile("with_smem", "sm_90");
  EXPECT_EQ(read_cubin_resources(s.cubin, "with_smem").barriers, 1);
}

TEST(Cubin, LaunchBoundsAndReserve) {
  auto c = compile("bounded", "sm_90");
  Resources r = read_cubin_resources(c.cubin, "bounded");
  EXPECT_EQ(r.max_threads, 128);
  EXPECT_GE(r.local_bytes, 256);  // the 64-float local array lives in the stack frame
  auto s = compile("with_smem", "sm_90", 256);
  Resources rs = read_cubin_resources(s.cubin, "with_smem");
  EXPECT_EQ(rs.static_smem, 1024);
  EXPECT_EQ(rs.reserved_smem, 1024);  // sm_90 cubins carry the system reserve in the section
  EXPECT_EQ(rs.max_threads, 0);
  EXPECT_GT(rs.param_bytes, 0);
}

// Each parameter's size, in order, unused ones too: what the job's arguments are checked against.
TEST(Cubin, ParameterSizesInTheirOrder) {
  for (const char* arch : {"sm_90", "sm_80", "sm_75"}) {
    auto c = compile("mixed", arch);
    Resources r = read_cubin_resources(c.cubin, "mixed");
    EXPECT_EQ(r.param_sizes, (std::vector<int>{8, 8, 4, 1, 16, 12, 2, 8})) << arch;
    // c 0, d 8, unused 16, ch 20, v 32 (16-byte aligned), t 48, s 60, in 64 (8-byte aligned)
    EXPECT_EQ(r.param_bytes, 72) << arch;
  }
  auto p = compile("plain", "sm_90");
  EXPECT_EQ(read_cubin_resources(p.cubin, "plain").param_sizes, std::vector<int>{8});
}

TEST(Cubin, TemplatedKernelsAreFoundByTheirLoweredName) {
  auto c = compile("templated<3>", "sm_90");
  EXPECT_EQ(c.lowered_name, "_Z9templatedILi3EEvPf");
  Resources r = read_cubin_resources(c.cubin, c.lowered_name);
  EXPECT_GT(r.registers, 0);
}

TEST(Cubin, SpillsComeFromThePtxasLog) {
  auto c = compile("bounded", "sm_90");
  Resources r = read_cubin_resources(c.cubin, "bounded");
  EXPECT_EQ(r.spill_stores, -1);
  apply_ptxas_log(r, c.log, "bounded");
  EXPECT_EQ(r.spill_stores, 0);
  EXPECT_EQ(r.spill_loads, 0);
  Resources fake;
  apply_ptxas_log(fake,
                  "ptxas info    : Function properties for k\n    8 bytes stack frame, 12 bytes "
                  "spill stores, 16 bytes spill loads\n",
                  "k");
  EXPECT_EQ(fake.spill_stores, 12);
  EXPECT_EQ(fake.spill_loads, 16);
}

TEST(Cubin, RejectsWhatIsNotACubin) {
  EXPECT_THROW(read_cubin_resources("hello", "k"), CubinError);
  EXPECT_THROW(read_cubin_resources(std::string("\x7f"
                                                "ELF\x02\x01",
                                                6) +
                                        std::string(100, '\0'),
                                    "k"),
               CubinError);
  auto c = compile("plain", "sm_90");
  try {
    read_cubin_resources(c.cubin, "nope");
    FAIL();
  } catch (const CubinError& e) {
    EXPECT_NE(std::string(e.what()).find("plain"), std::string::npos) << e.what();
  }
  // Truncation anywhere must give an error, never a crash.
  for (size_t n : {size_t{64}, c.cubin.size() / 2, c.cubin.size() - 1}) {
    try {
      read_cubin_resources(c.cubin.substr(0, n), "plain");
    } catch (const CubinError&) {
    }
  }
}

// What the fuzzer found (tests/fuzz/corpus/cubin_fuzz keeps the inputs): offsets near 2^64 that
// wrapped around the bounds check, a symbol table naming a string table that does not exist, a
// .text section whose symbol was damaged; each is refused with CubinError, nothing else.
TEST(Cubin, DamagedCubinsTheFuzzerFoundAreRefused) {
  for (const char* name :
       {"df4f9f434c780ce92f77787a61dbe91847e74611", "11b215aaf1458007a5f27c22ea52d824d917a3f0",
        "e9f81859ab59f75e9610bfe8b7d56dec719fceb1"}) {
    std::ifstream in(test::source_dir() / "tests/fuzz/corpus/cubin_fuzz" / name, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    ASSERT_FALSE(bytes.empty()) << name;
    try {
      for (const std::string& k : cubin_kernels(bytes)) (void)read_cubin_resources(bytes, k);
      (void)read_cubin_resources(bytes, "k");
      ADD_FAILURE() << name << " was read";
    } catch (const CubinError& e) {
      EXPECT_EQ(std::string(e.what()).find("(it has: k)"), std::string::npos) << name << e.what();
    }
  }
  Resources r;  // counts beyond an int are not read (ptxas never writes them)
  apply_ptxas_log(r,
                  "ptxas info    : Function properties for k\n    0 bytes stack frame, "
                  "99999999999 bytes spill stores, 0 bytes spill loads\n",
                  "k");
  EXPECT_EQ(r.spill_stores, -1);
}

}  // namespace
}  // namespace gputune::pruner
