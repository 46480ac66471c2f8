// The GPUTune extension of a T1 job (job.h): the `GPUTune` object (contexts, device, search,
// pruner, budget, verification, measurement, work, database, compile threads) read into the Job
// through the Reader (job_reader.h), and set_strategy. The T1 core and parse_job are job.cpp's.
// Must not: read the T1 core's fields.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "variants/job.h"
#include "variants/job_reader.h"

namespace gputune {

namespace {

const std::set<std::string> kExtKeys = {"Contexts",       "Device",      "Search", "Budget",
                                        "Verification",   "Measurement", "Work",   "Database",
                                        "CompileThreads", "Pruner",      "Naive"};

using detail::Reader;
using json = nlohmann::json;

/// A number in [lo, hi] at field `f`, or the error that names the range.
double in_range(Reader& r, const json& j, const std::string& f, double lo, double hi) {
  if (!j.is_number() || j.get<double>() < lo || j.get<double>() > hi)
    r.fail(f, "expected a number in [" + Value(lo).str() + ", " + Value(hi).str() + "], got " +
                  j.dump());
  return j.get<double>();
}

/// GPUTune.Contexts: the input contexts, each a list of sizes or {Name, ProblemSize, Values};
/// they replace KernelSpecification.ProblemSize's one.
void read_contexts(Reader& r, const json& cs, Job& job) {
  if (!cs.is_array() || cs.empty())
    r.fail("GPUTune.Contexts", "expected a non-empty list of contexts");
  job.contexts.clear();
  for (size_t i = 0; i < cs.size(); ++i) {
    std::string path = "GPUTune.Contexts[" + std::to_string(i) + "]";
    const json& c = cs[i];
    ContextSpec ctx;
    if (c.is_array()) {
      ctx.problem_size = read_problem_size(r, c, path);
    } else if (c.is_object()) {
      r.check_keys(c, path, {"Name", "ProblemSize", "Values"});
      ctx.problem_size = read_problem_size(r, r.require(c, path, "ProblemSize", "a list of sizes"),
                                           path + ".ProblemSize");
      if (c.contains("Name")) ctx.name = r.get_string(c["Name"], path + ".Name");
      if (c.contains("Values")) {
        if (!c["Values"].is_object()) r.fail(path + ".Values", "expected an object of name: value");
        for (auto it = c["Values"].begin(); it != c["Values"].end(); ++it)
          ctx.values.emplace_back(it.key(), r.to_value(it.value(), path + ".Values." + it.key()));
      }
    } else {
      r.fail(path, "expected a list of sizes or {Name, ProblemSize, Values}");
    }
    if (ctx.name.empty()) ctx.name = context_label(ctx.problem_size);
    job.contexts.push_back(std::move(ctx));
  }
}

/// GPUTune.Measurement: warm-up launches, repeats, the L2 flush, re-measuring the top few, and
/// the per-launch timeout.
void read_measurement(Reader& r, const json& m, Job& job) {
  r.check_keys(m, "GPUTune.Measurement",
               {"WarmUp", "Repeats", "FlushL2", "ReMeasureTop", "TimeoutSeconds"});
  if (m.contains("WarmUp"))
    job.measure.warmup =
        static_cast<int>(in_range(r, m["WarmUp"], "GPUTune.Measurement.WarmUp", 0, 1000));
  if (m.contains("Repeats"))
    job.measure.repeats =
        static_cast<int>(in_range(r, m["Repeats"], "GPUTune.Measurement.Repeats", 1, 100000));
  if (m.contains("FlushL2")) {
    if (!m["FlushL2"].is_boolean()) r.fail("GPUTune.Measurement.FlushL2", "expected true or false");
    job.measure.flush_l2 = m["FlushL2"].get<bool>();
  }
  if (m.contains("ReMeasureTop"))
    job.measure.remeasure_top = static_cast<int>(
        in_range(r, m["ReMeasureTop"], "GPUTune.Measurement.ReMeasureTop", 0, 1000));
  if (m.contains("TimeoutSeconds"))
    job.measure.timeout_seconds =
        in_range(r, m["TimeoutSeconds"], "GPUTune.Measurement.TimeoutSeconds", 0.001, 86400);
}

}  // namespace

namespace detail {

void read_extension(Reader& r, const json& ext, Job& job) {
  if (!ext.is_object()) r.fail("GPUTune", "expected an object");
  r.check_keys(ext, "GPUTune", kExtKeys);

  if (ext.contains("Contexts")) read_contexts(r, ext["Contexts"], job);
  if (ext.contains("Device")) {
    const json& d = ext["Device"];
    r.check_keys(d, "GPUTune.Device", {"Arch", "Index"});
    if (d.contains("Arch")) {
      job.target_arch = r.get_string(d["Arch"], "GPUTune.Device.Arch");
      if (job.target_arch.rfind("sm_", 0) != 0 || job.target_arch.size() < 5)
        r.fail("GPUTune.Device.Arch", "'" + job.target_arch + "' is not an architecture",
               "write e.g. \"sm_90\"");
    }
    if (d.contains("Index"))
      job.device_index = static_cast<int>(in_range(r, d["Index"], "GPUTune.Device.Index", 0, 64));
  }
  if (ext.contains("Search")) {
    const json& s = ext["Search"];
    r.check_keys(s, "GPUTune.Search", {"Strategy", "Seed", "ModelAnalyses"});
    if (s.contains("Strategy")) {
      set_strategy(job, r.get_string(s["Strategy"], "GPUTune.Search.Strategy"), job.file.string(),
                   "GPUTune.Search.Strategy");
    }
    if (s.contains("Seed"))
      job.seed = static_cast<std::uint64_t>(in_range(r, s["Seed"], "GPUTune.Search.Seed", 0, 1e18));
    if (s.contains("ModelAnalyses"))
      job.model_analyses = static_cast<std::uint64_t>(
          in_range(r, s["ModelAnalyses"], "GPUTune.Search.ModelAnalyses", 2, 1e9));
  }
  if (ext.contains("Pruner")) {
    const json& pr = ext["Pruner"];
    r.check_keys(pr, "GPUTune.Pruner", {"Enabled", "ModelMargin", "MaxSpillBytes", "RegretSample"});
    if (pr.contains("Enabled")) {
      if (!pr["Enabled"].is_boolean()) r.fail("GPUTune.Pruner.Enabled", "expected true or false");
      job.pruner.enabled = pr["Enabled"].get<bool>();
      job.pruner.explicit_enabled = true;
    }
    if (pr.contains("ModelMargin"))
      job.pruner.model_margin =
          in_range(r, pr["ModelMargin"], "GPUTune.Pruner.ModelMargin", 1, 1e6);
    if (pr.contains("MaxSpillBytes"))
      job.pruner.max_spill_bytes = static_cast<int>(
          in_range(r, pr["MaxSpillBytes"], "GPUTune.Pruner.MaxSpillBytes", -1, 1e9));
    if (pr.contains("RegretSample"))
      job.pruner.regret_sample =
          static_cast<int>(in_range(r, pr["RegretSample"], "GPUTune.Pruner.RegretSample", 0, 1e6));
  }
  if (ext.contains("Budget")) {
    const json& b = ext["Budget"];
    r.check_keys(b, "GPUTune.Budget", {"Configurations", "Seconds"});
    if (b.contains("Configurations"))
      job.budget.max_configurations = static_cast<std::uint64_t>(
          in_range(r, b["Configurations"], "GPUTune.Budget.Configurations", 1, 1e12));
    if (b.contains("Seconds"))
      job.budget.max_seconds = in_range(r, b["Seconds"], "GPUTune.Budget.Seconds", 0.001, 1e9);
  }
  if (ext.contains("Verification")) {
    const json& v = ext["Verification"];
    r.check_keys(v, "GPUTune.Verification", {"AbsoluteTolerance", "RelativeTolerance"});
    if (v.contains("AbsoluteTolerance"))
      job.abs_tolerance =
          in_range(r, v["AbsoluteTolerance"], "GPUTune.Verification.AbsoluteTolerance", 0, 1e30);
    if (v.contains("RelativeTolerance"))
      job.rel_tolerance =
          in_range(r, v["RelativeTolerance"], "GPUTune.Verification.RelativeTolerance", 0, 1e30);
  }
  if (ext.contains("Measurement")) read_measurement(r, ext["Measurement"], job);
  if (ext.contains("Work")) {
    const json& w = ext["Work"];
    r.check_keys(w, "GPUTune.Work", {"Flops", "Bytes"});
    if (w.contains("Flops")) job.flops_expr = r.get_expr(w["Flops"], "GPUTune.Work.Flops");
    if (w.contains("Bytes")) job.bytes_expr = r.get_expr(w["Bytes"], "GPUTune.Work.Bytes");
  }
  if (ext.contains("Database")) job.database = r.get_string(ext["Database"], "GPUTune.Database");
  if (ext.contains("CompileThreads"))
    job.compile_threads =
        static_cast<int>(in_range(r, ext["CompileThreads"], "GPUTune.CompileThreads", 0, 256));
}

}  // namespace detail

void set_strategy(Job& job, const std::string& name, const std::string& file,
                  const std::string& field) {
  if (name != "brute_force" && name != "random" && name != "model_guided" && name != "portfolio")
    throw JobError(file, field, "unknown strategy '" + name + "'",
                   "use brute_force, random, portfolio or model_guided");
  job.strategy = name;
  job.search_named = true;
  if (!job.pruner.explicit_enabled) job.pruner.enabled = name == "model_guided";
}

void apply_default_strategy(Job& job) {
  if (job.search_named) return;
  const bool budget =
      job.budget.max_configurations || job.budget.max_seconds || job.budget.fraction;
  job.strategy = job.naive || budget ? "model_guided" : "brute_force";
  if (!job.pruner.explicit_enabled) job.pruner.enabled = job.strategy == "model_guided";
}

}  // namespace gputune
