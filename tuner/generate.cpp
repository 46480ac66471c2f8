// Naive-kernel entry points of the tuner: see generate.h.
#include "tuner/generate.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "tuner/arguments.h"
#include "tuner/cpu_emulator.h"
#include "variants/instantiate.h"
#include "variants/space.h"

namespace gputune::tuner {

namespace fs = std::filesystem;

void prepare_naive(Job& job) {
  if (!job.naive) return;
  std::string source = load_kernel_source(job);
  try {
    auto k = std::make_shared<naive::NaiveKernel>(naive::analyse_naive(
        source, job.kernel_name, job.kernel_file.filename().string(), job.compiler_options));
    naive::apply_to_job(job, *k);
    job.naive_kernel = std::move(k);
  } catch (const naive::NaiveSourceError& e) {
    throw JobError(job.file.string(), "KernelSpecification.KernelName", e.what(),
                   "name a __global__ function of KernelFile, or fix the file so clang parses it");
  } catch (const naive::NaiveError& e) {
    job.naive_fallback = e.what();
    job.naive_threads = job.global_size;
    naive::apply_block_shape_only(job, job.global_size.y == "1" ? 1 : 2);
  }
}

Job load_tuning_job(const fs::path& file) {
  Job job = load_job(file);
  prepare_naive(job);
  return job;
}

namespace {

/// A host buffer whose last byte sits right before an inaccessible page: a variant that reads or
/// writes past the end of an array stops the check with a fault instead of passing silently.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(const std::vector<unsigned char>& data) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t bytes = (data.size() + 15) / 16 * 16;
    size_t pages = (bytes + page - 1) / page + 1;
    total_ = pages * page;
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed for an emulated buffer");
    base_ = static_cast<unsigned char*>(p);
    mprotect(base_ + (pages - 1) * page, page, PROT_NONE);
    ptr_ = base_ + (pages - 1) * page - bytes;
    if (!data.empty()) std::memcpy(ptr_, data.data(), data.size());
    size_ = data.size();
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { munmap(base_, total_); }
  void* data() const { return ptr_; }
  std::vector<unsigned char> contents() const { return {ptr_, ptr_ + size_}; }

 private:
  unsigned char* base_ = nullptr;
  unsigned char* ptr_ = nullptr;
  size_t total_ = 0, size_ = 0;
};

std::array<unsigned, 3> to_u3(const std::array<std::int64_t, 3>& a) {
  return {static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]), static_cast<unsigned>(a[2])};
}

/// Runs kernel i of the module on fresh copies of the arguments; returns the outputs by argument.
std::vector<std::vector<unsigned char>> run_once(const CpuModule& m, size_t i,
                                                 const std::vector<HostArgument>& args,
                                                 std::array<unsigned, 3> grid,
                                                 std::array<unsigned, 3> block,
                                                 unsigned long long* vector_loads = nullptr,
                                                 unsigned long long dynamic_smem = 0) {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<void*> ptrs(args.size());
  std::vector<void*> params(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].is_vector) {
      bufs.push_back(std::make_unique<GuardedBuffer>(args[a].data));
      ptrs[a] = bufs.back()->data();
      params[a] = &ptrs[a];
    } else {
      bufs.push_back(nullptr);
      params[a] = const_cast<unsigned char*>(args[a].data.data());
    }
  }
  LaunchStats st = m.launch(i, grid, block, params.data(), dynamic_smem);
  if (vector_loads) *vector_loads += st.vector_loads;
  std::vector<std::vector<unsigned char>> out(args.size());
  for (size_t a = 0; a < args.size(); ++a)
    if (bufs[a]) out[a] = bufs[a]->contents();
  return out;
}

}  // namespace

