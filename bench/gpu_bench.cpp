// GPU figures (needs a CUDA device): end-to-end variants/s of `gputune run` on the matmul example,
// and the tuned matmul's GFLOP/s next to cuBLAS SGEMM (fp32, pedantic math: no tensor cores) at
// 4096^3. cuBLAS is loaded at run time like the driver. Usage: gpu_bench [N]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "baselines.h"
#include "cuda/driver.h"
#include "tuner/measure/device_info.h"
#include "tuner/measure/measure.h"
#include "tuner/run/pipeline.h"

using namespace gputune;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::stoi(argv[1]) : 4096;
  const auto& d = cuda::Driver::instance();
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
  cuda::PrimaryContext ctx(0);
  double cublas = bench::Cublas().sgemm_ms(n, 20);
  auto& b = rep.best[0];
  std::printf("matmul %d^3: gputune best %.3f ms = %.0f GFLOP/s  %s\n", n, b.time_ms,
              flops / b.time_ms / 1e6, b.params_json.c_str());
  std::printf("matmul %d^3: cuBLAS SGEMM (pedantic fp32) %.3f ms = %.0f GFLOP/s\n", n, cublas,
              flops / cublas / 1e6);
  std::printf("ratio gputune / cuBLAS: %.2f\n", cublas / b.time_ms);
  std::filesystem::remove_all(dir);
  return 0;
}
