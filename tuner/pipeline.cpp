#include "tuner/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "db/store.h"
#include "pruner/cubin.h"
#include "pruner/occupancy.h"
#include "tuner/arguments.h"
#include "tuner/command_line.h"
#include "tuner/compile.h"
#include "tuner/cuda_driver.h"
#include "tuner/hang_watch.h"
#include "tuner/inspect.h"
#include "tuner/measure.h"
#include "tuner/model_search.h"
#include "tuner/model_stage.h"
#include "tuner/progress.h"
#include "tuner/screen.h"
#include "tuner/strategy.h"
#include "variants/instantiate.h"
#include "variants/space.h"

#ifndef GPUTUNE_CUDA_TOOLKIT_VERSION
#define GPUTUNE_CUDA_TOOLKIT_VERSION "unknown"
#endif

namespace gputune::tuner {

namespace {

using Clock = std::chrono::steady_clock;

/// Logs a stage; with GPUTUNE_TIME_STAGES set, also how long it took.
class Stage {
 public:
  Stage(std::ostream& log, std::string name)
      : log_(log), name_(std::move(name)), t0_(Clock::now()) {}
  ~Stage() {
    if (std::getenv("GPUTUNE_TIME_STAGES"))
      log_ << "gputune: stage " << name_ << " took "
           << std::chrono::duration<double, std::milli>(Clock::now() - t0_).count() << " ms\n";
  }

 private:
  std::ostream& log_;
  std::string name_;
  Clock::time_point t0_;
};

std::string dims(const std::array<std::int64_t, 3>& d) {
  return std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
}

/// Index in `configs` of the job's default configuration, or -1 when it is not among them.
long default_index(const Job& job, const std::vector<Config>& configs) {
  std::string key = default_key(job);
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].key() == key) return static_cast<long>(i);
  return -1;
}

/// The configurations a budget lets a run measure at most, for the record; none without one.
std::optional<std::int64_t> planned_budget(const Budget& b, size_t space_size) {
  if (!b.max_configurations && !b.fraction) return std::nullopt;
  return static_cast<std::int64_t>(budget_configurations(b, space_size));
}

/// The top-level sections (General, ConfigurationSpace, ...) in which two job documents differ, as
/// a comma-separated list; "" when they are the same JSON (formatting aside).
std::string changed_sections(const std::string& before, const std::string& now) {
  const auto a = nlohmann::json::parse(before, nullptr, false);
  const auto b = nlohmann::json::parse(now, nullptr, false);
  if (a.is_discarded() || b.is_discarded() || !a.is_object() || !b.is_object())
    return before == now ? "" : "the document";
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  std::string out;
  for (const std::string& k : keys)
    if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) out += (out.empty() ? "" : ", ") + k;
  return out;
}

/// How many of the newest verified times (with a prediction, for the predicted variants) a
/// search learns from before it starts.
constexpr int kPastMeasurements = 5000;