std::vector<std::string> check_on_cpu(const Job& job, const std::string& naive_source,
                                      const naive::NaiveKernel& k,
                                      const std::vector<naive::Choice>& variants,
                                      const ContextSpec& ctx, int jobs,
                                      unsigned long long* vector_loads) {
  if (vector_loads) *vector_loads = 0;
  std::vector<std::string> problems;
  std::vector<std::string> types;
  for (const naive::Param& p : k.params) types.push_back(p.type);
  if (job.arguments.size() != k.params.size())
    return {"the job lists " + std::to_string(job.arguments.size()) + " arguments, kernel '" +
            k.name + "' takes " + std::to_string(k.params.size())};
  std::vector<CpuKernel> kernels;
  kernels.push_back({naive_source, k.name, types});
  for (const naive::Choice& c : variants)
    kernels.push_back({naive::emit_variant(k, c), k.name, types});
  CpuModule m = CpuModule::build(kernels, jobs);
  std::vector<HostArgument> args = make_arguments(job, ctx);
  std::array<std::int64_t, 3> threads{};
  for (int d = 0; d < 3; ++d)
    threads[d] =
        eval_in_context(job, job.naive_threads[d], "KernelSpecification.GlobalSize", nullptr, ctx)
            .as_int();
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  std::array<unsigned, 3> nb{k.dims == 2 ? 16u : 64u, k.dims == 2 ? 4u : 1u, 1};
  std::array<std::int64_t, 3> ng{ceil_div(threads[0], nb[0]), ceil_div(threads[1], nb[1]),
                                 threads[2]};
  auto expected = run_once(m, 0, args, to_u3(ng), nb);
  const std::map<std::string, double> scalars = naive_scalars(job, k, ctx);
  for (size_t v = 0; v < variants.size(); ++v) {
    const naive::Choice& c = variants[v];
    int by = k.dims == 2 ? c.block_y : 1, my = k.dims == 2 ? c.merge_y : 1;
    std::array<std::int64_t, 3> g{ceil_div(threads[0], c.block_x * c.merge_x),
                                  ceil_div(threads[1], by * my), threads[2]};
    std::string label = naive::choice_label(k, c);
    try {
      const auto smem = static_cast<unsigned long long>(naive::dynamic_shared_bytes(k, c, scalars));
      const std::array<int, 2> block = naive::launch_block(k, c);
      auto got = run_once(m, v + 1, args, to_u3(g),
                          {static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]), 1},
                          vector_loads, smem);
      for (size_t a = 0; a < args.size(); ++a) {
        if (!args[a].is_vector || !k.params[a].written) continue;
        Comparison cmp =
            compare_output(args[a], got[a], expected[a], job.abs_tolerance, job.rel_tolerance);
        if (!cmp.ok) problems.push_back(label + ": " + cmp.describe(args[a].name));
      }
    } catch (const EmulatorError& e) {
      problems.push_back(label + ": " + e.what());
    } catch (const naive::NaiveError& e) {
      problems.push_back(label + ": " + e.what());
    }
  }
  return problems;
}

