// Issue #4's GPU figures (needs a CUDA device): for each naive kernel of configs/naive at its job's
// size (4096 x 4096, vectors 16M), the naive kernel as written (16 x 16 threads, 256 in 1-D), the
// best generated variant gputune finds (the job as `gputune run` tunes it: model_guided within
// the budget, every variant verified against the job's reference), the speedup, and for mm, mv,
// tmv and transpose the ratio to cuBLAS SGEMM/SGEMV and to a device-to-device copy. Prints a
// markdown table. Usage: naive_gpu_bench [--budget N] [--keep DIR] [JOB.json ...] (default: the
// kernels the issue names; mm through configs/naive/mm_sgemm.json, conv2d through
// conv2d_bench.json). --keep DIR keeps the naive-as-written jobs and each run's database there
// (`gputune export --t4 --db DIR/K.db` then feeds `gputune replay`). Relative job paths are from
// the working folder. SIGINT or SIGTERM (bench/on_device.sh's step limit) stops the run in hand as
// `gputune run` stops (what it measured stays stored, its best so far is provisional), starts no
// other job, prints the table of what was measured, and exits 5.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "baselines.h"
#include "cuda/driver.h"
#include "tuner/common/stop_signals.h"
#include "tuner/common/tuning_job.h"
#include "tuner/measure/device_info.h"
#include "tuner/run/pipeline.h"

using namespace gputune;
namespace fs = std::filesystem;

