/** \file tuner/compile/candidate.h
 * Owns: the one value a configuration carries through the stages of a run. A Candidate is what
 * it is for the whole run: its configuration, its database row, its compiled code and the
 * resources read from it. A Trial is what it is in one context: its launch, its occupancy, the
 * model's predictions (the best case from its source alone, then the real one once compiled), the
 * rules' decision and its outcome. Plain structs: the stages (tuner/run/pipeline.cpp and the files
 * it names) fill them in order, and the stored row is built from them in one place
 * (tuner/run/measurement_row.h).
 * Must not: hold behaviour. */
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cuda/nvrtc.h"
#include "pruner/model.h"
#include "pruner/rules.h"
#include "tuner/compile/compile_and_inspect.h"
#include "variants/instantiate.h"
#include "variants/space.h"

namespace gputune::tuner {

struct Candidate {
  std::size_t index = 0;  ///< position in the space
  Config config;
  bool is_default = false;      ///< the job's default configuration (reference and baseline)
  bool left_out = false;        ///< drawn from what the model's search left out (regret sample)
  std::int64_t variant_id = 0;  ///< its database row, once stored
  enum class Compile { kNot, kQueued, kDone };
  Compile state = Compile::kNot;
  cuda::CompiledVariant compiled;  ///< once kDone
  Inspected inspected;             ///< resources read from the cubin, once kDone
  bool usable() const { return state == Compile::kDone && compiled.ok && inspected.ok; }
};

struct Trial {
  std::optional<Variant> launch;  ///< geometry and work in this context (no source)
  std::string geometry_error;     ///< why it has no launch in this context
  pruner::Occupancy occupancy;    ///< with its resources, once compiled
  /// The model's prediction before compiling: at the most blocks per SM its launch allows.
  std::optional<double> best_case_ms;
  /// With its real occupancy, once compiled (ok false: none).
  pruner::Prediction prediction;
  pruner::Decision decision;  ///< rules 1-4; kept unless a rule removed it
  bool measured = false;      ///< its outcome in this context is stored (or was, before a resume)
  std::optional<double> time_ms;  ///< first-pass median, when correct
  std::int64_t measurement_id = 0;
};

}  // namespace gputune::tuner
