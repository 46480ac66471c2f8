#include "variants/instantiate.h"

#include <filesystem>

#include "variants/expr.h"
#include "variants/naive/naive.h"

namespace gputune {

std::string define_value(const Value& v) {
  if (v.is_bool()) return v.truthy() ? "1" : "0";
  return v.str();
}

std::string kernel_folder(const Job& job) {
  if (job.kernel_file.empty()) return "";
  return std::filesystem::absolute(job.kernel_file).parent_path().lexically_normal().string();
}

std::vector<std::string> job_options(const Job& job) {
  // The kernel's folder first, as nvcc searches the including file's folder: `#include "x.h"`
  // next to the kernel is found whatever the working directory.
  std::vector<std::string> opts;
  if (!job.kernel_file.empty()) opts.push_back("-I" + kernel_folder(job));
  opts.insert(opts.end(), job.compiler_options.begin(), job.compiler_options.end());
  return opts;
}

std::vector<std::string> compile_options(const Job& job, const Config& config) {
  std::vector<std::string> opts = job_options(job);
  // A generated variant has its values written in; -D names like `unroll` would rewrite
  // `#pragma unroll` in it.
  if (job.naive_kernel) return opts;
  for (size_t i = 0; i < config.values.size(); ++i)
    opts.push_back("-D" + (*config.names)[i] + "=" + define_value(config.values[i]));
  return opts;
}

Value eval_in_context(const Job& job, const std::string& expr, const std::string& field,
                      const Config* config, const ContextSpec& ctx) {
  auto bindings = context_bindings(ctx);
  if (config)
    for (size_t i = 0; i < config->values.size(); ++i)
      bindings.emplace_back((*config->names)[i], config->values[i]);
  try {
    return eval_expression(expr, bindings);
  } catch (const ExprError& e) {
    throw JobError(job.file.string(), field, e.what(),
                   "use tuning parameters, ProblemSize[i] or the context's Values");
  }
}

LaunchGeometry launch_geometry(const Job& job, const Config& config, const ContextSpec& ctx) {
  LaunchGeometry g;
  static const char* axis = "XYZ";
  auto positive = [&](const Value& v, const std::string& field) {
    if (!v.is_number())
      throw JobError(job.file.string(), field, std::string("evaluates to a ") + v.type_name(),
                     "make it a number");
    double d = v.as_double();
    auto i = static_cast<std::int64_t>(d);
    if (d < 1 || static_cast<double>(i) != d)
      throw JobError(job.file.string(), field,
                     "evaluates to " + v.str() + " for " + config.key() + " in context " + ctx.name,
                     "sizes must be positive integers");
    return i;
  };
  for (int d = 0; d < 3; ++d) {
    std::string f = std::string("KernelSpecification.LocalSize.") + axis[d];
    g.block[static_cast<size_t>(d)] =
        positive(eval_in_context(job, job.local_size[d], f, &config, ctx), f);
  }
  for (int d = 0; d < 3; ++d) {
    auto ud = static_cast<size_t>(d);
    if (job.use_grid_div) {
      // Kernel Tuner: grid = ceil(problem_size / prod(grid_div)); an absent GridDiv defaults to the
      // block size parameter of that axis (as Kernel Tuner's block_size_x/y/z), else 1.
      std::string f = std::string("KernelSpecification.GridDiv") + axis[d];
      std::int64_t div = 1;
      if (!job.grid_div[ud].empty()) {
        for (auto& e : job.grid_div[ud])
          div *= positive(eval_in_context(job, e, f, &config, ctx), f);
      } else {
        static const char* bs[] = {"block_size_x", "block_size_y", "block_size_z"};
        for (size_t i = 0; i < config.names->size(); ++i)
          if ((*config.names)[i] == bs[d]) div = config.values[i].as_int();
      }
      std::int64_t ps = ud < ctx.problem_size.size() ? ctx.problem_size[ud].as_int() : 1;
      g.grid[ud] = std::max<std::int64_t>(1, (ps + div - 1) / div);
    } else {
      std::string f = std::string("KernelSpecification.GlobalSize.") + axis[d];
      std::int64_t gs = positive(eval_in_context(job, job.global_size[d], f, &config, ctx), f);
      g.grid[ud] = job.global_size_type == "CUDA" ? gs : (gs + g.block[ud] - 1) / g.block[ud];
    }
  }
  Value smem = eval_in_context(job, job.shared_memory_expr, "KernelSpecification.SharedMemory",
                               &config, ctx);
  g.dynamic_smem = smem.as_int();
  if (g.dynamic_smem < 0)
    throw JobError(job.file.string(), "KernelSpecification.SharedMemory", "is negative",
                   "give bytes >= 0");
  if (job.naive_kernel) {
    try {
      g.dynamic_smem += naive::dynamic_shared_bytes(
          *job.naive_kernel, naive::choice_from_config(*job.naive_kernel, config),
          naive_scalars(job, *job.naive_kernel, ctx));
    } catch (const naive::NaiveError& e) {
      throw JobError(job.file.string(), "KernelSpecification.Arguments", e.what(),
                     "give the kernel's scalar arguments in its parameter order");
    }
  }
  return g;
}

std::map<std::string, double> naive_scalars(const Job& job, const naive::NaiveKernel& k,
                                            const ContextSpec& ctx) {
  std::map<std::string, double> out;
  const auto& params = k.params;
  for (size_t i = 0; i < params.size() && i < job.arguments.size(); ++i) {
    const Argument& a = job.arguments[i];
    if (params[i].pointer || a.memory_type != "Scalar") continue;
    const std::string field = "KernelSpecification.Arguments[" + std::to_string(i) + "].FillValue";
    Value v = eval_in_context(job, a.fill_value, field, nullptr, ctx);
    if (v.is_number()) out[params[i].name] = v.as_double();
  }
  return out;
}

std::string variant_source(const Job& job, const std::string& source, const Config& config) {
  if (!job.naive_kernel) return source;
  return naive::emit_variant(*job.naive_kernel,
                             naive::choice_from_config(*job.naive_kernel, config));
}

Variant instantiate(const Job& job, const std::string& source, const Config& config,
                    const ContextSpec& ctx) {
  Variant v = instantiate_launch(job, config, ctx);
  v.source = variant_source(job, source, config);
  return v;
}

namespace {
/// What every variant of a config carries, compiled or launched: the config, the kernel's name,
/// the compile options and the kernel's folder.
Variant variant_of(const Job& job, const Config& config) {
  Variant v;
  v.config = config;
  v.kernel_name = job.kernel_name;
  v.options = compile_options(job, config);
  v.kernel_folder = kernel_folder(job);
  return v;
}
}  // namespace

Variant variant_to_compile(const Job& job, const std::string& source, const Config& config) {
  Variant v = variant_of(job, config);
  v.source = variant_source(job, source, config);
  return v;
}

Variant instantiate_launch(const Job& job, const Config& config, const ContextSpec& ctx) {
  Variant v = variant_of(job, config);
  v.geometry = launch_geometry(job, config, ctx);
  if (!job.flops_expr.empty())
    v.flops = eval_in_context(job, job.flops_expr, "GPUTune.Work.Flops", &config, ctx).as_double();
  if (!job.bytes_expr.empty())
    v.bytes = eval_in_context(job, job.bytes_expr, "GPUTune.Work.Bytes", &config, ctx).as_double();
  return v;
}

}  // namespace gputune