namespace {

const fs::path kNaive = fs::path(GPUTUNE_SOURCE_DIR) / "configs" / "naive";

/// `path` of a job field as the job loader resolves it (relative to the job's folder), made
/// absolute, so that it still names the same file from a job written into another folder.
std::string from_job_folder(const fs::path& job_file, const std::string& path) {
  const fs::path p(path);
  return (p.is_absolute() ? p : fs::absolute(job_file).parent_path() / p)
      .lexically_normal()
      .string();
}

/// The naive job's kernel as written, as a plain T1 job over one block shape: GPUTune.Naive
/// dropped, LocalSize block_size_x/y, brute force over that single configuration. The job is
/// written into `dir`, so every path the loader resolves against the job's folder (KernelFile,
/// the BinaryRaw DataSources) is written absolute, resolved against `job_file`'s folder.
fs::path naive_as_written(const fs::path& job_file, const fs::path& dir) {
  std::ifstream in(job_file);
  nlohmann::json j = nlohmann::json::parse(in);
  auto& spec = j["KernelSpecification"];
  spec["KernelFile"] = from_job_folder(job_file, spec["KernelFile"].get<std::string>());
  for (const char* list : {"Arguments", "ReferenceArguments"})
    if (spec.contains(list) && spec[list].is_array())
      for (auto& a : spec[list])
        if (a.is_object() && a.contains("DataSource") && a["DataSource"].is_string())
          a["DataSource"] = from_job_folder(job_file, a["DataSource"].get<std::string>());
  const bool two_d = spec["GlobalSize"].value("Y", "1") != "1";
  spec["LocalSize"] = {{"X", "block_size_x"}, {"Y", "block_size_y"}, {"Z", "1"}};
  auto param = [](const char* name, int v) {
    return nlohmann::json{
        {"Name", name}, {"Type", "int"}, {"Values", "[" + std::to_string(v) + "]"}, {"Default", v}};
  };
  j["ConfigurationSpace"] = {
      {"TuningParameters",
       {param("block_size_x", two_d ? 16 : 256), param("block_size_y", two_d ? 16 : 1)}}};
  j["General"]["BenchmarkName"] =
      j["General"].value("BenchmarkName", job_file.stem().string()) + "_as_written";
  auto& g = j["GPUTune"];
  g.erase("Naive");
  g.erase("Budget");
  g["Search"] = {{"Strategy", "brute_force"}};
  const fs::path out = dir / ("naive-" + job_file.filename().string());
  std::ofstream(out) << j.dump(2);
  return out;
}

struct Row {
  std::string kernel, context;
  double naive_ms = 0, best_ms = 0;
  std::optional<double> best_gbps, best_gflops;
  std::string best_params;
  std::size_t measured = 0, space = 0;
};

std::optional<tuner::BestRow> tune(const Job& job, const fs::path& dir, const std::string& tag,
                                   tuner::RunReport* report = nullptr) {
  tuner::RunOptions opt;
  opt.db_path = (dir / (tag + ".db")).string();
  opt.cache_dir = dir / "cache";
  opt.should_stop = [] { return tuner::stop_requested(); };
  tuner::RunReport rep = tuner::run_job(job, opt);
  if (report) *report = rep;
  if (rep.best.empty()) {
    std::fprintf(stderr, "naive_gpu_bench: %s: no correct variant: %s\n", tag.c_str(),
                 rep.message.c_str());
    return std::nullopt;
  }
  return rep.best.front();
}

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts (the compile pool's inherit the blocked mask).
  tuner::watch_stop_signals(
      "\nnaive_gpu_bench: stopping the run in hand (what it measured stays stored); no further "
      "job starts (again to quit now)\n");
  std::optional<std::uint64_t> budget;
  std::vector<fs::path> jobs;
  fs::path keep;  // --keep DIR: the naive-as-written jobs and every run's database stay there
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--budget" && i + 1 < argc)
      budget = std::stoull(argv[++i]);
    else if (a == "--keep" && i + 1 < argc)
      keep = fs::absolute(argv[++i]);
    else
      jobs.push_back(fs::absolute(a).lexically_normal());  // as given, from this folder
  }
  if (jobs.empty())
    for (const char* k : {"mm_sgemm", "mv", "tmv", "transpose", "outer", "conv2d_bench", "jacobi",
                          "reduction", "conv1d"})
      jobs.push_back(kNaive / (std::string(k) + ".json"));
  // Every job and its naive-as-written twin are read first: a bad job fails before any timing.
  const fs::path dir = !keep.empty()
                           ? keep
                           : fs::temp_directory_path() /
                                 ("gputune-naive-bench-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  std::vector<std::pair<Job, Job>> loaded;
  for (const fs::path& file : jobs) {
    Job job = tuner::load_tuning_job(file);
    if (budget) job.budget.max_configurations = *budget;
    job.contexts.resize(1);
    Job plain = tuner::load_tuning_job(naive_as_written(file, dir));
    plain.contexts.resize(1);
    std::fprintf(stderr, "naive_gpu_bench: %s: kernel %s, context %s, naive kernel %s\n",
                 file.filename().c_str(), job.kernel_name.c_str(),
                 job.contexts.front().name.c_str(), plain.kernel_file.filename().c_str());
    loaded.emplace_back(std::move(job), std::move(plain));
  }
  const auto& d = cuda::Driver::instance();
  if (!d.available()) {
    std::printf("naive_gpu_bench: no CUDA device (%s); %zu jobs read, nothing measured\n",
                d.unavailable_reason().c_str(), loaded.size());
    if (keep.empty()) fs::remove_all(dir);
    return 3;
  }
  const auto info = tuner::query_device(0);
  std::printf("device: %s (%s, %d SMs)\n\n", info.name.c_str(), info.limits.arch().c_str(),
              info.limits.sm_count);

  std::vector<Row> rows;
  for (auto& [job, plain] : loaded) {
    if (tuner::stop_requested()) break;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string tag = job.file.stem().string();
    Row r;
    r.kernel = job.kernel_name;
    r.context = job.contexts.front().name;
    const auto naive = tune(plain, dir, "naive-" + tag);
    tuner::RunReport rep;
    const auto best = tune(job, dir, tag, &rep);
    if (!naive || !best) continue;
    r.naive_ms = naive->time_ms;
    r.best_ms = best->time_ms;
    r.best_gbps = best->gbps;
    r.best_gflops = best->gflops;
    r.best_params = best->params_json + (best->provisional ? " (provisional: stopped)" : "");
    r.measured = rep.correct + rep.failed;
    r.space = rep.space_size;
    std::fprintf(stderr, "naive_gpu_bench: %s done in %.0f s\n", tag.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    rows.push_back(r);
  }

  // Reference points, at the kernels' sizes (square: 4096 from the jobs' first context).
  cuda::PrimaryContext ctx(0);
  const int n = 4096;
  const size_t matrix_bytes = static_cast<size_t>(n) * n * 4;
  const double copy = bench::copy_ms(matrix_bytes, 50);
  const double copy_gbps = 2.0 * static_cast<double>(matrix_bytes) / copy / 1e6;
  std::optional<double> sgemm, sgemv, sgemv_t;
  std::string cublas_note;
  try {
    bench::Cublas blas;
    sgemm = blas.sgemm_ms(n, 20);
    sgemv = blas.sgemv_ms(n, n, false, 50);
    sgemv_t = blas.sgemv_ms(n, n, true, 50);
  } catch (const std::exception& e) {
    cublas_note = e.what();
  }
  std::printf("device-to-device copy of %zu MiB: %.4f ms = %.0f GB/s (read + write)\n",
              matrix_bytes >> 20, copy, copy_gbps);
  if (sgemm)
    std::printf("cuBLAS SGEMM %d^3 (pedantic fp32): %.3f ms = %.0f GFLOP/s\n", n, *sgemm,
                2.0 * n * n * static_cast<double>(n) / *sgemm / 1e6);
  if (sgemv) std::printf("cuBLAS SGEMV %dx%d (mv, A x): %.4f ms\n", n, n, *sgemv);
  if (sgemv_t) std::printf("cuBLAS SGEMV %dx%d (tmv, A^T x): %.4f ms\n", n, n, *sgemv_t);
  if (!cublas_note.empty()) std::printf("cuBLAS: %s\n", cublas_note.c_str());

  std::printf(
      "\n| kernel | size | naive ms | best ms | speedup | best GB/s | best GFLOP/s | vs cuBLAS "
      "| vs copy | measured / space | best configuration |\n|---|---|---|---|---|---|---|---|---|"
      "---|---|\n");
  for (const Row& r : rows) {
    std::string blas = "", vs_copy = "";
    if (r.kernel == "mm" && sgemm) blas = fmt(*sgemm / r.best_ms, "%.2f") + " (SGEMM)";
    if (r.kernel == "mv" && sgemv) blas = fmt(*sgemv / r.best_ms, "%.2f") + " (SGEMV)";
    if (r.kernel == "tmv" && sgemv_t) blas = fmt(*sgemv_t / r.best_ms, "%.2f") + " (SGEMV T)";
    if ((r.kernel == "mv" || r.kernel == "tmv" || r.kernel == "transpose") && r.best_gbps)
      vs_copy = fmt(*r.best_gbps / copy_gbps, "%.2f");
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %zu / %zu | `%s` |\n",
                r.kernel.c_str(), r.context.c_str(), fmt(r.naive_ms, "%.4f").c_str(),
                fmt(r.best_ms, "%.4f").c_str(), fmt(r.naive_ms / r.best_ms, "%.1fx").c_str(),
                r.best_gbps ? fmt(*r.best_gbps, "%.0f").c_str() : "",
                r.best_gflops ? fmt(*r.best_gflops, "%.0f").c_str() : "", blas.c_str(),
                vs_copy.c_str(), r.measured, r.space, r.best_params.c_str());
  }
  if (keep.empty()) fs::remove_all(dir);
  if (tuner::stop_requested()) {
    std::printf("\nstopped by a signal after %zu of %zu kernels\n", rows.size(), jobs.size());
    return tuner::kExitInterrupted;
  }
  return rows.size() == jobs.size() ? 0 : 4;
}
