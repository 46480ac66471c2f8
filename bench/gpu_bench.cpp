// GPU figures (needs a CUDA device): end-to-end variants/s of `gputune run` on the matmul example,
// and the tuned matmul's GFLOP/s next to cuBLAS SGEMM (fp32, pedantic math: no tensor cores) at
// 4096^3. cuBLAS is loaded at run time like the driver. Usage: gpu_bench [N]
#include <cublas_v2.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "tuner/cuda_driver.h"
#include "tuner/measure.h"
#include "tuner/pipeline.h"

using namespace gputune;

namespace {

double cublas_sgemm_ms(int n, int reps) {
  void* lib = dlopen("libcublas.so.13", RTLD_NOW);
  if (!lib) lib = dlopen("libcublas.so", RTLD_NOW);
  if (!lib) throw std::runtime_error(std::string("cuBLAS not found: ") + dlerror());
  auto create = reinterpret_cast<decltype(&cublasCreate_v2)>(dlsym(lib, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<decltype(&cublasDestroy_v2)>(dlsym(lib, "cublasDestroy_v2"));
  auto math = reinterpret_cast<decltype(&cublasSetMathMode)>(dlsym(lib, "cublasSetMathMode"));
  auto sgemm = reinterpret_cast<decltype(&cublasSgemm_v2)>(dlsym(lib, "cublasSgemm_v2"));
  if (!create || !destroy || !math || !sgemm)
    throw std::runtime_error("cuBLAS lacks a needed symbol");
  const auto& d = tuner::Driver::instance();
  size_t bytes = static_cast<size_t>(n) * n * 4;
  std::vector<float> host(static_cast<size_t>(n) * n);
  std::mt19937 rng(1);
  for (auto& x : host) x = std::uniform_real_distribution<float>(0, 1)(rng);
  tuner::DeviceBuffer a(bytes), b(bytes), c(bytes);
  a.upload(host.data(), bytes);
  b.upload(host.data(), bytes);
  cublasHandle_t h;
  if (create(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  math(h, CUBLAS_PEDANTIC_MATH);
  float alpha = 1, beta = 0;
  auto run = [&] {
    sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, reinterpret_cast<float*>(a.get()), n,
          reinterpret_cast<float*>(b.get()), n, &beta, reinterpret_cast<float*>(c.get()), n);
  };
  for (int i = 0; i < 3; ++i) run();
  tuner::Event start, stop;
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    d.check(d.cuEventRecord(start.get(), nullptr), "cuEventRecord");
    run();
    d.check(d.cuEventRecord(stop.get(), nullptr), "cuEventRecord");
    d.check(d.cuEventSynchronize(stop.get()), "cuEventSynchronize");
    float ms;
    d.check(d.cuEventElapsedTime(&ms, start.get(), stop.get()), "cuEventElapsedTime");
    samples.push_back(ms);
  }
  destroy(h);
  return tuner::median(samples);
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::stoi(argv[1]) : 4096;
  const auto& d = tuner::Driver::instance();
  if (!d.available()) {
    std::printf("gpu_bench: no CUDA device (%s); nothing measured\n",
                d.unavailable_reason().c_str());
    return 3;
  }
  auto info = tuner::query_device(0);
  Job job = load_job(std::string(GPUTUNE_SOURCE_DIR) + "/configs/examples/matmul.json");
  job.contexts = {{std::to_string(n), List{Value(n), Value(1), Value(1)}, {}}};
  auto dir = std::filesystem::temp_directory_path() /
             ("gputune-gpu-bench-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  tuner::RunOptions opt;
  opt.db_path = (dir / "bench.db").string();
  opt.cache_dir = dir / "cache";
  auto t0 = std::chrono::steady_clock::now();
  auto rep = tuner::run_job(job, opt);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double flops = 2.0 * n * n * static_cast<double>(n);
  std::printf("device: %s (%s, %d SMs)\n", info.name.c_str(), info.limits.arch().c_str(),
              info.limits.sm_count);
  std::printf(
      "end to end (cold cache): %zu variants in %.1f s = %.2f variants/s (%zu correct, %zu "
      "failed)\n",
      rep.planned, wall, static_cast<double>(rep.planned) / wall, rep.correct, rep.failed);
  if (rep.best.empty()) {
    std::printf("no correct matmul variant: %s\n", rep.message.c_str());
    return 4;
  }
  tuner::PrimaryContext ctx(0);
  double cublas = cublas_sgemm_ms(n, 20);
  auto& b = rep.best[0];
  std::printf("matmul %d^3: gputune best %.3f ms = %.0f GFLOP/s  %s\n", n, b.time_ms,
              flops / b.time_ms / 1e6, b.params_json.c_str());
  std::printf("matmul %d^3: cuBLAS SGEMM (pedantic fp32) %.3f ms = %.0f GFLOP/s\n", n, cublas,
              flops / cublas / 1e6);
  std::printf("ratio gputune / cuBLAS: %.2f\n", cublas / b.time_ms);
  std::filesystem::remove_all(dir);
  return 0;
}
