/** \file tuner/measure/measure.h
 * Owns: running compiled variants on a GPU: device buffers for a context's arguments, launching
 * with the variant's geometry, verifying outputs against the reference, and timing with CUDA events
 * (warm-up, repeated launches, every sample kept, optional L2 flush between launches).
 * Consumes: CompiledVariant, Variant, HostArguments, DeviceInfo. Produces: Outcome.
 * Runs after: the compile (compile/), with the arguments filled (arguments.h); before: storing
 * the outcome (run/measurement_row.h) and naming the winner (run/tune_context.cpp, name_winner).
 * Must not: touch the database or decide winners. */
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "db/status.h"
#include "tuner/measure/arguments.h"
#include "tuner/measure/device_info.h"
#include "variants/job.h"

namespace gputune::tuner {

/// What happened to one variant on the GPU: correct, runtime, correctness or timeout.
struct Outcome {
  db::Status status;
  std::string reason;
  std::vector<double> samples_ms;
  double median_ms = 0;
  int driver_registers = -1, driver_static_smem = -1, driver_local_bytes = -1,
      driver_max_threads = -1;
};

double median(std::vector<double> v);

/// One context's arguments on one device. Create on the thread that uses it.
class Measurer {
 public:
  Measurer(cuda::PrimaryContext& ctx, const DeviceInfo& dev, std::vector<HostArgument> args,
           const MeasureSettings& settings, double abs_tol, double rel_tol);
  ~Measurer();

  /// Runs a variant once, reads outputs back; verifies against the ArgumentReferences or, when
  /// none, against `expected` (the default configuration's outputs) if given; then times it.
  /// `capture` receives the outputs when non-null (to become the reference). A sticky error (the
  /// variant wrote out of bounds, trapped, ...) throws ContextLost: this Measurer, its context and
  /// every CUDA object of the process are unusable from then on.
  Outcome run(const cuda::CompiledVariant& cv, const Variant& v,
              const std::vector<std::vector<unsigned char>>* expected,
              std::vector<std::vector<unsigned char>>* capture, int repeats);

  const std::vector<HostArgument>& arguments() const { return args_; }

 private:
  void allocate();
  void restore_inputs();
  cuda::PrimaryContext& ctx_;
  DeviceInfo dev_;
  std::vector<HostArgument> args_;
  MeasureSettings settings_;
  double abs_tol_, rel_tol_;
  std::vector<cuda::DeviceBuffer> buffers_;
  cuda::DeviceBuffer flush_;
};

}  // namespace gputune::tuner
