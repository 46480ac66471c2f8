#include "tuner/compile/compile_and_inspect.h"

#include <mutex>
#include <sstream>

#include "tuner/common/progress.h"
#include "tuner/measure/arguments.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

cuda::CubinCache cache_for(const std::filesystem::path& option) {
  if (option == "-") return cuda::CubinCache(std::filesystem::path());
  return cuda::CubinCache(option.empty() ? cuda::CubinCache::default_dir() : option);
}

Inspected inspect_cubin(const cuda::CompiledVariant& c) {
  Inspected in;
  try {
    in.res = pruner::read_cubin_resources(c.cubin, c.lowered_name);
    pruner::apply_ptxas_log(in.res, c.log, c.lowered_name);
    in.ok = true;
  } catch (const pruner::CubinError& e) {
    in.reason = std::string("cubin unreadable: ") + e.what();
  }
  return in;
}

CompileReport compile_and_inspect(const Job& job, const std::string& source,
                                  const std::vector<Config>& configs, const std::string& arch,
                                  const cuda::CubinCache& cache, int threads, bool progress,
                                  const std::function<bool()>& should_stop, bool keep_cubins) {
  // Each variant is built as a compile worker reaches it: a naive kernel's space can hold
  // hundreds of thousands, whose sources need not all be in memory, nor be generated before a
  // Ctrl-C is heard.
  auto make = [&](size_t i) { return variant_to_compile(job, source, configs[i]); };
  CompileReport r;
  r.inspected.resize(configs.size());
  {
    Progress prog("compile", configs.size(), progress);
    std::mutex mu;
    size_t done = 0, failed = 0;
    r.compiled = cuda::compile_all(
        configs.size(), make, arch, cache, threads,
        [&](size_t i, cuda::CompiledVariant& c) {
          if (c.ok) r.inspected[i] = inspect_cubin(c);  // each worker its own entries
          if (!keep_cubins) std::string().swap(c.cubin);
          std::lock_guard<std::mutex> lock(mu);
          ++done;
          if (!c.ok) ++failed;
          prog.update(done, failed, std::nullopt);
        },
        should_stop);
    prog.finish();
  }
  for (size_t i = 0; i < r.compiled.size(); ++i) {
    const auto& c = r.compiled[i];
    if (c.cached) ++r.cached;
    if (!c.ok) {  // failed, or never started (Ctrl-C)
      r.inspected[i].reason = "compile failed";
      ++r.failed;
    } else if (r.inspected[i].ok) {
      ++r.ok;
    } else {
      ++r.failed;
    }
  }
  return r;
}

void compile_into(CompileReport& into, const std::vector<std::size_t>& which, const Job& job,
                  const std::string& source, const std::vector<Config>& configs,
                  const std::string& arch, const cuda::CubinCache& cache, int threads,
                  bool progress, const std::function<bool()>& should_stop, bool keep_cubins) {
  if (which.empty()) return;
  std::vector<Config> sub;
  for (std::size_t i : which) sub.push_back(configs[i]);
  CompileReport cr = compile_and_inspect(job, source, sub, arch, cache, threads, progress,
                                         should_stop, keep_cubins);
  for (std::size_t k = 0; k < which.size(); ++k) {
    into.compiled[which[k]] = std::move(cr.compiled[k]);
    into.inspected[which[k]] = std::move(cr.inspected[k]);
  }
  into.ok += cr.ok, into.failed += cr.failed, into.cached += cr.cached;
}

void check_cubin_arguments(const Job& job, const Inspected& in, const Config& config) {
  if (job.arguments.empty()) return;  // a job that only compiles (the tests' small jobs)
  if (in.ok && !in.res.param_sizes.empty())
    check_parameter_sizes(job, in.res.param_sizes, config.key());
}

void check_arguments_against_cubins(const Job& job, const std::vector<Config>& configs,
                                    const CompileReport& cr) {
  for (size_t i = 0; i < cr.inspected.size() && i < configs.size(); ++i)
    check_cubin_arguments(job, cr.inspected[i], configs[i]);
}

void fail_mismatched_arguments(const Job& job, const std::vector<Config>& configs,
                               const std::vector<std::size_t>& which, CompileReport& cr) {
  for (std::size_t i : which) {
    try {
      check_cubin_arguments(job, cr.inspected[i], configs[i]);
    } catch (const JobError& e) {
      cr.inspected[i].ok = false;
      cr.inspected[i].reason = e.what();
    }
  }
}

std::vector<pruner::RuleInput> rule_inputs(const Job& job, const std::vector<Config>& configs,
                                           const ContextSpec& ctx, const CompileReport& cr) {
  std::vector<pruner::RuleInput> inputs(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    auto& in = inputs[i];
    in.inspected = cr.inspected[i].ok;
    in.res = cr.inspected[i].res;
    in.cubin_hash = cr.compiled[i].cubin_hash;
    try {
      LaunchGeometry g = launch_geometry(job, configs[i], ctx);
      in.dynamic_smem = g.dynamic_smem;
      in.grid = g.grid;
      in.block = g.block;
      in.geometry = pruner::launch_key(g.grid, g.block, g.dynamic_smem);
    } catch (const JobError&) {
      in.inspected = false;  // no valid launch: reported as not judged
    }
  }
  return inputs;
}

}  // namespace gputune::tuner
