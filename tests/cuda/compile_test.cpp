#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "test_util.h"
#include "tuner/model/predict.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {
namespace {

Variant variant(const std::string& body, std::vector<std::string> opts = {}) {
  Variant v;
  v.kernel_name = "k";
  v.source = "extern \"C\" __global__ void k(float* p) { " + body + " }";
  v.options = std::move(opts);
  return v;
}

TEST(Compile, ProducesACubinAndTheLoweredName) {
  auto c = cuda::compile_variant(variant("p[threadIdx.x] = VALUE;", {"-DVALUE=3.0f"}), "sm_90");
  ASSERT_TRUE(c.ok) << c.log;
  EXPECT_EQ(c.cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(c.lowered_name, "k");
  EXPECT_EQ(c.cubin_hash.size(), 64u);
  EXPECT_NE(c.log.find("Used"), std::string::npos) << "ptxas -v output expected in the log";
}

TEST(Compile, FailureIsAResultWithTheLog) {
  auto c = cuda::compile_variant(variant("p[threadIdx.x] = undefined_thing;"), "sm_90");
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(c.cubin.empty());
  EXPECT_NE(c.log.find("undefined_thing"), std::string::npos) << c.log;
}

TEST(Compile, DefinesChangeTheCodeAndTheCacheKey) {
  auto a = variant("p[threadIdx.x] = VALUE;", {"-DVALUE=1.0f"});
  auto b = variant("p[threadIdx.x] = VALUE;", {"-DVALUE=2.0f"});
  EXPECT_NE(cuda::CubinCache::key(a, "sm_90"), cuda::CubinCache::key(b, "sm_90"));
  EXPECT_NE(cuda::CubinCache::key(a, "sm_90"), cuda::CubinCache::key(a, "sm_80"));
  EXPECT_EQ(cuda::CubinCache::key(a, "sm_90"), cuda::CubinCache::key(a, "sm_90"));
  EXPECT_NE(cuda::compile_variant(a, "sm_90").cubin_hash,
            cuda::compile_variant(b, "sm_90").cubin_hash);
}

TEST(Compile, CacheServesIdenticalCubinsAndSurvivesCorruption) {
  test::TempDir dir;
  cuda::CubinCache cache(dir.path());
  std::vector<Variant> vs;
  for (int i = 0; i < 6; ++i)
    vs.push_back(variant("p[threadIdx.x] = VALUE;", {"-DVALUE=" + std::to_string(i) + ".0f"}));
  vs.push_back(variant("this does not compile;"));
  std::atomic<int> callbacks{0}, below{0};
  const int caller = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  auto cold = cuda::compile_all(vs, "sm_90", cache, 3, [&](size_t, const cuda::CompiledVariant&) {
    ++callbacks;
    // every compile ran on a worker at the compile nice (10 by default), never on the caller
    if (getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())) == std::min(19, caller + 10))
      ++below;
  });
  EXPECT_EQ(callbacks.load(), 7);
  EXPECT_EQ(below.load(), 7);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), caller);
  auto warm = cuda::compile_all(vs, "sm_90", cache, 2);
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(cold[i].ok);
    EXPECT_FALSE(cold[i].cached);
    EXPECT_TRUE(warm[i].cached);
    EXPECT_EQ(warm[i].cubin, cold[i].cubin);
    EXPECT_EQ(warm[i].lowered_name, "k");
  }
  EXPECT_FALSE(warm[6].ok);  // failures are not cached: they are compiled (and fail) again
  EXPECT_FALSE(warm[6].cached);
  // A corrupt entry is ignored and recompiled.
  auto key = cuda::CubinCache::key(vs[0], "sm_90");
  test::write_file(dir.path() / key.substr(0, 2) / (key + ".cubin"), "garbage");
  EXPECT_FALSE(cache.get(key).has_value());
  auto again = cuda::compile_all({vs[0]}, "sm_90", cache, 1);
  EXPECT_TRUE(again[0].ok);
  EXPECT_FALSE(again[0].cached);
  EXPECT_TRUE(cache.get(key).has_value());
}