/// What earlier contexts and runs measured of kernel `kernel` on the device: the prior of a
/// model-guided search (ParameterEffects::from_past). `residuals`: the times with a prediction,
/// as log(measured / predicted), for the predicted variants; otherwise every verified time as
/// log(time), for the variants without a prediction (from_past centres each search on its mean).
/// `imported` (when given) counts those from imported Kernel Tuner caches of a device of the same
/// name (times only: an import has no predictions).
std::vector<ParameterEffects::Past> past_measurements(db::Store& store, std::int64_t device_id,
                                                      const std::string& kernel,
                                                      std::int64_t run_id, std::int64_t ctx_id,
                                                      bool residuals,
                                                      std::size_t* imported = nullptr) {
  std::vector<ParameterEffects::Past> out;
  for (const auto& row :
       residuals ? store.predicted_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)
                 : store.verified_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)) {
    auto params = nlohmann::json::parse(row.params_json, nullptr, false);
    if (!params.is_object()) continue;
    if (imported && row.imported) ++*imported;
    ParameterEffects::Past m;
    m.search = std::to_string(row.run_id) + "/" + std::to_string(row.context_id);
    for (const auto& [name, value] : params.items()) m.values[name] = json_to_value(value).str();
    m.log_residual = std::log(residuals ? row.time_ms / row.predicted_ms : row.time_ms);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

RunReport run_job(const Job& job_given, const RunOptions& opt) {
  std::ostream& log = opt.log ? *opt.log : std::cerr;
  Job job = job_given;  // a resumed run goes on with the budget it planned with
  RunReport rep;

  // 1. Inputs: source and space. Bad input stops here, before the database is touched.
  std::string source = load_kernel_source(job);
  Space space = [&] {
    Stage s(log, "space");
    return build_space(job);
  }();
  rep.space_size = space.size();
  if (space.empty())
    throw JobError(job.file.string(), "ConfigurationSpace.Conditions", space.explain_empty(),
                   "relax the conditions or widen the parameter values");

  // 2. Database (fails fast on a file that is not ours, before any work).
  rep.db_path = !opt.db_path.empty()    ? opt.db_path
                : !job.database.empty() ? (job.file.parent_path() / job.database).string()
                                        : db::default_database_path();
  db::Store store(rep.db_path);
  // Seconds of the job's time budget already spent measuring by this run (resumed).
  double spent_before = opt.budget_spent_s;
  // A run to resume must be one of this job's, searched the same way: said before compiling.
  if (opt.resume_run) {
    const std::string what = "cannot resume run " + std::to_string(*opt.resume_run);
    auto prev = store.run(*opt.resume_run);
    if (!prev)
      throw JobError("command line", "--resume", what + ": " + rep.db_path + " has no such run",
                     "see `gputune runs --db " + shell_quote(rep.db_path) + "`");
    if (prev->job_name != job.name)
      throw JobError("command line", "--resume",
                     what + ": it ran job '" + prev->job_name + "', not '" + job.name + "'",
                     "give the job file of that run, or leave out --resume");
    if (prev->strategy == "prune" || prev->strategy == "import")
      throw JobError("command line", "--resume",
                     what + ": it is " + (prev->strategy == "prune" ? "a prune" : "an import") +
                         ", which measured nothing that a run could go on with",
                     "leave out --resume");
    if (prev->strategy != job.strategy)
      throw JobError("command line", "--resume",
                     what + ": it searched with strategy " + prev->strategy + ", this job with " +
                         job.strategy,
                     "add --strategy " + prev->strategy);
    // The same space, arguments and sizes: a job edited since would mix two jobs in one run.
    const std::string before = store.run_job_document(*opt.resume_run);
    if (const std::string changed = changed_sections(before, job.document); !changed.empty())
      throw JobError(job.file.string(), changed,
                     what + ": the job changed since that run started (" + changed + " differ)",
                     "leave out --resume to start a new run (what run " +
                         std::to_string(*opt.resume_run) +
                         " measured stays stored), or restore the job as it was");
    const std::vector<std::string> kernels = store.run_kernel_hashes(*opt.resume_run);
    if (!kernels.empty() &&
        std::find(kernels.begin(), kernels.end(), kernel_hash(job, source)) == kernels.end())
      throw JobError(job.kernel_file.string(), "KernelSpecification.KernelFile",
                     what + ": the kernel's source changed since that run measured it",
                     "leave out --resume to start a new run, or restore the kernel as it was");
    // The budget it planned with, unless the command line gives another.
    const std::optional<std::int64_t> now = planned_budget(job.budget, space.size());
    if (prev->budget != now) {
      const auto text = [](std::optional<std::int64_t> b) {
        return b ? std::to_string(*b) + " configurations" : std::string("no budget");
      };
      if (opt.budget_given) {
        log << "gputune: note: run " << *opt.resume_run << " planned with " << text(prev->budget)
            << "; it goes on with --budget " << text(now) << "\n";
      } else if (prev->budget) {
        job.budget.max_configurations = static_cast<std::uint64_t>(*prev->budget);
        job.budget.fraction.reset();
        log << "gputune: note: run " << *opt.resume_run << " goes on with the budget it planned "
            << "with: " << text(prev->budget) << " (the job says " << text(now) << ")\n";
      }
    }
    // The time budget counts every process of the run: what it spent before goes on counting.
    if (prev->seconds_spent) spent_before = std::max(spent_before, *prev->seconds_spent);
    if (job.budget.max_seconds && spent_before > 0) {
      std::ostringstream note;
      note.precision(3);
      note << "gputune: note: run " << *opt.resume_run << " has spent " << spent_before
           << " s measuring; it goes on with the "
           << std::max(0.0, *job.budget.max_seconds - spent_before) << " s left of its "
           << *job.budget.max_seconds << " s time budget (GPUTune.Budget.Seconds)\n";
      log << note.str();
    }
  }

  // 3. Device: the driver is loaded at run time; without it everything up to timing still runs.
  std::optional<DeviceInfo> dev;
  std::string no_device_reason;
  if (opt.no_gpu) {
    no_device_reason = "--no-gpu was given";
  } else if (const Driver& d = Driver::instance(); !d.available()) {
    no_device_reason = d.unavailable_reason();
  } else {
    dev = job_device(job);
  }
  rep.arch = !opt.arch.empty()          ? opt.arch
             : dev                      ? dev->limits.arch()
             : !job.target_arch.empty() ? job.target_arch
                                        : "sm_90";
  pruner::DeviceLimits limits;
  try {
    limits = dev && opt.arch.empty() ? dev->limits : pruner::limits_for_arch(rep.arch);
  } catch (const std::invalid_argument& e) {
    throw JobError(job.file.string(), "GPUTune.Device.Arch", e.what(),
                   "use an architecture such as sm_90");
  }
  rep.device = dev ? dev->name : "none";
  Rates rates;
  if (dev)
    rates = rates_for_driver(*dev);
  else
    rates.source =
        "no device: the model ranks nothing without a GPU's rates (see gputune prune "
        "--device)";
  log << "gputune: " << job.name << ": " << space.size() << " valid configurations of "
      << space.cartesian_size << "; device "
      << (dev ? dev->name : "none (" + no_device_reason + ")") << "; target " << rep.arch
      << "; strategy " << job.strategy << "\n";
  for (auto& n : job.notes) log << "gputune: note: " << n << "\n";

  // 4. Plan: which configurations, in which order. model_guided compiles everything (the model
  // needs every variant's code) and applies the budget to what it measures.
  const bool guided = job.strategy == "model_guided";
  const bool use_model = guided || job.pruner.enabled;
  std::vector<size_t> order;
  size_t measure_limit = std::numeric_limits<size_t>::max();
  if (guided) {
    order = plan(*make_brute_force(space.size()), space.size());
    measure_limit = budget_configurations(job.budget, space.size());
  } else {
    auto strategy = make_strategy(job.strategy, space.size(), job.seed);
    order = plan(*strategy, budget_configurations(job.budget, space.size()));
  }
  // The default configuration is the reference for verification and the baseline for the speedup:
  // it is always run, first, even when the strategy did not pick it.
  if (long d = space.find(default_key(job)); d >= 0) {
    auto it = std::find(order.begin(), order.end(), static_cast<size_t>(d));
    if (it == order.end()) {
      order.insert(order.begin(), static_cast<size_t>(d));
      log << "gputune: note: the default configuration " << default_key(job)
          << " was added to the plan as the reference and baseline\n";
    }
  }
  rep.planned = order.size();
  std::vector<Config> configs;
  configs.reserve(order.size());
  for (size_t i : order) configs.push_back(space.config(i));

  // Every context's arguments are sized, and checked against the memory they will take (this
  // machine's; the GPU's, less the L2 flush buffer and what the CUDA context itself takes),
  // before anything is compiled: bad sizes are the job's fault, found in seconds.
  std::vector<std::vector<HostArgument>> sized_args;  // per context; the model reads them too
  for (const ContextSpec& ctx : job.contexts) {
    const std::vector<HostArgument>& sized =
        sized_args.emplace_back(make_arguments(job, ctx, ArgumentContents::SizesOnly));
    check_argument_memory(job, ctx, sized, available_memory_bytes(),
                          "of memory this machine has available", "use a smaller problem size");
    if (!dev) continue;
    constexpr std::uint64_t kContextReserve = std::uint64_t{512} << 20;
    const std::uint64_t flush = 2 * static_cast<std::uint64_t>(std::max(dev->l2_bytes, 0));
    const auto total = static_cast<std::uint64_t>(dev->total_mem);
    const std::uint64_t usable =
        total > flush + kContextReserve ? total - flush - kContextReserve : std::uint64_t{1};
    check_argument_memory(job, ctx, sized, usable,
                          "that device " + std::to_string(dev->index) + " (" + dev->name + ", " +
                              std::to_string(total) + " bytes) can give them (" +
                              std::to_string(flush) + " go to the L2 flush buffer, " +
                              std::to_string(kContextReserve) + " are kept for the CUDA context)",
                          "use a smaller problem size in this context, or a GPU with more memory");
  }

  // The device's record and the model's calibration for it (fitted by earlier runs).
  db::DeviceRecord dr;
  if (dev) {
    dr.name = dev->name, dr.cc_major = dev->limits.cc_major, dr.cc_minor = dev->limits.cc_minor;
    dr.sm_count = dev->limits.sm_count, dr.total_mem = dev->total_mem, dr.source = "driver";
  } else {
    dr.name = "target " + rep.arch, dr.cc_major = limits.cc_major, dr.cc_minor = limits.cc_minor;
    dr.source = "target";
  }
  const std::int64_t device_id = store.upsert_device(dr);
  pruner::Calibration calibration;
  if (use_model)
    if (auto c = store.latest_calibration(device_id))
      calibration = pruner::Calibration::from_json(*c);
  pruner::PruneOptions rule_options;
  rule_options.max_spill_bytes = job.pruner.max_spill_bytes;
  // A context's record: what identifies its times (kernel_id set once the kernel is stored).
  auto context_record = [&](const ContextSpec& ctx, std::int64_t kernel_id) {
    db::ContextRecord cr;
    cr.kernel_id = kernel_id, cr.device_id = device_id, cr.label = ctx.name;
    cr.problem_size_json = value_to_json(Value(ctx.problem_size)).dump();
    nlohmann::json vals = nlohmann::json::object();
    for (auto& [k, v] : ctx.values) vals[k] = value_to_json(v);
    cr.values_json = vals.dump();
    cr.arch = rep.arch, cr.toolkit_version = GPUTUNE_CUDA_TOOLKIT_VERSION,
    cr.nvrtc_version = nvrtc_version();
    cr.driver_version = dev ? Driver::instance().version() : 0;
    return cr;
  };

  // --skip-unchanged: a finished run of this job already measured every context as it is now.
  if (opt.skip_unchanged && !opt.resume_run) {
    if (!dev) {
      log << "gputune: --skip-unchanged: no device (" << no_device_reason
          << "), so no earlier run's times can stand for this one's; compiling as usual\n";
    } else {
      std::vector<db::ContextRecord> now;
      for (const ContextSpec& c : job.contexts) now.push_back(context_record(c, 0));
      if (auto prev =
              store.unchanged_run(job.document, job.strategy, kernel_hash(job, source), now)) {
        rep.run_id = prev->id;
        rep.unchanged = true;
        rep.message = "unchanged since run " + std::to_string(prev->id) + " (finished " +
                      prev->finished_at +
                      "): the same job, strategy, kernel source, device, driver, toolkit and "
                      "contexts, so nothing was re-tuned (--skip-unchanged); `gputune show " +
                      std::to_string(prev->id) + "` has its results";
        return rep;  // print_report says so
      }
    }
  }

  // A space too large to analyse and compile whole: the model searches it, and what it looked
  // at is the plan (tuner/model_search.h).
  std::vector<char> left_out;  // per planned config: drawn from what the search left out
  // A resumed run goes on with the plan it stored (db::RunPlan): searching again could choose
  // other configurations (a calibration fitted in between, another --model-analyses).
  std::optional<db::RunPlan> run_plan;  // stored with the run (model_guided only)
  if (guided && opt.resume_run) run_plan = store.run_plan(*opt.resume_run);
  if (run_plan && run_plan->searched) {
    std::vector<size_t> chosen;
    size_t missing = 0;
    for (const auto* keys : {&run_plan->chosen, &run_plan->left_out})
      for (const std::string& key : *keys) {
        if (const long i = space.find(key); i >= 0)
          chosen.push_back(static_cast<size_t>(i));
        else
          ++missing;
      }
    if (missing)
      throw JobError("command line", "--resume",
                     "cannot resume run " + std::to_string(*opt.resume_run) + ": " +
                         std::to_string(missing) + " of the " +
                         std::to_string(chosen.size() + missing) +
                         " configurations its model search planned are not in the job's space "
                         "as this gputune builds it",
                     "leave out --resume to start a new run");
    order = std::move(chosen);
    left_out.assign(order.size(), 0);
    for (size_t k = run_plan->chosen.size(); k < order.size(); ++k) left_out[k] = 1;
    rep.model_search = run_plan->summary;
    log << "gputune: run " << *opt.resume_run << " goes on with the plan its model search made ("
        << run_plan->chosen.size() << " configurations searched, " << run_plan->left_out.size()
        << " drawn from the " << (space.size() - run_plan->chosen.size())
        << " it left out); the space is not searched again\n";
    rep.planned = order.size();
    configs.clear();
    for (size_t i : order) configs.push_back(space.config(i));
  } else if (run_plan && space.size() > job.model_analyses) {
    log << "gputune: run " << *opt.resume_run << " planned all " << space.size()
        << " configurations without a model search, and goes on so\n";
  } else if (guided && space.size() > job.model_analyses) {
    Stage s(log, "model search");
    ModelSearchOptions mo;
    mo.limit = static_cast<std::size_t>(job.model_analyses);
    mo.threads = opt.threads ? opt.threads : job.compile_threads;
    mo.progress = opt.progress, mo.should_stop = opt.should_stop;
    std::vector<const ContextSpec*> ctxs;
    for (const ContextSpec& c : job.contexts) ctxs.push_back(&c);
    const ModelSearch found = search_by_model(job, source, space, ctxs, limits, rates, calibration,
                                              cache_for(opt.cache_dir), mo);
    if (found.interrupted) {
      rep.interrupted = true;
      rep.exit_code = kExitInterrupted;
      rep.message =
          "interrupted while the model searched the space: the analyses made are in the cache; no "
          "run was stored, and running the job again starts from there";
      return rep;
    }
    rep.model_search = found.summary(space.size(), mo.limit);
    log << "gputune: " << rep.model_search << "\n";
    order = found.chosen;  // the default configuration is always among them
    // The regret sample must be able to see what the search left out: RegretSample of those,
    // drawn at random, join the plan, and each context's sample times those of them that are
    // pruned or skipped (besides its usual draw among the planned ones).
    std::vector<char> looked(space.size(), 0);
    for (size_t i : order) looked[i] = 1;
    const size_t draws = static_cast<size_t>(std::max(0, job.pruner.regret_sample));
    std::mt19937_64 rng(job.seed ^ 0x5eed1eff0u);
    std::vector<size_t> drawn;
    for (size_t tries = 0; drawn.size() < draws && tries < 100 * draws; ++tries) {
      const size_t i = std::uniform_int_distribution<size_t>(0, space.size() - 1)(rng);
      if (!looked[i]) looked[i] = 1, drawn.push_back(i);
    }
    const size_t searched = order.size();
    order.insert(order.end(), drawn.begin(), drawn.end());
    left_out.assign(order.size(), 0);
    for (size_t k = searched; k < order.size(); ++k) left_out[k] = 1;
    if (!drawn.empty())
      log << "gputune: regret sample: " << drawn.size()
          << " configurations the search left out, drawn at random, join the plan, so that the "
             "regret covers what it did not look at\n";
    rep.planned = order.size();
    configs.clear();
    for (size_t i : order) configs.push_back(space.config(i));
    run_plan = db::RunPlan{};
    run_plan->searched = true;
    run_plan->summary = rep.model_search;
    for (size_t k = 0; k < order.size(); ++k)
      (left_out[k] ? run_plan->left_out : run_plan->chosen).push_back(configs[k].key());
  }
  if (guided && !run_plan) run_plan = db::RunPlan{};  // the whole space, no search

  // 5. Compile every planned configuration once (options do not depend on the context); with the
  // pruner on, only those rule 4 could keep in some context (the reference always).
  long def = default_index(job, configs);
  ScreenResult screen;  // empty unless the screen ran
  screen.screened.assign(configs.size(), 0);
  const std::vector<char>& screened = screen.screened;
  CompileReport built = [&] {
    Stage s(log, "compile");
    if (opt.screen && job.pruner.enabled && rates.rates) {
      ScreenOptions so;
      so.margin = job.pruner.model_margin, so.rules = rule_options;
      so.threads = opt.threads, so.progress = opt.progress, so.should_stop = opt.should_stop;
      so.keep_cubins = dev.has_value();  // without a device nothing is loaded
      if (def >= 0) so.always.push_back(static_cast<size_t>(def));
      std::vector<const ContextSpec*> ctxs;
      for (const ContextSpec& c : job.contexts) ctxs.push_back(&c);
      screen = compile_screened(job, source, configs, ctxs, limits, rates, calibration, rep.arch,
                                cache_for(opt.cache_dir), so);
      rep.screened = screen.count;
      if (!screen.interrupted)
        log << "gputune: screen: " << screen.count << " of " << configs.size()
            << " configurations not compiled: rule 4 judged them from their source (their best "
               "prediction at any occupancy is more than "
            << job.pruner.model_margin << " x the best compiled one)\n";
      return std::move(screen.compile);
    }
    return compile_and_inspect(job, source, configs, rep.arch, cache_for(opt.cache_dir),
                               opt.threads ? opt.threads : job.compile_threads, opt.progress,
                               opt.should_stop, /*keep_cubins=*/dev.has_value());
  }();
  const std::vector<CompiledVariant>& compiled = built.compiled;
  const std::vector<Inspected>& inspected = built.inspected;
  rep.cached = built.cached, rep.compiled_ok = built.ok, rep.compile_failed = built.failed;
  // Ctrl-C while compiling: what compiled is in the cubin cache; no run is stored yet.
  if (opt.should_stop && opt.should_stop()) {
    // Failures are the compiles that ran (they have a key); those never started are not.
    rep.compile_failed = static_cast<std::size_t>(
        std::count_if(compiled.begin(), compiled.end(),
                      [](const CompiledVariant& c) { return !c.ok && !c.key.empty(); }));
    rep.interrupted = true;
    rep.exit_code = kExitInterrupted;
    rep.message = "interrupted while compiling: " + std::to_string(built.ok) + " of " +
                  std::to_string(configs.size()) +
                  " configurations compiled (kept in the cubin cache); no run was stored, and "
                  "running the job again starts from there";
    return rep;
  }
  const CompileReport& compile_report = built;
  // Arguments the kernel does not take are bad input: say so before anything is stored.
  check_arguments_against_cubins(job, configs, built);

  // 6. Records that identify this run.
  std::int64_t job_id, kernel_id, run_id;
  std::vector<std::int64_t> variant_ids(configs.size());
  {
    db::Transaction t(store.db());
    job_id = store.upsert_job(job.name, std::filesystem::absolute(job.file).string(), job.document);
    kernel_id = store.upsert_kernel(job.kernel_name, kernel_hash(job, source), source);
    const auto total = static_cast<std::int64_t>(configs.size() * job.contexts.size());
    const std::optional<std::int64_t> budget = planned_budget(job.budget, space.size());
    if (opt.resume_run) {  // checked above
      run_id = *opt.resume_run;
      store.resume_run(run_id, total, budget);
    } else {
      run_id = store.begin_run(job_id, job.strategy, total, budget, job.naive_fallback);
    }
    if (run_plan) store.save_run_plan(run_id, *run_plan);
    for (size_t i = 0; i < configs.size(); ++i)
      variant_ids[i] = store.upsert_variant(kernel_id, configs[i].key(), configs[i].json());
    t.commit();
  }
  rep.run_id = run_id;
  // What the messages of a run that stops early give to go on.
  std::vector<std::string> command = opt.command_line;
  if (command.empty()) {
    command = {"run", job.file.string()};
    if (!opt.db_path.empty()) command.insert(command.end(), {"--db", opt.db_path});
  }
  const std::string resume_command = tuner::resume_command(command, run_id);
  // From here on an error must not leave the run marked running: it ends as failed, with why.
  try {
    if (opt.on_run_started) opt.on_run_started(run_id);
    // On resume: what this run already measured, per (context, variant).
    std::set<std::pair<std::int64_t, std::int64_t>> already;
    if (opt.resume_run)
      for (auto& p : store.measured_pairs(run_id)) already.insert(p);

    // A compile failure of every variant is the job's fault: store the evidence, then say so.
    if (rep.compiled_ok == 0) {
      std::string first_log;
      for (auto& c : compiled)
        if (!c.ok) {
          first_log = c.log;
          break;
        }
      store.finish_run(run_id, "failed", "no configuration compiled");
      db::Transaction t(store.db());
      std::int64_t ctx_id = store.upsert_context(context_record(job.contexts[0], kernel_id));
      for (size_t i = 0; i < configs.size(); ++i) {
        db::MeasurementRecord m;
        m.run_id = run_id, m.context_id = ctx_id, m.variant_id = variant_ids[i];
        m.status = "compile", m.reason = inspected[i].reason, m.log = compiled[i].log;
        m.compile_ms = compiled[i].compile_ms;
        store.add_measurement(m);
      }
      t.commit();
      if (first_log.size() > 4000) first_log = first_log.substr(0, 4000) + "\n...";
      // Parameters become -D macros, which CUDA's own headers also see: name the clash.
      std::string fix = "fix the compile errors above";
      if (first_log.find("__nv_nvrtc_builtin_header") != std::string::npos)
        for (auto& p : job.parameters)
          if (first_log.find(" " + p.name + "[") != std::string::npos ||
              first_log.find(" " + p.name + ";") != std::string::npos ||
              first_log.find(" " + p.name + " ") != std::string::npos)
            fix = "parameter '" + p.name + "' becomes the macro -D" + p.name +
                  ", which clashes with an identifier in CUDA's headers; rename the parameter";
      throw JobError(job.file.string(), "KernelSpecification.KernelFile",
                     "the kernel does not compile for any of the " +
                         std::to_string(configs.size()) + " configurations (run " +
                         std::to_string(run_id) + " keeps every log). First log:\n" + first_log,
                     fix);
    }

    // 7. Per context: geometry, occupancy, and (with a GPU) verify and time.
    std::unique_ptr<PrimaryContext> gpu;
    if (dev) gpu = std::make_unique<PrimaryContext>(dev->index);
    // A launch that never returns ends the process (a kernel cannot be interrupted in it).
    std::unique_ptr<HangWatch> hang_watch;
    if (dev && opt.hang_limit_s > 0)
      hang_watch =
          std::make_unique<HangWatch>(rep.db_path, run_id, opt.hang_limit_s, resume_command,
                                      opt.hang_report_fd, opt.should_stop, spent_before);
    auto variant_name = [&](size_t i) { return "configuration " + configs[i].key(); };
    // The time budget, as a deadline (max() when the job sets none).
    const Clock::time_point measuring_since = Clock::now();
    Clock::time_point deadline = Clock::time_point::max();
    if (job.budget.max_seconds)
      deadline = measuring_since +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                     std::max(0.0, *job.budget.max_seconds - spent_before)));
    // Stored with the run's progress (only where something is measured), so a resume goes on
    // with what is left of the time budget.
    auto seconds_spent = [&]() -> std::optional<double> {
      if (!dev) return std::nullopt;
      return spent_before + std::chrono::duration<double>(Clock::now() - measuring_since).count();
    };
    std::int64_t done_total = static_cast<std::int64_t>(already.size());  // resumed: counted
    for (const ContextSpec& ctx : job.contexts) {
      const auto context_index = static_cast<size_t>(&ctx - job.contexts.data());
      Stage stage(log, "context " + ctx.name);
      std::int64_t ctx_id = store.upsert_context(context_record(ctx, kernel_id));

      std::unique_ptr<Measurer> measurer;
      if (gpu)
        measurer = std::make_unique<Measurer>(*gpu, *dev, make_arguments(job, ctx), job.measure,
                                              job.abs_tolerance, job.rel_tolerance);
      // Reference outputs: ReferenceArguments, else the default configuration's outputs.
      std::vector<std::vector<unsigned char>> reference;
      std::optional<double> default_ms;
      bool need_reference = false;
      if (measurer)
        for (auto& a : measurer->arguments())
          need_reference = need_reference || (a.output && a.reference.empty());

      struct Row {
        std::optional<Variant> v;
        pruner::Occupancy occ;
        std::string geometry_error;
      };
      std::vector<Row> rows(configs.size());
      for (size_t i = 0; i < configs.size(); ++i) {
        try {
          rows[i].v = instantiate_launch(job, configs[i], ctx);  // compiled already
          if (inspected[i].ok)
            rows[i].occ = pruner::compute_occupancy(inspected[i].res, rows[i].v->geometry.grid,
                                                    rows[i].v->geometry.block,
                                                    rows[i].v->geometry.dynamic_smem, limits);
        } catch (const JobError& e) {
          rows[i].geometry_error = e.problem;
        }
      }
      // The model: traffic analysis, predictions; with the pruner enabled, its rules decide what is
      // not measured (the default configuration always is: it is the reference).
      ModelRun model;
      std::vector<bool> pruned(configs.size(), false);
      std::vector<pruner::Decision> decisions(configs.size());
      if (use_model) {
        Stage sm(log, "model " + ctx.name);
        std::vector<bool> usable(configs.size());
        std::vector<pruner::Occupancy> occ(configs.size());
        for (size_t i = 0; i < configs.size(); ++i) {
          usable[i] = inspected[i].ok && rows[i].v.has_value();
          occ[i] = rows[i].occ;
        }
        // The measurer's arguments when there is one, else those sized before compiling.
        const std::vector<HostArgument>& sized = sized_args[context_index];
        if (!dev) {
          // Nothing is measured or fitted, and there are no rates to predict with: the traffic
          // analysis (a clang parse per variant) would take minutes for nothing.
          model.traffic.resize(configs.size());
          model.features.resize(configs.size());
          model.predictions.resize(configs.size());
          log << "gputune: model: not run without a GPU (no rates to predict with; `gputune "
                 "prune JOB --device NAME` ranks the variants for a GPU that is not here)\n";
        } else {
          model = run_model(
              job, source, configs, ctx, model_arguments(measurer ? measurer->arguments() : sized),
              usable, occ, rates, calibration, opt.threads ? opt.threads : job.compile_threads,
              opt.progress, TrafficCache{cache_for(opt.cache_dir).dir()}, opt.should_stop);
        }
        // Ctrl-C while analysing: the measuring loop below stops before its first variant, and
        // nothing the partial model decided is stored.
        if (model.interrupted)
          log << "gputune: model: stopped (Ctrl-C) after analysing part of the space\n";
        else if (dev)
          log << "gputune: model: " << model.predicted << " of " << configs.size()
              << " variants predicted (" << model.analyses_cached
              << " analyses from the cache); rates from " << rates.source << "; calibration "
              << (calibration.samples
                      ? "fitted on " + std::to_string(calibration.samples) + " measurements"
                      : std::string("default"))
              << "\n";
        if (model.not_analysed && !model.interrupted)
          log << "gputune: model: " << model.not_analysed
              << " variants not analysed (judged by the resource rules only): " << model.first_error
              << "\n";
        if (job.pruner.enabled && !model.interrupted) {
          pruner::PruneResult pr = pruner::apply_rules(
              rule_inputs(job, configs, ctx, compile_report), limits, rule_options);
          std::size_t by_model = apply_model_rule(pr.decisions, model, job.pruner.model_margin);
          pr.counts.push_back({"model", by_model + mark_screened(pr.decisions, screen)});
          decisions = pr.decisions;
          log << "gputune: pruner:";
          for (auto& c : pr.counts) log << " " << c.rule << " " << c.removed;
          log << " (removed per rule)\n";
          for (size_t i = 0; i < configs.size(); ++i)
            pruned[i] = (inspected[i].ok || screened[i]) && !decisions[i].kept &&
                        static_cast<long>(i) != def;
        }
      }

      auto base_record = [&](size_t i) {
        db::MeasurementRecord m;
        m.run_id = run_id, m.context_id = ctx_id, m.variant_id = variant_ids[i];
        m.compile_ms = compiled[i].compile_ms;
        m.cubin_hash = compiled[i].cubin_hash;
        if (inspected[i].ok) {
          const auto& r = inspected[i].res;
          m.registers = r.registers, m.static_smem = r.static_smem, m.local_bytes = r.local_bytes;
          if (r.spill_stores >= 0) m.spill_bytes = r.spill_stores + r.spill_loads;
          m.occupancy = rows[i].occ.occupancy;
        }
        if (rows[i].v)
          m.grid = dims(rows[i].v->geometry.grid), m.block = dims(rows[i].v->geometry.block);
        m.is_default = static_cast<long>(i) == def;
        if (use_model && model.predictions[i].ok) m.predicted_ms = model.predictions[i].ms;
        return m;
      };
      auto prefail = [&](size_t i, db::MeasurementRecord& m) {
        if (!compiled[i].ok) {
          m.status = "compile", m.reason = "NVRTC compile failed", m.log = compiled[i].log;
          return true;
        }
        if (!inspected[i].ok) {
          m.status = "compile", m.reason = inspected[i].reason;
          return true;
        }
        if (!rows[i].geometry_error.empty()) {
          m.status = "constraints", m.reason = rows[i].geometry_error;
          return true;
        }
        return false;
      };
      auto work = [&](db::MeasurementRecord& m, const Variant& v, double ms) {
        if (v.flops) m.gflops = *v.flops / (ms * 1e-3) / 1e9;
        if (v.bytes) m.gbps = *v.bytes / (ms * 1e-3) / 1e9;
      };

      Progress prog("measure " + ctx.name, configs.size(), opt.progress && measurer != nullptr);
      size_t failures = 0;
      std::optional<double> best_ms;
      std::vector<std::pair<double, size_t>> correct;  // (median, config index)
      std::map<size_t, std::int64_t> measurement_of;

      // The default configuration runs first: without ReferenceArguments its outputs are the
      // reference every later variant is verified against. If it fails, the first variant that runs
      // correctly becomes the reference (and the log says so).
      std::vector<size_t> run_order;
      if (def >= 0) run_order.push_back(static_cast<size_t>(def));
      for (size_t k = 0; k < configs.size(); ++k)
        if (static_cast<long>(k) != def && !pruned[k]) run_order.push_back(k);
      std::unique_ptr<ModelGuided> guide;
      size_t held_back = 0;  // variants the model rule pruned, which a refit may readmit
      if (guided) {
        // What the model rule pruned is held back, not excluded: a refit on this run's
        // measurements that predicts it within the margin readmits it. Not what joined the plan
        // from what the model's search left out: that is the regret sample's random draw.
        std::vector<bool> excluded = pruned, held(configs.size(), false);
        for (size_t i = 0; i < configs.size(); ++i)
          if (pruned[i] && decisions[i].rule == "model" && inspected[i].ok &&
              model.predictions[i].ok && !(i < left_out.size() && left_out[i]))
            held[i] = true, excluded[i] = false;
        guide = std::make_unique<ModelGuided>(model.features,
                                              rates.rates.value_or(pruner::DeviceRates{}),
                                              calibration, excluded, configs, job.seed);
        guide->hold_back(held, job.pruner.model_margin);
        held_back = guide->held();
        // What earlier contexts of this run and earlier runs of the kernel on this device
        // learned about its parameters orders the search until its own measurements take over.
        if (measurer) {
          auto past = past_measurements(store, device_id, job.kernel_name, run_id, ctx_id, true);
          if (!past.empty()) {
            auto before = ParameterEffects::from_past(past);
            guide->set_prior(before.learned());
            std::string taught = before.summary(4);
            log << "gputune: model_guided: starts from what " << past.size()
                << " earlier measurements of kernel '" << job.kernel_name
                << "' on this device taught ("
                << (guide->effects() ? guide->effects()->prior_values() : 0)
                << " parameter values of this space; "
                << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
          }
          std::size_t imported = 0;
          if (guide->unpredicted_effects())
            if (auto times = past_measurements(store, device_id, job.kernel_name, run_id, ctx_id,
                                               false, &imported);
                !times.empty()) {
              auto before = ParameterEffects::from_past(times);
              guide->set_unpredicted_prior(before.learned());
              std::string taught = before.summary(4);
              log << "gputune: model_guided: variants without a prediction start from what "
                  << times.size() << " earlier measured times of kernel '" << job.kernel_name
                  << "' on this device"
                  << (imported ? " (" + std::to_string(imported) +
                                     " of them from imported Kernel Tuner caches)"
                               : std::string())
                  << " taught (" << guide->unpredicted_effects()->prior_values()
                  << " parameter values of this space; "
                  << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
            }
        }
      }

      // Outcomes measured before an interruption count as measured now (resume).
      std::map<std::int64_t, size_t> index_of_variant;
      for (size_t i = 0; i < configs.size(); ++i) index_of_variant[variant_ids[i]] = i;
      std::map<size_t, double> resumed_ms;
      if (!already.empty())
        for (auto& m : store.measurements(run_id, ctx_id))
          if (m.status == "correct" && m.reason.rfind("re-measurement", 0) != 0 && m.time_ms &&
              index_of_variant.count(m.variant_id)) {
            size_t i = index_of_variant[m.variant_id];
            correct.emplace_back(*m.time_ms, i);
            measurement_of[i] = m.id;
            resumed_ms[i] = *m.time_ms;
            if (!best_ms || *m.time_ms < *best_ms) best_ms = *m.time_ms;
            if (static_cast<long>(i) == def) default_ms = *m.time_ms;
          }

      bool out_of_time = false;
      size_t position = 0, measured_count = 0;
      // Measures (or, without a GPU, records) configuration i; returns its time when correct.
      auto measure_one = [&](size_t i, const std::string& note) -> std::optional<double> {
        std::optional<double> result;
        if (already.count({ctx_id, variant_ids[i]})) {
          // Measured before the interruption. The reference outputs are not stored: recapture them.
          if (measurer && need_reference && reference.empty() && measurement_of.count(i)) {
            Outcome o = measurer->run(compiled[i], *rows[i].v, nullptr, &reference, 1);
            if (o.status != "correct") reference.clear();
          }
          if (resumed_ms.count(i)) result = resumed_ms[i];
          ++measured_count;  // it counts against the budget of configurations, as it did then
          return result;
        }
        db::MeasurementRecord m = base_record(i);
        if (!prefail(i, m)) {
          if (!measurer) {
            m.status = "compiled";
            m.reason = "not timed: no CUDA device (" + no_device_reason + ")";
            if (!rows[i].occ.feasible)
              m.reason += "; predicted launch failure: " + rows[i].occ.infeasible_reason;
          } else if (out_of_time || Clock::now() > deadline) {
            out_of_time = true;
            m.status = "timeout";
            m.reason = "not run: the job's time budget was spent";
          } else {
            bool is_ref = need_reference && reference.empty();
            if (opt.on_measure_start) opt.on_measure_start(ctx_id, variant_ids[i]);
            if (hang_watch) hang_watch->begin(ctx_id, variant_ids[i], variant_name(i));
            Outcome o = measurer->run(compiled[i], *rows[i].v, is_ref ? nullptr : &reference,
                                      is_ref ? &reference : nullptr, job.measure.repeats);
            if (hang_watch) hang_watch->end();
            m.status = o.status, m.reason = o.reason, m.samples_ms = o.samples_ms;
            ++measured_count;
            if (o.status == "correct") {
              m.time_ms = o.median_ms;
              result = o.median_ms;
              work(m, *rows[i].v, o.median_ms);
              correct.emplace_back(o.median_ms, i);
              if (!best_ms || o.median_ms < *best_ms) best_ms = o.median_ms;
              if (static_cast<long>(i) == def) default_ms = o.median_ms;
              if (is_ref) {
                m.reason = "reference: later variants are verified against these outputs";
                if (static_cast<long>(i) != def)
                  log << "gputune: note: the default configuration is not available; reference "
                         "outputs come from "
                      << configs[i].key() << "\n";
              }
            } else {
              if (is_ref) reference.clear();  // outputs captured before a later failure
              if (!rows[i].occ.feasible)
                m.reason +=
                    " (the resource model predicted this: " + rows[i].occ.infeasible_reason + ")";
            }
          }
        }
        if (m.status != "correct" && m.status != "compiled") ++failures;
        if (!note.empty()) m.reason += (m.reason.empty() ? "" : "; ") + note;
        measurement_of[i] = store.add_measurement(m);
        ++done_total;
        if (done_total % 64 == 0) store.update_run_progress(run_id, done_total, seconds_spent());
        return result;
      };

      std::vector<char> visited(configs.size(), 0);
      auto next_index = [&]() -> std::optional<size_t> {
        if (measured_count >= measure_limit) return std::nullopt;
        if (!guide) {
          if (position < run_order.size()) return run_order[position++];
          return std::nullopt;
        }
        if (position == 0 && def >= 0) {
          ++position;
          return static_cast<size_t>(def);
        }
        for (auto i = guide->next(); i; i = guide->next())
          if (!visited[*i]) return i;
        return std::nullopt;
      };
      size_t steps = 0;
      for (auto i = next_index(); i; i = next_index()) {
        if (opt.should_stop && opt.should_stop()) {
          rep.interrupted = true;
          break;
        }
        visited[*i] = 1;
        const bool readmitted = guide && pruned[*i] &&
                                std::find(guide->readmitted().begin(), guide->readmitted().end(),
                                          *i) != guide->readmitted().end();
        std::optional<double> t = measure_one(
            *i, readmitted ? "readmitted: pruned by rule model under the starting calibration, "
                             "predicted within the margin by the model refitted on this run's "
                             "measurements"
                           : "");
        if (guide) guide->report(*i, t);
        prog.update(++steps, failures, best_ms);
      }
      prog.finish();
      if (guide && !guide->stop_reason().empty())
        log << "gputune: model_guided stopped after " << steps << " of " << configs.size()
            << " variants: " << guide->stop_reason() << "\n";
      if (guide && held_back > 0) {
        size_t measured = 0;
        for (size_t i : guide->readmitted()) measured += visited[i];
        log << "gputune: model_guided: refits on this run's measurements readmitted "
            << guide->readmitted().size() << " of the " << held_back
            << " variants the model rule held back (" << measured << " of them measured)\n";
      }
      if (guide && guide->effects() && guide->effects()->samples() > 0) {
        std::string misses = guide->effects()->summary(6);
        log << "gputune: model_guided: what the model misses per parameter value (measured / "
               "predicted against the average, learned from "
            << guide->effects()->samples() << " measurements and used to order the rest): "
            << (misses.empty() ? "no value off by 5% or more" : misses);
        if (guide->effects()->prior_values() > 0)
          log << "; what earlier searches taught kept " << std::fixed << std::setprecision(2)
              << guide->effects()->prior_trust() << std::defaultfloat
              << " of its weight (1: borne out here, 0: not)";
        log << "\n";
      }
      if (guide && guide->unpredicted_effects() && guide->unpredicted_measured() > 0) {
        std::string fast = guide->unpredicted_effects()->summary(6);
        log << "gputune: model_guided: " << guide->unpredicted_measured()
            << " variants without a prediction were measured in the order their parameter "
               "values' measured times suggest (time against the average: "
            << (fast.empty() ? "no value off by 5% or more" : fast) << ")\n";
      }

      // Pruned and skipped variants: a small random sample is timed anyway, to report the regret
      // the pruning would have caused; the other pruned ones are stored with their rule.
      if (use_model && !rep.interrupted) {
        std::vector<size_t> candidates;
        for (size_t i = 0; i < configs.size() && measurer; ++i)
          if (!visited[i] && (inspected[i].ok || screened[i]) && rows[i].v &&
              (pruned[i] ? decisions[i].rule != "duplicate" && decisions[i].rule != "resources"
                         : guide != nullptr))
            candidates.push_back(i);
        // Drawn from what the model's search left out: always in the sample, not in its draw.
        std::vector<size_t> from_left_out;
        std::erase_if(candidates, [&](size_t i) {
          const bool out = i < left_out.size() && left_out[i];
          if (out) from_left_out.push_back(i);
          return out;
        });
        std::mt19937_64 rng(job.seed);
        std::shuffle(candidates.begin(), candidates.end(), rng);
        candidates.resize(std::min<size_t>(
            candidates.size(), static_cast<size_t>(std::max(0, job.pruner.regret_sample))));
        candidates.insert(candidates.end(), from_left_out.begin(), from_left_out.end());
        // The screen did not compile these: compile them now, so the sample covers what it judged.
        std::vector<size_t> late;
        for (size_t i : candidates)
          if (screened[i] && !inspected[i].ok) late.push_back(i);
        compile_into(built, late, job, source, configs, rep.arch, cache_for(opt.cache_dir),
                     opt.threads ? opt.threads : job.compile_threads, false);
        // Checked against the arguments as the first batch was; a mismatch here (a signature that
        // changes with the parameters) fails only that variant: the run's records exist by now.
        fail_mismatched_arguments(job, configs, late, built);
        for (size_t i : late)
          if (inspected[i].ok)
            rows[i].occ = pruner::compute_occupancy(inspected[i].res, rows[i].v->geometry.grid,
                                                    rows[i].v->geometry.block,
                                                    rows[i].v->geometry.dynamic_smem, limits);
        std::optional<double> best_kept = best_ms, best_sample;
        size_t unusable = 0;  // failed to compile, or their parameters do not match the arguments
        size_t left_out_timed = 0;  // of the usable ones: drawn from what the search left out
        for (size_t i : candidates) {
          const bool usable = compiled[i].ok && inspected[i].ok;
          unusable += !usable;
          left_out_timed += usable && i < left_out.size() && left_out[i];
        }
        for (size_t i : candidates) {
          if (opt.should_stop && opt.should_stop()) {
            rep.interrupted = true;
            break;
          }
          visited[i] = 1;
          std::string why =
              pruned[i] ? "pruned by rule " + decisions[i].rule : "skipped by model_guided";
          auto t = measure_one(i, "regret sample (" + why + ")");
          if (t && (!best_sample || *t < *best_sample)) best_sample = t;
        }
        if (measurer && best_kept && !candidates.empty()) {
          double regret =
              best_sample && *best_sample < *best_kept ? *best_kept / *best_sample : 1.0;
          rep.regret = regret;
          rep.regret_sampled += candidates.size() - unusable;
          log << "gputune: regret sample: " << candidates.size() - unusable
              << " pruned or skipped variants timed"
              << (left_out_timed ? " (" + std::to_string(left_out_timed) +
                                       " of them left out by the model's search)"
                                 : std::string())
              << (unusable ? " (" + std::to_string(unusable) + " more could not run)" : "")
              << "; best " << (best_sample ? *best_sample : 0) << " ms against the measured best "
              << *best_kept << " ms: regret " << regret
              << (regret > 1 ? " (the pruning missed a faster variant)" : "") << "\n";
        }
        for (size_t i = 0; i < configs.size(); ++i)
          if (pruned[i] && !visited[i] && !already.count({ctx_id, variant_ids[i]})) {
            db::MeasurementRecord m = base_record(i);
            m.status = "constraints";
            m.reason = "pruned by rule " + decisions[i].rule + ": " + decisions[i].reason;
            store.add_measurement(m);
            ++done_total;
          }
      }

      // The model learns from what was measured: a calibration per device, and how well its
      // ranking (before this fit) matched the measurements.
      if (use_model && measurer && rates.rates) {
        std::vector<pruner::ModelFeatures> f;
        std::vector<double> ms, pred;
        for (auto& [t, i] : correct)
          if (model.predictions[i].ok) {
            f.push_back(model.features[i]);
            ms.push_back(t);
            pred.push_back(model.predictions[i].ms);
          }
        if (pred.size() >= 3) {
          rep.spearman = pruner::spearman(pred, ms);
          log << "gputune: model: Spearman rank correlation " << *rep.spearman << " over "
              << pred.size() << " measured variants\n";
        }
        pruner::Calibration fit = pruner::calibrate(f, ms, *rates.rates, calibration);
        if (fit.samples > 0) {
          calibration = fit;
          store.save_calibration(device_id, run_id, fit.samples, fit.rms_log_error, fit.json());
          log << "gputune: model: calibration fitted on " << fit.samples
              << " measurements (rms log error " << fit.rms_log_error << ")\n";
        }
      }

      if (rep.interrupted) break;
      // 8. Re-measure the top few before naming a winner: the fastest of fresh medians wins.
      if (measurer && !correct.empty()) {
        std::sort(correct.begin(), correct.end());
        size_t top =
            std::min<size_t>(correct.size(), static_cast<size_t>(job.measure.remeasure_top));
        // Until a fresh median exists, the first pass's fastest is the winner.
        std::int64_t winner_mid = measurement_of[correct[0].second];
        double winner_ms = correct[0].first;
        size_t winner_i = correct[0].second;
        bool fresh = false;
        for (size_t t = 0; t < top; ++t) {
          size_t i = correct[t].second;
          if (opt.on_measure_start) opt.on_measure_start(ctx_id, variant_ids[i]);
          if (hang_watch) hang_watch->begin(ctx_id, variant_ids[i], variant_name(i));
          Outcome o =
              measurer->run(compiled[i], *rows[i].v, reference.empty() ? nullptr : &reference,
                            nullptr, job.measure.repeats);
          if (hang_watch) hang_watch->end();
          db::MeasurementRecord m = base_record(i);
          m.status = o.status, m.samples_ms = o.samples_ms;
          m.reason = "re-measurement of a top-" + std::to_string(top) + " variant" +
                     (o.reason.empty() ? "" : ": " + o.reason);
          if (o.status == "correct") {
            m.time_ms = o.median_ms;
            work(m, *rows[i].v, o.median_ms);
          }
          std::int64_t mid = store.add_measurement(m);
          if (o.status == "correct" && (!fresh || o.median_ms < winner_ms)) {
            winner_ms = o.median_ms, winner_mid = mid, winner_i = i;
            fresh = true;
          }
        }
        store.offer_winner(ctx_id, winner_mid);
        BestRow b;
        b.context = ctx.name, b.config_key = configs[winner_i].key(),
        b.params_json = configs[winner_i].json();
        b.time_ms = winner_ms;
        if (rows[winner_i].v->flops) b.gflops = *rows[winner_i].v->flops / (winner_ms * 1e-3) / 1e9;
        if (rows[winner_i].v->bytes) b.gbps = *rows[winner_i].v->bytes / (winner_ms * 1e-3) / 1e9;
        b.registers = inspected[winner_i].res.registers;
        b.occupancy = rows[winner_i].occ.occupancy;
        b.default_ms = default_ms;
        rep.best.push_back(b);
      }
      rep.correct += correct.size();
      rep.failed += failures;
    }

    rep.timed = dev.has_value();
    if (rep.interrupted) {
      rep.exit_code = kExitInterrupted;
      rep.message = "interrupted after " + std::to_string(done_total) + " measurements; run " +
                    std::to_string(run_id) + " can be resumed";
      store.finish_run(run_id, "interrupted", rep.message);
    } else if (!dev) {
      rep.exit_code = kExitNoDevice;
      rep.message = "compiled and inspected " + std::to_string(rep.compiled_ok) + " of " +
                    std::to_string(rep.planned) + " variants for " + rep.arch +
                    " and stored them in " + rep.db_path + " (run " + std::to_string(run_id) +
                    "); nothing was timed because no CUDA device was found: " + no_device_reason;
      store.finish_run(run_id, "no_device", rep.message);
    } else if (rep.correct == 0) {
      rep.exit_code = kExitNoCorrect;
      rep.message =
          "no variant produced a correct result; see `gputune show " + std::to_string(run_id) + "`";
      store.finish_run(run_id, "failed", rep.message);
    } else {
      rep.message = "tuned " + std::to_string(job.contexts.size()) + " context(s) on " + dev->name +
                    "; run " + std::to_string(run_id) + " in " + rep.db_path;
      store.finish_run(run_id, "done", rep.message);
    }
    store.update_run_progress(run_id, done_total, seconds_spent());
    return rep;
  } catch (const std::exception& e) {
    try {
      if (auto r = store.run(run_id); r && r->status == "running") {
        const std::int64_t measured =
            store.stop_run(run_id, "failed", std::string("stopped by an error: ") + e.what());
        log << "gputune: run " << run_id << " stopped by the error below; its " << measured
            << " measurements are stored, and `" << resume_command << "` measures the rest\n";
      }
    } catch (const std::exception&) {  // the database itself failed: the first error matters
    }
    throw;
  }
}

