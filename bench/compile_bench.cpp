// Compile throughput: variants per second with 1 and N NVRTC workers, cold (no cache) and cached,
// on the matmul example's space. Usage: compile_bench [COUNT] [ARCH] [THREADS]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "cuda/nvrtc.h"
#include "variants/instantiate.h"
#include "variants/space.h"

using namespace gputune;

int main(int argc, char** argv) {
  size_t count = argc > 1 ? std::stoul(argv[1]) : 48;
  std::string arch = argc > 2 ? argv[2] : "sm_90";
  int n = argc > 3 ? std::stoi(argv[3]) : cuda::default_compile_threads();
  Job job = load_job(std::string(GPUTUNE_SOURCE_DIR) + "/configs/examples/matmul.json");
  std::string source = load_kernel_source(job);
  Space space = build_space(job);
  std::vector<Variant> vs;
  for (size_t i = 0; i < space.size() && vs.size() < count;
       i += std::max<size_t>(1, space.size() / count)) {
    Variant v;
    v.config = space.config(i);
    v.kernel_name = job.kernel_name;
    v.source = source;
    v.options = compile_options(job, v.config);
    vs.push_back(std::move(v));
  }
  auto dir = std::filesystem::temp_directory_path() /
             ("gputune-compile-bench-" + std::to_string(std::random_device{}()));
  auto time = [&](int threads, const cuda::CubinCache& cache) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = cuda::compile_all(vs, arch, cache, threads);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t ok = 0;
    for (auto& c : r) ok += c.ok;
    if (ok != vs.size()) std::fprintf(stderr, "warning: %zu of %zu compiled\n", ok, vs.size());
    return s;
  };
  std::printf("compile throughput: %zu matmul variants for %s, NVRTC %s, %u hardware threads\n",
              vs.size(), arch.c_str(), cuda::nvrtc_version().c_str(),
              std::thread::hardware_concurrency());
  std::printf("%-22s %8s %10s %12s\n", "mode", "threads", "seconds", "variants/s");
  cuda::CubinCache none{std::filesystem::path()};
  for (int t : {1, n}) {
    double s = time(t, none);
    std::printf("%-22s %8d %10.3f %12.1f\n", "cold (no cache)", t, s,
                static_cast<double>(vs.size()) / s);
  }
  cuda::CubinCache cache(dir);
  time(n, cache);  // fill
  for (int t : {1, n}) {
    double s = time(t, cache);
    std::printf("%-22s %8d %10.3f %12.1f\n", "cached", t, s, static_cast<double>(vs.size()) / s);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