// A header next to the kernel is found whatever the working directory (compile_options puts the
// kernel's folder first, as nvcc does), and editing it, or one it includes, is a new cache key:
// the cache never serves a cubin built from an old header.
TEST(Compile, HeadersBesideTheKernelAreFoundAndEditingOneCompilesAgain) {
  test::TempDir dir;
  test::write_file(dir / "k.cu", R"(#include "scale.h"
extern "C" __global__ void k(float* p) { p[threadIdx.x] = SCALE; })");
  test::write_file(dir / "scale.h", "#include \"inner.h\"\n#define SCALE (2.0f * INNER)\n");
  test::write_file(dir / "inner.h", "#define INNER 1.0f\n");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  ASSERT_NE(std::filesystem::current_path(), dir.path());
  Job job = load_job(dir / "job.json");
  Space space = build_space(job);
  Variant v = instantiate(job, test::read_file(dir / "k.cu"), space.config(0), job.contexts[0]);
  EXPECT_EQ(v.options.front(),
            "-I" + std::filesystem::absolute(dir.path()).lexically_normal().string());
  cuda::CubinCache cache(dir / "cache");
  auto first = cuda::compile_all({v}, "sm_90", cache, 1);
  ASSERT_TRUE(first[0].ok) << first[0].log;
  EXPECT_TRUE(cuda::compile_all({v}, "sm_90", cache, 1)[0].cached);
  const std::string before = cuda::CubinCache::key(v, "sm_90");
  test::write_file(dir / "inner.h", "#define INNER 10.0f\n");  // two levels down
  EXPECT_NE(cuda::CubinCache::key(v, "sm_90"), before);
  auto edited = cuda::compile_all({v}, "sm_90", cache, 1);
  ASSERT_TRUE(edited[0].ok) << edited[0].log;
  EXPECT_FALSE(edited[0].cached);
  EXPECT_NE(edited[0].cubin_hash, first[0].cubin_hash);
  // A header that goes missing changes the key too (and the compile fails, as it should).
  const std::string with_inner = cuda::CubinCache::key(v, "sm_90");
  std::filesystem::remove(dir / "inner.h");
  EXPECT_NE(cuda::CubinCache::key(v, "sm_90"), with_inner);
  EXPECT_FALSE(cuda::compile_all({v}, "sm_90", cache, 1)[0].ok);
}

TEST(Compile, TheSameKernelAndHeadersElsewhereFindTheirCubins) {
  // A project copied to another folder, or a job the daemon's worker writes out in a folder of its
  // own: the key holds the headers' content, not where they lie.
  test::TempDir a, b;
  for (const auto* d : {&a, &b}) {
    std::filesystem::create_directories(d->path() / "src" / "common");
    test::write_file(*d / "src/k.cu", R"(#include "common/scale.h"
extern "C" __global__ void k(float* p) { p[threadIdx.x] = SCALE; })");
    test::write_file(*d / "src/common/scale.h", "#define SCALE 2.0f\n");
    test::write_file(*d / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "src/k.cu",
      "CompilerOptions": ["-I", "src/common"],
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  }
  auto variant_in = [](const test::TempDir& d) {
    Job job = load_job(d / "job.json");
    return instantiate(job, test::read_file(d / "src/k.cu"), build_space(job).config(0),
                       job.contexts[0]);
  };
  Variant va = variant_in(a), vb = variant_in(b);
  ASSERT_NE(va.options.front(), vb.options.front());
  EXPECT_EQ(va.kernel_folder, va.options.front().substr(2));
  EXPECT_EQ(cuda::CubinCache::key(va, "sm_90"), cuda::CubinCache::key(vb, "sm_90"));
  cuda::CubinCache cache(a / "cache");
  ASSERT_TRUE(cuda::compile_all({va}, "sm_90", cache, 1)[0].ok);
  EXPECT_TRUE(cuda::compile_all({vb}, "sm_90", cache, 1)[0].cached);
  auto traffic_key = [](const Variant& v) {
    pruner::TrafficInput in;
    in.source = v.source, in.kernel_name = v.kernel_name, in.options = v.options;
    in.kernel_folder = v.kernel_folder;
    return TrafficCache::key(in);
  };
  EXPECT_EQ(traffic_key(va), traffic_key(vb));
  // Other options keep their text: a folder named by -I may hold headers included with <>.
  EXPECT_EQ(cuda::option_for_key("-I" + va.kernel_folder, va.kernel_folder), "-I<kernel folder>");
  EXPECT_EQ(cuda::option_for_key("-Isrc/common", va.kernel_folder), "-Isrc/common");
  EXPECT_EQ(cuda::option_for_key("-I" + va.kernel_folder + "/x", va.kernel_folder),
            "-I" + va.kernel_folder + "/x");
  // Different content is a different key, wherever it lies.
  test::write_file(b / "src/common/scale.h", "#define SCALE 3.0f\n");
  EXPECT_NE(cuda::CubinCache::key(va, "sm_90"), cuda::CubinCache::key(vb, "sm_90"));
  EXPECT_NE(traffic_key(va), traffic_key(vb));
}

TEST(Compile, AngleBracketHeadersInTheJobsOwnFoldersCountTheToolkitsDoNot) {
  // `#include <mylib/tile.cuh>` through `-Iinclude`, as larger projects write it: editing the
  // header compiles again. The toolkit's headers (through -I/usr/local/cuda/include, or NVRTC's
  // own) are not read.
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "include" / "mylib");
  test::write_file(dir / "include/mylib/tile.cuh", "#include \"detail.cuh\"\n#define TILE 4\n");
  test::write_file(dir / "include/mylib/detail.cuh", "#define DETAIL 1\n");
  const std::string toolkit = "/usr/local/cuda/include";
  Variant v = variant("p[threadIdx.x] = TILE + DETAIL;",
                      {"-I" + (dir / "include").string(), "-I" + toolkit});
  v.source =
      "#include <mylib/tile.cuh>\n#include <cuda_fp16.h>\n#include \"cuda_fp16.h\"\n" + v.source;
  const auto own = cuda::own_header_files(v.source, v.options);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0], dir / "include/mylib/tile.cuh");
  EXPECT_EQ(own[1], dir / "include/mylib/detail.cuh");
  cuda::CubinCache cache(dir / "cache");
  auto first = cuda::compile_all({v}, "sm_90", cache, 1);
  ASSERT_TRUE(first[0].ok) << first[0].log;
  const std::string before = cuda::CubinCache::key(v, "sm_90");
  test::write_file(dir / "include/mylib/detail.cuh", "#define DETAIL 2\n");
  EXPECT_NE(cuda::CubinCache::key(v, "sm_90"), before);
  auto edited = cuda::compile_all({v}, "sm_90", cache, 1);
  ASSERT_TRUE(edited[0].ok) << edited[0].log;
  EXPECT_FALSE(edited[0].cached);
  EXPECT_NE(edited[0].cubin_hash, first[0].cubin_hash);
  // An angle-bracket name found in no folder of the job's own is the toolkit's: not missing.
  Variant only_toolkit = variant("p[0] = 1.0f;", {"-I" + toolkit});
  only_toolkit.source = "#include <cuda_fp16.h>\n#include <nowhere.h>\n" + only_toolkit.source;
  EXPECT_TRUE(cuda::own_header_files(only_toolkit.source, only_toolkit.options).empty());
  EXPECT_EQ(cuda::own_headers_digest(only_toolkit.source, only_toolkit.options), "");
}