void print_report(const RunReport& r, std::ostream& out) {
  if (r.unchanged) {
    out << r.message << "\n";
    return;
  }
  out << "space " << r.space_size << " configurations, planned " << r.planned << ", compiled "
      << r.compiled_ok << " (" << r.cached << " from cache), compile failures " << r.compile_failed
      << "\n";
  if (!r.best.empty()) {
    out << std::left << std::setw(14) << "context" << std::setw(12) << "time (ms)" << std::setw(11)
        << "GFLOP/s" << std::setw(9) << "GB/s" << std::setw(6) << "regs" << std::setw(6) << "occ"
        << std::setw(9) << "speedup"
        << "configuration\n";
    for (auto& b : r.best) {
      auto opt = [](const std::optional<double>& v) {
        std::ostringstream s;
        if (v)
          s << std::fixed << std::setprecision(1) << *v;
        else
          s << "-";
        return s.str();
      };
      std::ostringstream t, occ, sp;
      t << std::setprecision(4) << b.time_ms;
      occ << std::fixed << std::setprecision(2) << b.occupancy;
      if (b.default_ms)
        sp << std::fixed << std::setprecision(2) << *b.default_ms / b.time_ms << "x";
      else
        sp << "-";
      out << std::left << std::setw(14) << b.context << std::setw(12) << t.str() << std::setw(11)
          << opt(b.gflops) << std::setw(9) << opt(b.gbps) << std::setw(6) << b.registers
          << std::setw(6) << occ.str() << std::setw(9) << sp.str() << b.params_json << "\n";
    }
  }
  out << r.message << "\n";
}

DeviceInfo job_device(const Job& job, const std::string& source, const std::string& field) {
  const int n = Driver::instance().device_count();
  if (job.device_index < 0 || job.device_index >= n)
    throw JobError(source.empty() ? job.file.string() : source, field,
                   "there is no CUDA device " + std::to_string(job.device_index) +
                       ": this machine has " + describe_devices() +
                       " (CUDA_VISIBLE_DEVICES, when set, numbers the ones it names from 0)",
                   n == 1  ? std::string("use 0, the only device")
                   : n > 1 ? "use an index from 0 to " + std::to_string(n - 1)
                           : std::string("run where there is a GPU"));
  return query_device(job.device_index);
}

}  // namespace gputune::tuner
