/** \file variants/instantiate.h
 * Owns: turning one Config of a parametric kernel into a Variant: the source, the NVRTC options
 * (parameters become -D definitions, as Kernel Tuner's #defines), the launch geometry and the work
 * (flops, bytes) for one input context.
 * Consumes: Job, kernel source, Config, ContextSpec. Produces: Variant.
 * Runs after space.h; tuner/compile runs after it.
 * Must not: compile, launch, or touch the database. */
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/space.h"

namespace gputune {

struct LaunchGeometry {
  std::array<std::int64_t, 3> grid{1, 1, 1};
  std::array<std::int64_t, 3> block{1, 1, 1};
  std::int64_t dynamic_smem = 0;
  std::int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
};

struct Variant {
  Config config;
  std::string kernel_name;
  std::string source;                ///< the job's kernel source (shared text, unchanged)
  std::vector<std::string> options;  ///< job options + -Dname=value per parameter
  std::string kernel_folder;         ///< its -I option's folder (see kernel_folder()), or ""
  LaunchGeometry geometry;           ///< for the context it was instantiated for
  std::optional<double> flops;       ///< per launch, when the job gives Work.Flops
  std::optional<double> bytes;       ///< per launch, when the job gives Work.Bytes
};

/// The -D value text of a parameter value (bool -> 1/0, str as is, numbers as Python prints them).
std::string define_value(const Value& v);

/// The kernel file's folder, absolute and normal ("" for a job without a file). compile_options
/// puts `-I<it>` first; the caches key that option by name, not by where the folder is.
std::string kernel_folder(const Job& job);

/// `-I<kernel folder>` then the job's CompilerOptions: the options every configuration shares
/// (where headers are found, as NVRTC will search; what clang's analysis parses with).
std::vector<std::string> job_options(const Job& job);

/// NVRTC options for a config: job_options(), then -Dname=value for each parameter.
std::vector<std::string> compile_options(const Job& job, const Config& config);

/// Launch geometry of a config in a context. Throws JobError naming the geometry field when an
/// expression fails or gives a non-positive size.
LaunchGeometry launch_geometry(const Job& job, const Config& config, const ContextSpec& ctx);

/// Evaluates an expression of the job (sizes, fill values, work) with the config's parameters and
/// the context's names bound; `field` names it in errors.
Value eval_in_context(const Job& job, const std::string& expr, const std::string& field,
                      const Config* config, const ContextSpec& ctx);

/// A naive kernel's scalar arguments by the kernel's parameter names (job arguments are
/// positional), evaluated in a context: what sizes its halo windows at launch.
std::map<std::string, double> naive_scalars(const Job& job, const naive::NaiveKernel& k,
                                            const ContextSpec& ctx);

/// The source of one config: the job's kernel text for a parametric kernel, the generated variant
/// (variants/naive/naive.h) for a naive one.
std::string variant_source(const Job& job, const std::string& source, const Config& config);

Variant instantiate(const Job& job, const std::string& source, const Config& config,
                    const ContextSpec& ctx);

/// What compiling one config needs and nothing a launch does (no geometry, no work): its source
/// (variant_source), the job's kernel name, compile options and kernel folder. The one way
/// every compile path (prune, screen, check, run's pool, replay, select) builds a variant, so
/// that they agree on its cubin cache key.
Variant variant_to_compile(const Job& job, const std::string& source, const Config& config);

/// As instantiate, without the source (left empty): what launching an already compiled variant
/// needs (geometry, work, options). A naive kernel's generated source is some 5 KB, and a run
/// keeps one of these per configuration.
Variant instantiate_launch(const Job& job, const Config& config, const ContextSpec& ctx);

}  // namespace gputune
