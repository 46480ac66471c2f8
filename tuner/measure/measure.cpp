#include "tuner/measure/measure.h"

#include <algorithm>
#include <chrono>

#include "tuner/measure/device_info.h"

namespace gputune::tuner {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Measurer::Measurer(cuda::PrimaryContext& ctx, const DeviceInfo& dev, std::vector<HostArgument> args,
                   const MeasureSettings& settings, double abs_tol, double rel_tol)
    : ctx_(ctx),
      dev_(dev),
      args_(std::move(args)),
      settings_(settings),
      abs_tol_(abs_tol),
      rel_tol_(rel_tol) {
  allocate();
}

Measurer::~Measurer() = default;

void Measurer::allocate() {
  ctx_.make_current();
  buffers_.clear();
  for (auto& a : args_) {
    buffers_.emplace_back(a.is_vector ? cuda::DeviceBuffer(a.data.size()) : cuda::DeviceBuffer());
    if (a.is_vector) buffers_.back().upload(a.data.data(), a.data.size());
  }
  if (settings_.flush_l2 && dev_.l2_bytes > 0)
    flush_ = cuda::DeviceBuffer(static_cast<size_t>(dev_.l2_bytes) * 2);
}

void Measurer::restore_inputs() {
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i].is_vector && args_[i].written)
      buffers_[i].upload(args_[i].data.data(), args_[i].data.size());
}

Outcome Measurer::run(const cuda::CompiledVariant& cv, const Variant& v,
                      const std::vector<std::vector<unsigned char>>* expected,
                      std::vector<std::vector<unsigned char>>* capture, int repeats) {
  const cuda::Driver& d = cuda::Driver::instance();
  Outcome o;
  try {
    ctx_.make_current();
    restore_inputs();
    cuda::Module mod(cv.cubin, cv.lowered_name);
    o.driver_registers = mod.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
    o.driver_static_smem = mod.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    o.driver_local_bytes = mod.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    o.driver_max_threads = mod.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    const auto& g = v.geometry;
    // Opted in as the occupancy model assumes.
    if (g.dynamic_smem > 0 &&
        pruner::needs_smem_opt_in(o.driver_static_smem, g.dynamic_smem, dev_.limits))
      d.check(d.cuFuncSetAttribute(mod.function(), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(g.dynamic_smem)),
              "cuFuncSetAttribute");
    // Kernel parameters: device pointers for vectors, the value itself for scalars.
    std::vector<CUdeviceptr> ptrs(args_.size());
    std::vector<void*> params(args_.size());
    for (size_t i = 0; i < args_.size(); ++i) {
      if (args_[i].is_vector) {
        ptrs[i] = buffers_[i].get();
        params[i] = &ptrs[i];
      } else {
        params[i] = args_[i].data.data();
      }
    }
    auto launch = [&] {
      d.check(
          d.cuLaunchKernel(mod.function(), static_cast<unsigned>(g.grid[0]),
                           static_cast<unsigned>(g.grid[1]), static_cast<unsigned>(g.grid[2]),
                           static_cast<unsigned>(g.block[0]), static_cast<unsigned>(g.block[1]),
                           static_cast<unsigned>(g.block[2]), static_cast<unsigned>(g.dynamic_smem),
                           nullptr, params.data(), nullptr),
          "cuLaunchKernel", v.config.key());
    };
    // 1. One launch for correctness.
    auto t0 = std::chrono::steady_clock::now();
    launch();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", v.config.key());
    double first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < args_.size(); ++i) {
      if (!args_[i].output) continue;
      std::vector<unsigned char> out(args_[i].data.size());
      buffers_[i].download(out.data(), out.size());
      if (const std::vector<unsigned char>* ref = expected_output(args_, i, expected)) {
        Comparison c = compare_output(args_[i], out, *ref, abs_tol_, rel_tol_);
        if (!c.ok) {
          o.status = db::Status::kCorrectness;
          o.reason = c.describe(args_[i].name);
          return o;
        }
      }
      if (capture) {
        capture->resize(args_.size());
        (*capture)[i] = std::move(out);
      }
    }
    if (first_s > settings_.timeout_seconds) {
      o.status = db::Status::kTimeout;
      o.reason = "one launch took " + std::to_string(first_s) + " s > TimeoutSeconds " +
                 std::to_string(settings_.timeout_seconds);
      return o;
    }
    // 2. Timing.
    for (int w = 0; w < settings_.warmup; ++w) launch();
    cuda::Event start, stop;
    auto budget_start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
      if (flush_.size())
        d.check(d.cuMemsetD8(flush_.get(), static_cast<unsigned char>(r), flush_.size()),
                "cuMemsetD8");
      d.check(d.cuEventRecord(start.get(), nullptr), "cuEventRecord");
      launch();
      d.check(d.cuEventRecord(stop.get(), nullptr), "cuEventRecord");
      d.check(d.cuEventSynchronize(stop.get()), "cuEventSynchronize", v.config.key());
      float ms = 0;
      d.check(d.cuEventElapsedTime(&ms, start.get(), stop.get()), "cuEventElapsedTime");
      o.samples_ms.push_back(ms);
      double spent =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - budget_start).count();
      if (spent > settings_.timeout_seconds) break;  // keep what was measured; fewer samples
    }
    o.median_ms = median(o.samples_ms);
    o.status = db::Status::kCorrect;
    return o;
  } catch (const cuda::CudaError& e) {
    if (e.sticky()) {
      // The context is gone, and CUDA cannot make a new one in this process: nothing more runs
      // here (no frees into it either). The caller stores this variant and goes on in a new one.
      for (auto& b : buffers_) b.abandon();
      flush_.abandon();
      throw cuda::ContextLost(e);
    }
    o.status = db::Status::kRuntime;
    o.reason = e.what();
    return o;
  }
}

}  // namespace gputune::tuner
