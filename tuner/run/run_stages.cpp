// The stages of `gputune run` around the contexts (tuner/run/run_stages.h): prepare_run (inputs,
// database, resume checks, device, argument sizes), open_run (the run's rows, before the first
// compile), the default configuration's compile, and finish_run (the run's status and message).
// Each context's tuning is tune_context.cpp's.
#include "tuner/run/run_stages.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tuner/common/command_line.h"
#include "tuner/measure/arguments.h"
#include "tuner/measure/device_info.h"
#include "tuner/run/hang_watch.h"
#include "tuner/search/strategy.h"
#include "variants/instantiate.h"

#ifndef GPUTUNE_CUDA_TOOLKIT_VERSION
#define GPUTUNE_CUDA_TOOLKIT_VERSION "unknown"
#endif

// The stages around the search (tuner/run/run_stages.h): what a run needs before it begins, its
// records, compiling its candidates, and how it ends.

namespace gputune::tuner {

Stage::Stage(std::ostream& log, std::string name)
    : Stage([&log](const std::string& line) { log << line << "\n"; }, std::move(name)) {}

Stage::Stage(std::function<void(const std::string&)> say, std::string name)
    : say_(std::move(say)), name_(std::move(name)), t0_(Clock::now()) {}

Stage::~Stage() {
  if (!std::getenv("GPUTUNE_TIME_STAGES")) return;
  std::ostringstream line;
  line << "gputune: stage " << name_ << " took "
       << std::chrono::duration<double, std::milli>(Clock::now() - t0_).count() << " ms";
  say_(line.str());
}

long Plan::position(std::size_t space_index) const {
  const auto it = position_of.find(space_index);
  return it == position_of.end() ? -1 : static_cast<long>(it->second);
}

RunState::RunState(const Job& j, const RunOptions& o, RunReport& r)
    : job(j), opt(o), rep(r), log(o.log ? *o.log : std::cerr) {}

Candidate& RunState::candidate(std::size_t space_index) {
  auto [it, inserted] = candidates.try_emplace(space_index);
  if (inserted) {
    it->second.index = space_index;
    it->second.config = space.config(space_index);
    it->second.is_default = static_cast<long>(space_index) == default_index;
  }
  return it->second;
}

std::int64_t RunState::variant_id(Candidate& c) {
  if (c.variant_id == 0)
    c.variant_id = store->upsert_variant(kernel_id, c.config.key(), c.config.json());
  return c.variant_id;
}

std::optional<double> RunState::seconds_spent() const {
  if (!dev) return std::nullopt;
  return spent_before + std::chrono::duration<double>(Clock::now() - measuring_since).count();
}

db::ContextRecord RunState::context_record(const ContextSpec& ctx) const {
  db::ContextRecord cr;
  cr.kernel_id = kernel_id, cr.device_id = device_id, cr.label = ctx.name;
  cr.problem_size_json = value_to_json(Value(ctx.problem_size)).dump();
  nlohmann::json vals = nlohmann::json::object();
  for (auto& [k, v] : ctx.values) vals[k] = value_to_json(v);
  cr.values_json = vals.dump();
  cr.arch = rep.arch, cr.toolkit_version = GPUTUNE_CUDA_TOOLKIT_VERSION,
  cr.nvrtc_version = cuda::nvrtc_version();
  cr.driver_version = dev ? cuda::Driver::instance().version() : 0;
  return cr;
}

namespace {

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

}  // namespace

/// --resume RUN: the run must be one of this job's, searched the same way, with the same space,
/// arguments and kernel source; it goes on with the budgets it planned with.
void check_resume(RunState& s) {
  Job& job = s.job;
  const RunOptions& opt = s.opt;
  const RunReport& rep = s.rep;
  std::ostream& log = s.log;
  const Space& space = s.space;
  db::Store& store = *s.store;
  double& spent_before = s.spent_before;
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
  // A job that names no search goes on with the run's (its budget chose it: the run's budget
  // is what it goes on with, below).
  if (prev->strategy != job.strategy && !job.search_named &&
      (prev->strategy == "brute_force" || prev->strategy == "random" ||
       prev->strategy == "portfolio" || prev->strategy == "model_guided")) {
    set_strategy(job, prev->strategy, "command line", "--resume");
    job.search_named = false;
  }
  if (prev->strategy != job.strategy)
    throw JobError(
        "command line", "--resume",
        what + ": it searched with strategy " + prev->strategy + ", this job with " + job.strategy,
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
      std::find(kernels.begin(), kernels.end(), kernel_hash(job, s.source)) == kernels.end())
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

/// The device: the driver is loaded at run time; without it everything up to timing still runs
/// (the target architecture then comes from --arch, the job or sm_90).
void choose_device(RunState& s) {
  const Job& job = s.job;
  const RunOptions& opt = s.opt;
  RunReport& rep = s.rep;
  std::ostream& log = s.log;
  const Space& space = s.space;
  std::optional<DeviceInfo> dev;
  std::string no_device_reason;
  if (opt.no_gpu) {
    no_device_reason = "--no-gpu was given";
  } else if (const cuda::Driver& d = cuda::Driver::instance(); !d.available()) {
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

  s.dev = dev;
  s.no_device_reason = no_device_reason;
  s.limits = limits;
  s.rates = rates;
  // model_guided, and portfolio (model_guided's search without the model): a search with
  // feedback over the whole space.
  s.guided = job.strategy == "model_guided" || job.strategy == "portfolio";
  s.use_model = job.strategy == "model_guided" || job.pruner.enabled;
}

/// Every context's arguments are sized, and checked against the memory they will take (this
/// machine's; the GPU's, less the L2 flush buffer and what the CUDA context itself takes),
/// before anything is compiled: bad sizes are the job's fault, found in seconds.
void check_argument_sizes(const RunState& s) {
  const Job& job = s.job;
  const std::optional<DeviceInfo>& dev = s.dev;
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
}

/// The device's record and the model's calibration for it (fitted by earlier runs); a resumed
/// model_guided run's stored plan.
void record_device(RunState& s) {
  const Job& job = s.job;
  const RunOptions& opt = s.opt;
  const RunReport& rep = s.rep;
  const std::optional<DeviceInfo>& dev = s.dev;
  const pruner::DeviceLimits& limits = s.limits;
  db::Store& store = *s.store;
  db::DeviceRecord dr;
  if (dev) {
    dr.name = dev->name, dr.cc_major = dev->limits.cc_major, dr.cc_minor = dev->limits.cc_minor;
    dr.sm_count = dev->limits.sm_count, dr.total_mem = dev->total_mem, dr.source = "driver";
  } else {
    dr.name = "target " + rep.arch, dr.cc_major = limits.cc_major, dr.cc_minor = limits.cc_minor;
    dr.source = "target";
  }
  s.device_id = store.upsert_device(dr);
  if (s.use_model)
    if (auto c = store.latest_calibration(s.device_id))
      s.calibration = pruner::Calibration::from_json(*c);
  s.rule_options.max_spill_bytes = job.pruner.max_spill_bytes;
  if (s.guided && opt.resume_run) s.stored_plan = store.run_plan(*opt.resume_run);
}

/// --skip-unchanged: true (the report says so) when a finished run of this job already measured
/// every context as it is now.
bool unchanged_since_last_run(RunState& s) {
  const Job& job = s.job;
  const RunOptions& opt = s.opt;
  RunReport& rep = s.rep;
  if (!opt.skip_unchanged || opt.resume_run) return false;
  if (!s.dev) {
    s.log << "gputune: --skip-unchanged: no device (" << s.no_device_reason
          << "), so no earlier run's times can stand for this one's; compiling as usual\n";
    return false;
  }
  std::vector<db::ContextRecord> now;
  for (const ContextSpec& c : job.contexts) now.push_back(s.context_record(c));
  auto prev = s.store->unchanged_run(job.document, job.strategy, kernel_hash(job, s.source), now);
  if (!prev) return false;
  rep.run_id = prev->id;
  rep.unchanged = true;
  rep.message = "unchanged since run " + std::to_string(prev->id) + " (finished " +
                prev->finished_at +
                "): the same job, strategy, kernel source, device, driver, toolkit and "
                "contexts, so nothing was re-tuned (--skip-unchanged); `gputune show " +
                std::to_string(prev->id) + "` has its results";
  return true;  // print_report says so
}

bool prepare_run(RunState& s) {
  Job& job = s.job;
  const RunOptions& opt = s.opt;
  RunReport& rep = s.rep;
  std::ostream& log = s.log;

  // Inputs: source and space. Bad input stops here, before the database is touched.
  s.source = load_kernel_source(job);
  s.space = [&] {
    Stage st(log, "space");
    return build_space(job);
  }();
  const Space& space = s.space;
  rep.space_size = space.size();
  if (space.empty())
    throw JobError(job.file.string(), "ConfigurationSpace.Conditions", space.explain_empty(),
                   "relax the conditions or widen the parameter values");
  s.default_index = space.find(default_key(job));

  // Database (fails fast on a file that is not ours, before any work).
  rep.db_path = !opt.db_path.empty()    ? opt.db_path
                : !job.database.empty() ? (job.file.parent_path() / job.database).string()
                                        : db::default_database_path();
  s.store = std::make_unique<db::Store>(rep.db_path);
  // Seconds of the job's time budget already spent measuring by this run (resumed).
  s.spent_before = opt.budget_spent_s;
  // A run to resume must be one of this job's, searched the same way: said before compiling.
  if (opt.resume_run) check_resume(s);
  choose_device(s);
  check_argument_sizes(s);
  record_device(s);
  return !unchanged_since_last_run(s);
}

/// How long a resume waits for a process still finishing the same run: it stores the variant in
/// flight (at most the job's repeats of one kernel) before it exits.
constexpr double kRunLockWaitSeconds = 120;

void open_run(RunState& s) {
  const Job& job = s.job;
  db::Store& store = *s.store;
  if (s.opt.resume_run) {
    // A process still finishing this run (the child of a `gputune run` that was killed, told to
    // stop, stores the variant in flight first) ends before this one reads what it stored. Not
    // inside a transaction: that process needs the database to finish.
    s.run_lock = db::RunLock::acquire(
        store.db().path(), *s.opt.resume_run, kRunLockWaitSeconds,
        [&] {
          s.log << "gputune: run " << *s.opt.resume_run
                << " is still being stopped by another process; waiting for it to end (up to "
                << kRunLockWaitSeconds << " s)\n";
        },
        s.opt.should_stop);
  }
  {
    db::Transaction t(store.db());
    s.job_id =
        store.upsert_job(job.name, std::filesystem::absolute(job.file).string(), job.document);
    s.kernel_id = store.upsert_kernel(job.kernel_name, kernel_hash(job, s.source), s.source);
    // What it plans, as far as is known before a model search (which sets it once it chose).
    std::size_t planned = s.space.size();
    if (!s.guided)
      planned = std::min(s.space.size(), budget_configurations(job.budget, s.space.size()) + 1);
    else if (!s.stored_plan && s.space.size() > job.model_analyses)
      planned = static_cast<std::size_t>(job.model_analyses);
    else if (s.stored_plan && s.stored_plan->searched)
      planned = s.stored_plan->chosen.size() + s.stored_plan->left_out.size();
    const auto total = static_cast<std::int64_t>(planned * job.contexts.size());
    const std::optional<std::int64_t> budget = planned_budget(job.budget, s.space.size());
    if (s.opt.resume_run) {  // checked by prepare_run
      s.run_id = *s.opt.resume_run;
      store.resume_run(s.run_id, total, budget);
    } else {
      std::string notes;
      for (const std::string& n : job.notes) notes += n + "\n";
      s.run_id = store.begin_run(s.job_id, job.strategy, total, budget, job.naive_fallback, notes);
    }
    t.commit();
  }
  if (!s.run_lock.held())  // a new run: claimed at once, so that its resume waits for it
    s.run_lock = db::RunLock::acquire(store.db().path(), s.run_id, kRunLockWaitSeconds);
  s.rep.run_id = s.run_id;
  // What the messages of a run that stops early give to go on.
  std::vector<std::string> command = s.opt.command_line;
  if (command.empty()) {
    command = {"run", job.file.string()};
    if (!s.opt.db_path.empty()) command.insert(command.end(), {"--db", s.opt.db_path});
  }
  s.resume_command = tuner::resume_command(command, s.run_id);
  if (s.opt.resume_run)
    for (auto& p : store.measured_pairs(s.run_id)) s.already.insert(p);
  s.done_total = static_cast<std::int64_t>(s.already.size());  // resumed: counted
}

void check_compiled(RunState& s, Candidate& c) {
  if (c.state != Candidate::Compile::kDone || !c.usable()) return;
  if (!s.arguments_checked) {
    // The first variant that compiled decides whether the job's arguments fit the kernel: a
    // mismatch there is the job's (bad input, before anything is measured).
    check_cubin_arguments(s.job, c.inspected, c.config);
    s.arguments_checked = true;
    return;
  }
  // A signature that changes with the parameters fails that variant alone.
  try {
    check_cubin_arguments(s.job, c.inspected, c.config);
  } catch (const JobError& e) {
    c.inspected.ok = false;
    c.inspected.reason = e.what();
  }
}

bool wait_compiled(RunState& s, Candidate& c, const std::function<void(Candidate&)>& on_other) {
  if (c.state == Candidate::Compile::kNot) s.pool->submit(c);
  while (c.state != Candidate::Compile::kDone) {
    if (s.opt.should_stop && s.opt.should_stop()) return false;
    Candidate* done = s.pool->wait(std::chrono::milliseconds(100));
    if (!done) continue;
    check_compiled(s, *done);
    if (done != &c && on_other) on_other(*done);
  }
  return true;
}

void finish_run(RunState& s) {
  RunReport& rep = s.rep;
  db::Store& store = *s.store;
  rep.timed = s.dev.has_value();
  if (rep.interrupted) {
    rep.exit_code = kExitInterrupted;
    rep.message = "interrupted after " + std::to_string(s.done_total) + " measurements; run " +
                  std::to_string(s.run_id) + " can be resumed (`" + s.resume_command +
                  "`); each context's fastest variant so far is its provisional winner";
    store.finish_run(s.run_id, db::RunStatus::kInterrupted, rep.message);
  } else if (!s.dev) {
    rep.exit_code = kExitNoDevice;
    rep.message = "compiled and inspected " + std::to_string(rep.compiled_ok) + " of " +
                  std::to_string(rep.planned) + " variants for " + rep.arch +
                  " and stored them in " + rep.db_path + " (run " + std::to_string(s.run_id) +
                  "); nothing was timed because no CUDA device was found: " + s.no_device_reason;
    store.finish_run(s.run_id, db::RunStatus::kNoDevice, rep.message);
  } else if (rep.correct == 0) {
    rep.exit_code = kExitNoCorrect;
    rep.message =
        "no variant produced a correct result; see `gputune show " + std::to_string(s.run_id) + "`";
    store.finish_run(s.run_id, db::RunStatus::kFailed, rep.message);
  } else {
    rep.message = "tuned " + std::to_string(s.job.contexts.size()) + " context(s) on " +
                  s.dev->name + "; run " + std::to_string(s.run_id) + " in " + rep.db_path;
    store.finish_run(s.run_id, db::RunStatus::kDone, rep.message);
  }
  store.update_run_progress(s.run_id, s.done_total, s.seconds_spent());
}

}  // namespace gputune::tuner