TEST(Compile, DisabledCacheNeverStores) {
  cuda::CubinCache none{std::filesystem::path()};
  auto v = variant("p[0] = 1.0f;");
  auto r = cuda::compile_all({v, v}, "sm_90", none, 2);
  EXPECT_FALSE(r[0].cached);
  EXPECT_FALSE(r[1].cached);
  EXPECT_FALSE(none.get(r[0].key).has_value());
}

// A variant that cannot be built (make(i) throws) ends the compile: the error surfaces at once,
// not after every other variant of a large space has compiled.
TEST(Compile, AVariantThatCannotBeBuiltStopsTheCompileAtOnce) {
  cuda::CubinCache none{std::filesystem::path()};
  const Variant good = variant("p[0] = 1.0f;");
  std::atomic<int> made{0};
  auto make = [&](size_t i) {
    ++made;
    if (i == 1) throw std::runtime_error("variant 1 cannot be generated");
    return good;
  };
  try {
    (void)cuda::compile_all(200, make, "sm_90", none, 4);
    ADD_FAILURE() << "the error of make(1) was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "variant 1 cannot be generated");
  }
  // Each of the 4 workers finishes the variant in hand; none starts another.
  EXPECT_LE(made.load(), 8) << "variants built after the failure";
}

TEST(Compile, NvrtcVersionIsReported) {
  EXPECT_NE(cuda::nvrtc_version().find('.'), std::string::npos);
}

TEST(Compile, OneWorkerPerCoreAsFarAsMemoryHolds) {
  const long long gib = 1LL << 30;
  EXPECT_EQ(cuda::compile_threads_for(16, 128 * gib), 16);  // the lent GPU machine
  EXPECT_EQ(cuda::compile_threads_for(2, 24 * gib), 2);     // the development VM
  EXPECT_EQ(cuda::compile_threads_for(16, 1 * gib), 4);     // 256 MiB each
  EXPECT_EQ(cuda::compile_threads_for(16, 100LL << 20), 1);
  EXPECT_EQ(cuda::compile_threads_for(0, -1), 1);  // nothing known
  EXPECT_EQ(cuda::compile_threads_for(12, -1), 12);
  EXPECT_EQ(cuda::compile_threads_for(256, 1024 * gib), 64);
  int here = cuda::default_compile_threads();
  EXPECT_GE(here, 1);
  EXPECT_LE(here, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace gputune::tuner