int generate(const GenerateOptions& o) {
  std::ifstream in(o.kernel_file);
  if (!in) {
    std::cerr << "gputune: cannot read " << o.kernel_file.string() << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  naive::NaiveKernel k;
  try {
    k = naive::analyse_naive(source, o.kernel, o.kernel_file.filename().string());
  } catch (const naive::NaiveSourceError& e) {
    std::cerr << "gputune: " << e.what() << "\n";
    return 2;
  } catch (const naive::NaiveError& e) {
    std::cerr << "gputune: " << e.what() << "\n"
              << "gputune: this kernel can still be tuned over its block shape: a job with "
                 "\"GPUTune\": {\"Naive\": true} falls back to block_size_x/y only\n";
    return 1;
  }
  std::cout << "naive kernel '" << k.name << "': " << k.dims << "-D, thread index "
            << k.index_names[0] << (k.dims == 2 ? ", " + k.index_names[1] : std::string()) << ", "
            << k.loops << " loop(s) every thread runs alike, " << k.guard.size()
            << " bounds check(s)\n";
  const std::vector<std::string> halos = naive::halo_windows(k);
  for (const naive::ArrayOptions& a : naive::array_options(k)) {
    std::cout << "  " << a.array << ":";
    for (naive::Cache c : a.allowed) std::cout << " " << naive::cache_name(c);
    std::cout << "\n";
    for (const std::string& h : halos)
      if (h.rfind(a.array + ":", 0) == 0)
        std::cout << "    shared: a halo window per block (" << h.substr(a.array.size() + 2)
                  << "), in dynamic shared memory sized at launch\n";
    for (const std::string& r : a.reasons) std::cout << "    " << r << "\n";
  }
  for (const naive::OutputOptions& o : naive::output_options(k)) {
    std::cout << "  " << o.array << " (written):" << (o.stage ? " write direct|shared" : "")
              << (o.reduce ? " reduce atomic|block" : "") << (o.stage || o.reduce ? "" : " direct")
              << "\n";
    for (const std::string& r : o.reasons) std::cout << "    " << r << "\n";
  }
  if (const naive::SplitOption sp = naive::split_loop(k); sp.loop >= 0) {
    std::string acc;
    for (int id : sp.locals)
      acc += (acc.empty() ? "" : ", ") + k.locals[static_cast<size_t>(id)].name;
    std::cout << "  split: 1-32 threads per output share the loop adding to " << acc
              << (sp.across_warps ? " (lanes along threadIdx.y, so each warp still reads "
                                    "consecutive outputs; parts added in shared memory)"
                                  : " (lanes within a warp; parts added by warp shuffles)")
              << ", in variants without shared tiles\n";
  } else {
    std::cout << "  split: not offered: " << sp.reason << "\n";
  }
  for (const std::string& n : k.notes) std::cout << "  note: " << n << "\n";
  // The space, through a job (the given one, or a minimal one for the kernel alone).
  Job job;
  if (!o.job_file.empty()) {
    job = load_job(o.job_file);
    if (!job.naive) {
      std::cerr << "gputune: " << o.job_file.string()
                << ": field GPUTune.Naive: the job is not marked naive. Fix: add "
                   "\"GPUTune\": {\"Naive\": true}\n";
      return 2;
    }
  } else {
    job.file = o.kernel_file;
    job.kernel_name = k.name;
    job.global_size_type = "OpenCL";
    job.global_size.x = "1024";
    job.global_size.y = k.dims == 2 ? "1024" : "1";
  }
  naive::apply_to_job(job, k);
  Space space = build_space(job);
  std::cout << space.size() << " variants in the generated space (" << space.cartesian_size
            << " before conditions)\n";
  if (o.out_dir.empty()) return 0;
  fs::create_directories(o.out_dir);
  size_t n = o.limit ? std::min(o.limit, space.size()) : space.size();
  std::vector<naive::Choice> written;
  for (size_t i = 0; i < n; ++i) {
    // Spread the written files over the space when only some are written.
    size_t at = n == space.size() ? i : i * space.size() / n;
    naive::Choice c = naive::choice_from_config(k, space.config(at));
    std::ofstream(o.out_dir / (k.name + "_" + naive::choice_label(k, c) + ".cu"))
        << naive::emit_variant(k, c);
    written.push_back(c);
  }
  std::cout << "wrote " << n << " of " << space.size() << " variants to " << o.out_dir.string()
            << (n < space.size() ? " (--limit 0 writes all)" : "") << "\n";
  if (!o.check) return 0;
  if (o.job_file.empty()) {
    std::cerr << "gputune: --check needs --job (the arguments and sizes to run with)\n";
    return 2;
  }
  ContextSpec ctx = job.contexts.front();
  if (!o.check_size.empty()) {
    ctx.problem_size.clear();
    ctx.name.clear();
    for (std::int64_t v : o.check_size) {
      ctx.problem_size.emplace_back(v);
      ctx.name += (ctx.name.empty() ? "" : "x") + std::to_string(v);
    }
  }
  std::vector<std::string> bad = check_on_cpu(job, source, k, written, ctx);
  for (const std::string& b : bad) std::cout << "MISMATCH " << b << "\n";
  std::cout << (bad.empty() ? "all " + std::to_string(written.size()) +
                                  " variants agree with the naive kernel on the CPU (context " +
                                  ctx.name + ")"
                            : std::to_string(bad.size()) + " variants differ")
            << "\n";
  return bad.empty() ? 0 : 1;
}

}  // namespace gputune::tuner
