/** \file app/cli_tuning.cpp
 * Owns: the tuning commands: run, batch, space, generate, check, prune, replay. Each parses its
 * options and calls one engine entry point (tuner/, or app/batch.h for batch).
 * Must not: hold tuning logic; what a command does lives in the library it calls.
 */
#include <algorithm>
#include <iostream>
#include <sstream>
#include <vector>

#include "app/batch.h"
#include "app/cli.h"
#include "app/slurm.h"
#include "cuda/cache_admin.h"
#include "pruner/device_spec.h"
#include "tuner/common/progress.h"
#include "tuner/common/stop_signals.h"
#include "tuner/common/tuning_job.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/emulator/cpu_check.h"
#include "tuner/emulator/cpu_emulator.h"
#include "tuner/run/hang_watch.h"
#include "tuner/run/pipeline.h"
#include "tuner/tools/generate.h"
#include "tuner/tools/prune_command.h"
#include "tuner/tools/replay.h"
#include "variants/space.h"

namespace gputune::app {
int cmd_run(int argc, char** argv) {
  auto o = command_options("gputune run",
                           "Tune a T1 job: compile, inspect, verify and time its configurations");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "db", "database file (default: job's GPUTune.Database, $GPUTUNE_DB, ./gputune.db)",
      cxxopts::value<std::string>())("arch",
                                     "target architecture, e.g. sm_90 (default: the device's)",
                                     cxxopts::value<std::string>())(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>()->default_value("0"))(
      "strategy",
      "replace the job's GPUTune.Search.Strategy: brute_force, random, portfolio, model_guided",
      cxxopts::value<std::string>())(
      "budget", "replace the job's GPUTune.Budget.Configurations (configurations measured)",
      cxxopts::value<std::uint64_t>())("model-analyses", kModelAnalysesHelp,
                                       cxxopts::value<std::int64_t>())(
      "no-gpu", "do not use a GPU even if one is present")(
      "resume", "continue interrupted run RUN of this job, skipping what it measured",
      cxxopts::value<std::int64_t>())(
      "no-screen",
      "compile every planned configuration, also those rule 4 drops from their source")(
      "gpu", "CUDA device to tune on (default: the job's GPUTune.Device.Index, else 0)",
      cxxopts::value<int>())(
      "kernel-timeout",
      "seconds before a measurement counts as hung (stored as timeout); 0: never (default: 120+)",
      cxxopts::value<double>())(
      "max-restarts", "restarts with --resume after hung kernels; 0: stop at the first hang",
      cxxopts::value<int>()->default_value("10"))(
      "skip-unchanged",
      "exit 0 at once when a finished run measured the same source, device and contexts")(
      "compile-nice", kCompileNiceHelp, cxxopts::value<int>())("q,quiet", "no progress line")(
      "h,help", "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  apply_compile_nice(r);
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  if (r.count("strategy")) {
    set_strategy(job, r["strategy"].as<std::string>(), "command line", "--strategy");
  }
  if (r.count("budget")) job.budget.max_configurations = budget_option(r);
  apply_default_strategy(job);  // a budget from the command line chooses as one in the job does
  if (r.count("model-analyses")) job.model_analyses = model_analyses_option(r);
  tuner::RunOptions opt;
  if (r.count("db")) opt.db_path = r["db"].as<std::string>();
  if (r.count("arch")) opt.arch = r["arch"].as<std::string>();
  if (r.count("cache-dir")) opt.cache_dir = r["cache-dir"].as<std::string>();
  opt.threads = r["threads"].as<int>();
  opt.no_gpu = r.count("no-gpu") > 0;
  opt.screen = r.count("no-screen") == 0;
  if (r.count("resume")) opt.resume_run = r["resume"].as<std::int64_t>();
  opt.budget_given = r.count("budget") > 0;
  opt.skip_unchanged = r.count("skip-unchanged") > 0;
  if (opt.skip_unchanged && opt.resume_run)
    throw JobError("command line", "--skip-unchanged",
                   "given with --resume, which goes on with a run whatever changed",
                   "drop one of the two");
  opt.command_line.assign(argv, argv + argc);
  // A measurement launches once to verify (at most TimeoutSeconds to go on), warms up and times
  // until TimeoutSeconds is spent: by default, a hang is what takes longer than all of that.
  opt.hang_limit_s = r.count("kernel-timeout")
                         ? r["kernel-timeout"].as<double>()
                         : std::max(120.0, (job.measure.warmup + 3) * job.measure.timeout_seconds);
  if (!(opt.hang_limit_s >= 0) || opt.hang_limit_s > 1e7)
    throw JobError("command line", "--kernel-timeout",
                   "a timeout of " + std::to_string(opt.hang_limit_s) + " s",
                   "give seconds from 0 (wait for ever) to 10000000");
  const int max_restarts = max_restarts_option(r);
  // A hung kernel ends the process that launched it, so a supervising process (which never loads
  // the driver) runs the tuning as its child and restarts it after each hang.
  const tuner::SupervisorLink link = tuner::supervisor_link();
  if (link.fd < 0 && max_restarts > 0 && opt.hang_limit_s > 0 && !opt.no_gpu)
    return tuner::run_restarting(std::vector<std::string>(argv, argv + argc), max_restarts,
                                 std::cerr);
  opt.hang_report_fd = link.fd, opt.budget_spent_s = link.budget_spent_s;
  tuner::watch_stop_signals(
      "\ngputune: stopping before the next measurement (or compile); what was measured stays "
      "stored (again to quit now)\n");
  if (!opt.no_gpu) apply_gpu_option(r, job);
  opt.progress = !r.count("quiet") && tuner::stderr_is_terminal();
  opt.should_stop = [] { return tuner::stop_requested(); };
  tuner::RunReport rep = tuner::run_job(job, opt);
  tuner::print_report(rep, std::cout);
  cuda::trim_cache_after_use(tuner::cache_for(opt.cache_dir).dir(), std::cerr);
  return rep.exit_code;
}

namespace {

/// `batch --slurm`: the suite as a job array; nothing is tuned here.
int batch_slurm(const cxxopts::ParseResult& r, const Suite& suite, const BatchOptions& bo) {
  SlurmSuite ss;
  ss.suite_args = r["suite"].as<std::vector<std::string>>();
  for (const SuiteJob& j : suite.jobs) ss.job_files.push_back(j.file);
  ss.db = bo.db_path;
  ss.gputune = gputune_binary();
  // Every task runs `batch` with the options given (those of `run` it passes on, --max-restarts,
  // --regression); a relative cache folder is the one here, not the node's working folder.
  for (std::size_t i = 0; i < bo.run_args.size(); ++i) {
    ss.batch_args.push_back(bo.run_args[i]);
    if (bo.run_args[i] == "--cache-dir" && i + 1 < bo.run_args.size()) {
      const std::string dir = bo.run_args[++i];
      ss.batch_args.push_back(dir == "-" ? dir : std::filesystem::absolute(dir).string());
    }
  }
  if (r.count("max-restarts"))
    ss.batch_args.insert(ss.batch_args.end(), {"--max-restarts", std::to_string(bo.max_restarts)});
  if (r.count("regression")) {
    std::ostringstream v;
    v << r["regression"].as<double>();
    for (auto* args : {&ss.batch_args, &ss.report_args})
      args->insert(args->end(), {"--regression", v.str()});
  }
  SlurmOptions so;
  so.partition = string_option(r, "partition");
  so.gres = r["gres"].as<std::string>();
  if (r.count("tasks")) {
    so.tasks = r["tasks"].as<std::size_t>();
    if (so.tasks < 1 || so.tasks > 1000)
      throw JobError("command line", "--tasks",
                     "a job array of " + std::to_string(so.tasks) + " tasks",
                     "give 1 to 1000 (leave it out for one task per job)");
  }
  if (r.count("nodes-per-type")) {
    so.nodes_per_type = r["nodes-per-type"].as<std::size_t>();
    if (so.nodes_per_type < 1)
      throw JobError("command line", "--nodes-per-type", "0 nodes",
                     "give at least 1 (leave it out for as many tasks at once as SLURM runs)");
  }
  const SlurmPlan plan = plan_slurm(ss, so);
  write_slurm_files(plan);
  std::cout << plan.array_script;
  std::cerr << "gputune batch: " << suite.jobs.size() << " job"
            << (suite.jobs.size() == 1 ? "" : "s") << " in " << plan.task_jobs.size()
            << " array task" << (plan.task_jobs.size() == 1 ? "" : "s") << ": wrote "
            << plan.array_file.string() << " (above) and " << plan.merge_file.string()
            << "; shards in " << plan.shards.string() << ", logs in " << plan.logs.string() << "\n";
  if (!r.count("submit")) {
    std::cerr << "gputune batch: submit both with: " << plan.submit_command << "\n";
    return 0;
  }
  try {
    const SlurmSubmission s = submit_slurm(plan);
    std::cerr << "gputune batch: submitted the array as job " << s.array_job
              << " and the merge and report as job " << s.merge_job << " (after it)\n";
    std::cout << "array job " << s.array_job << "\nmerge job " << s.merge_job << "\n";
  } catch (const SlurmError& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code;
  }
  return 0;
}

}  // namespace

int cmd_batch(int argc, char** argv) {
  auto o = command_options(
      "gputune batch",
      "Tune a suite of jobs one after another, each as its own `gputune run`, and compare every "
      "context's best time with the previous run's (a nightly re-tune)");
  o.add_options()("suite", "suite files, folders of jobs, or job files",
                  cxxopts::value<std::vector<std::string>>())(
      "db", "database file for every job's runs (default: $GPUTUNE_DB, ./gputune.db)",
      cxxopts::value<std::string>())(
      "regression", "percent slower than the previous run's best that is a regression (exit 7)",
      cxxopts::value<double>()->default_value("5"))(
      "no-gpu", "do not use a GPU even if one is present (compile and inspect only)")(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>())(
      "strategy", "every job's search strategy: brute_force, random, portfolio, model_guided",
      cxxopts::value<std::string>())("budget", "every job's GPUTune.Budget.Configurations",
                                     cxxopts::value<std::uint64_t>())(
      "kernel-timeout", "as for `run`: seconds before a measurement counts as hung",
      cxxopts::value<double>())("max-restarts",
                                "as for `run`: restarts of a job after hung kernels",
                                cxxopts::value<int>()->default_value("10"))(
      "skip-unchanged",
      "as for `run`: a job measured before with the same inputs is listed as unchanged")(
      "report-md", "also write the report as Markdown to FILE", cxxopts::value<std::string>())(
      "report-json", "also write the report as JSON to FILE", cxxopts::value<std::string>())(
      "report-only", "tune nothing: report each job's newest run in --db (after `db merge`)")(
      "compile-nice", kCompileNiceHelp, cxxopts::value<int>())(
      "no-confirm", "report a regression without re-measuring it first")(
      "slurm", "write a SLURM job array (one shard per task) and its merge job; run nothing")(
      "partition", "--slurm: the partition (default: the cluster's)",
      cxxopts::value<std::string>())("gres",
                                     "--slurm: each task's generic resource; none: no --gres",
                                     cxxopts::value<std::string>()->default_value("gpu:1"))(
      "tasks", "--slurm: array tasks, jobs dealt out in turn (default: one per job)",
      cxxopts::value<std::size_t>())(
      "nodes-per-type", "--slurm: at most this many tasks at once (default: no limit)",
      cxxopts::value<std::size_t>())("submit", "--slurm: submit both with sbatch, print the ids")(
      "q,quiet", "no progress lines")("h,help", "help");
  o.parse_positional({"suite"});
  o.positional_help("SUITE...");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "suite")) return *rc;
  const std::optional<int> nice = apply_compile_nice(r);
  const double pct = r["regression"].as<double>();
  if (!(pct >= 0) || pct > 1000)
    throw JobError("command line", "--regression", "a threshold of " + std::to_string(pct) + "%",
                   "give a percentage from 0 to 1000");
  const int max_restarts = max_restarts_option(r);
  Suite suite = collect_suite(r["suite"].as<std::vector<std::string>>());
  BatchOptions bo;
  bo.db_path = db_of(r), bo.regression = pct / 100, bo.max_restarts = max_restarts;
  // What every run gets; checked here once, so a typo fails in a second and not once per job.
  if (r.count("strategy")) {
    Job probe;  // only the name is checked: each run sets it on its own job
    set_strategy(probe, r["strategy"].as<std::string>(), "command line", "--strategy");
    bo.run_args.insert(bo.run_args.end(), {"--strategy", r["strategy"].as<std::string>()});
    bo.strategy = r["strategy"].as<std::string>();
  }
  if (r.count("budget")) {
    bo.run_args.insert(bo.run_args.end(), {"--budget", std::to_string(budget_option(r))});
    // Each run chooses its search from the budget, as `run --budget` does.
    for (SuiteJob& j : suite.jobs) {
      if (r.count("strategy") || j.search_named) continue;
      Job probe;
      probe.budget.max_configurations = budget_option(r);
      apply_default_strategy(probe);
      j.strategy = probe.strategy;
    }
  }
  if (r.count("no-gpu")) bo.run_args.push_back("--no-gpu");
  if (r.count("cache-dir"))
    bo.run_args.insert(bo.run_args.end(), {"--cache-dir", r["cache-dir"].as<std::string>()});
  if (r.count("threads"))
    bo.run_args.insert(bo.run_args.end(), {"--threads", std::to_string(r["threads"].as<int>())});
  if (r.count("kernel-timeout")) {
    std::ostringstream v;
    v << r["kernel-timeout"].as<double>();
    bo.run_args.insert(bo.run_args.end(), {"--kernel-timeout", v.str()});
  }
  if (nice) bo.run_args.insert(bo.run_args.end(), {"--compile-nice", std::to_string(*nice)});
  if (r.count("quiet")) bo.run_args.push_back("--quiet");
  if (r.count("skip-unchanged")) bo.run_args.push_back("--skip-unchanged");
  for (const char* slurm_only : {"partition", "tasks", "nodes-per-type", "submit"})
    if (r.count(slurm_only) && !r.count("slurm"))
      throw JobError("command line", std::string("--") + slurm_only, "given without --slurm",
                     "add --slurm (it writes the job array), or drop it");
  if (r.count("slurm")) return batch_slurm(r, suite, bo);
  bo.should_stop = [] { return tuner::supervisor_stop_requested(); };
  for (const std::string& s : suite.skipped) std::cerr << "gputune batch: skipped " << s << "\n";
  std::cerr << "gputune batch: " << suite.jobs.size() << " job"
            << (suite.jobs.size() == 1 ? "" : "s") << ", runs stored in " << bo.db_path << "\n";
  bo.confirm = !r.count("no-confirm");
  BatchReport rep = r.count("report-only") ? report_batch(suite.jobs, bo, std::cerr)
                                           : run_batch(suite.jobs, bo, std::cerr);
  print_batch_report(rep, std::cout);
  if (r.count("report-md") &&
      !write_file_atomically(r["report-md"].as<std::string>(), batch_report_markdown(rep)))
    return tuner::kExitBadInput;
  if (r.count("report-json") &&
      !write_file_atomically(r["report-json"].as<std::string>(), batch_report_json(rep)))
    return tuner::kExitBadInput;
  return rep.exit_code;
}

int cmd_generate(int argc, char** argv) {
  auto o =
      command_options("gputune generate",
                      "Rewrite a naive CUDA kernel (one thread per output) into tuned variants");
  o.add_options()("file", "the naive kernel's .cu file", cxxopts::value<std::string>())(
      "kernel", "the __global__ function", cxxopts::value<std::string>())(
      "out", "folder for the variant files (none: print the analysis and the space size)",
      cxxopts::value<std::string>())(
      "job", "a naive T1 job: its parameters narrow the space; --check uses its arguments",
      cxxopts::value<std::string>())(
      "limit", "variant files written at most, spread over the space (0: all)",
      cxxopts::value<size_t>()->default_value("64"))(
      "config",
      "one configuration only: its key or a `space --list` line (no --out: source to stdout)",
      cxxopts::value<std::string>())(
      "check", "run every written variant and the naive kernel on the CPU and compare")(
      "as-written", "read the kernel as written, without rewriting other spellings")(
      "size", "ProblemSize for --check, e.g. 37,41 (default: the job's first, shrunk above 64)",
      cxxopts::value<std::vector<std::int64_t>>())("h,help", "help");
  o.parse_positional({"file"});
  o.positional_help("FILE.cu");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "file")) return *rc;
  if (!r.count("kernel")) {
    std::cerr << "gputune generate: --kernel NAME is required\n" << o.help() << "\n";
    return tuner::kExitBadInput;
  }
  tuner::GenerateOptions g;
  g.kernel_file = r["file"].as<std::string>();
  g.kernel = r["kernel"].as<std::string>();
  g.out_dir = string_option(r, "out");
  g.job_file = string_option(r, "job");
  g.limit = r["limit"].as<size_t>();
  g.config = string_option(r, "config");
  g.check = r.count("check") > 0;
  g.as_written = r.count("as-written") > 0;
  if (r.count("size")) g.check_size = r["size"].as<std::vector<std::int64_t>>();
  if (g.check)
    tuner::watch_stop_signals("\ngputune: stopping the check (again to quit now)\n",
                              tuner::interrupt_cpu_launches);
  return tuner::generate(g);
}

int cmd_check(int argc, char** argv) {
  auto o = command_options("gputune check",
                           "Run a job's configurations on the CPU and compare their outputs with "
                           "the reference (no GPU needed)");
  o.add_options()("job", "T1 job file (parametric or naive)", cxxopts::value<std::string>())(
      "size",
      "ProblemSize to check at, e.g. 37 or 37,29 (default: the job's first, shrunk above 64)",
      cxxopts::value<std::vector<std::int64_t>>())(
      "limit", "configurations checked at most, spread over the space (0: all)",
      cxxopts::value<size_t>()->default_value("1000"))(
      "timeout", "CPU seconds one launch may use before it is stopped and reported (0: none)",
      cxxopts::value<double>()->default_value("60"))(
      "j,threads", "host compiler processes", cxxopts::value<int>()->default_value("2"))("h,help",
                                                                                         "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  tuner::CheckOptions c;
  if (r.count("size")) c.size = r["size"].as<std::vector<std::int64_t>>();
  for (std::int64_t v : c.size)
    if (v < 1) {
      std::cerr << "gputune check: --size " << v << ": sizes must be positive integers\n";
      return tuner::kExitBadInput;
    }
  c.limit = r["limit"].as<size_t>();
  c.timeout_s = r["timeout"].as<double>();
  if (!(c.timeout_s >= 0) || c.timeout_s > 1e6) {
    std::cerr << "gputune check: --timeout " << c.timeout_s
              << ": give CPU seconds from 0 (no limit) to 1000000\n";
    return tuner::kExitBadInput;
  }
  c.jobs = std::max(1, r["threads"].as<int>());
  tuner::watch_stop_signals(
      "\ngputune: stopping the check; what was checked is reported (again to quit now)\n",
      tuner::interrupt_cpu_launches);
  return tuner::check_command(r["job"].as<std::string>(), c, std::cout, std::cerr);
}

int cmd_space(int argc, char** argv) {
  auto o = command_options("gputune space", "Build a job's search space");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "count", "print the number of valid configurations")(
      "list", "print each configuration as a JSON line")("h,help", "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  Space s = build_space(job);
  if (r.count("list")) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      out += s.config(i).json();
      out += '\n';
      if (out.size() > (1 << 20)) std::cout << out, out.clear();
    }
    std::cout << out;
  }
  if (r.count("count") || !r.count("list")) std::cout << s.size() << "\n";
  if (!r.count("list") && !r.count("count")) {
    std::cerr << "gputune: " << s.size() << " valid of " << s.cartesian_size
              << " (Cartesian product)\n";
    for (auto& c : s.conditions)
      std::cerr << "gputune:   \"" << c.expression << "\" removed " << c.removed << "\n";
    print_job_notes(job);
  }
  return 0;
}

int cmd_prune(int argc, char** argv) {
  auto o = command_options("gputune prune",
                           "Compile every configuration for a device and apply the pruning rules");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "device",
      "a configs/devices name, e.g. h100-sxm (default: the GPU present, else the job's arch)",
      cxxopts::value<std::string>())("context", "context label (default: the job's first)",
                                     cxxopts::value<std::string>())(
      "spill-limit",
      "spill bytes above which a variant is pruned; -1: off (default: job's, else 0)",
      cxxopts::value<int>())(
      "margin",
      "rule 4: prune what is predicted slower than MARGIN x the best (default: job's, else 2)",
      cxxopts::value<double>())("no-model",
                                "skip the traffic model and rule 4 (resource rules only)")(
      "screen", "apply rule 4 before compiling (same kept set, fewer compiles)")(
      "model-analyses", kModelAnalysesHelp, cxxopts::value<std::int64_t>())(
      "json", "one JSON object per configuration")(
      "db", "database file", cxxopts::value<std::string>())("no-store", "do not store the result")(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>()->default_value("0"))(
      "gpu", "CUDA device whose limits and rates to use (default: the job's Device.Index, else 0)",
      cxxopts::value<int>())("h,help", "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  tuner::end_on_stop_signals();  // not NVRTC's exit code 4 for a Ctrl-C while compiling
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  apply_gpu_option(r, job);
  if (!r.count("json")) print_job_notes(job);  // with --json, stderr stays for the search's line
  tuner::PruneRunOptions po;
  po.device = string_option(r, "device");
  po.context = string_option(r, "context");
  if (r.count("spill-limit")) po.max_spill_bytes = r["spill-limit"].as<int>();
  if (r.count("margin")) {
    po.model_margin = r["margin"].as<double>();
    if (!(*po.model_margin >= 1))
      throw std::invalid_argument("--margin must be at least 1 (1 keeps only the best prediction)");
  }
  po.model = !r.count("no-model");
  po.screen = r.count("screen") > 0;
  if (r.count("model-analyses")) po.model_analyses = model_analyses_option(r);
  if (r.count("db")) po.db_path = r["db"].as<std::string>();
  if (r.count("cache-dir")) po.cache_dir = r["cache-dir"].as<std::string>();
  po.threads = r["threads"].as<int>();
  po.store = !r.count("no-store");
  po.progress = !r.count("json") && tuner::stderr_is_terminal();
  auto rep = tuner::prune_job(job, po);
  tuner::print_prune_report(rep, std::cout, r.count("json") > 0);
  if (r.count("json") && !rep.model_search.empty())  // what the lines with rule "search" are
    std::cerr << "gputune: prune: " << rep.model_search << "\n";
  cuda::trim_cache_after_use(tuner::cache_for(po.cache_dir).dir(), std::cerr);
  return 0;
}

int cmd_replay(int argc, char** argv) {
  auto o = command_options("gputune replay",
                           "Score strategies and the pruner against recorded measurements");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "measurements", "Kernel Tuner cache file (.json/.json.gz), T4 file or gputune database",
      cxxopts::value<std::string>())(
      "run", "from a gputune database: the run (default: the newest of this job that timed any)",
      cxxopts::value<std::int64_t>())(
      "context",
      "context to predict at and read a database's measurements of (default: the job's first)",
      cxxopts::value<std::string>())("seeds", "random-search seeds",
                                     cxxopts::value<int>()->default_value("100"))(
      "device", "device for the pruner (configs/devices name)", cxxopts::value<std::string>())(
      "within", "tolerances to score, in percent of the optimum (1 to 4, comma-separated)",
      cxxopts::value<std::vector<double>>()->default_value("5,10"))(
      "look-ahead",
      "model_guided's look-ahead as `run` streams it (default: two per compile worker)",
      cxxopts::value<int>())("cache-dir", "cubin cache folder", cxxopts::value<std::string>())(
      "score", "each strategy's performance score (Willemsen et al.), over measurements and time")(
      "trajectories", "write every seed's measurements and their simulated times as JSON lines",
      cxxopts::value<std::string>())(
      "strategies", "the strategies to score (default: all): brute_force,random,model_guided,...",
      cxxopts::value<std::vector<std::string>>())(
      "compile-workers", "compile workers of the simulated stream (default: as `run` here)",
      cxxopts::value<int>())(
      "prune-report", "with --device: compile the whole space for the pruner's report (slow)")(
      "model-seeds", "with --device: model_guided's seeds (default 1)", cxxopts::value<int>())(
      "h,help", "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  tuner::end_on_stop_signals();  // not NVRTC's exit code 4 for a Ctrl-C while compiling
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  if (auto rc = help_or_missing(o, r, "measurements")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  print_job_notes(job);
  tuner::ReplayOptions ro;
  ro.seeds = r["seeds"].as<int>();
  if (ro.seeds < 1 || ro.seeds > 100000) throw std::invalid_argument("--seeds must be 1..100000");
  ro.device = string_option(r, "device");
  if (r.count("run")) ro.run = r["run"].as<std::int64_t>();
  ro.context = string_option(r, "context");
  const auto within = r["within"].as<std::vector<double>>();
  if (within.empty() || within.size() > 4)
    throw std::invalid_argument("--within takes 1 to 4 percentages, e.g. --within 1,5,10");
  ro.within.clear();
  for (double pct : within) {
    if (!(pct >= 0 && pct <= 1000))
      throw std::invalid_argument("--within " + (std::ostringstream() << pct).str() +
                                  ": a tolerance is a percentage from 0 (the optimum itself) to "
                                  "1000, e.g. --within 1,5,10");
    ro.within.push_back(1 + pct / 100);
  }
  if (r.count("cache-dir")) ro.cache_dir = r["cache-dir"].as<std::string>();
  if (r.count("look-ahead")) {
    const int n = r["look-ahead"].as<int>();
    if (n < 1 || n > 4096)
      throw std::invalid_argument(
          "--look-ahead " + std::to_string(n) +
          ": give 1 (no look-ahead: each outcome known before the next is asked for) to 4096");
    ro.look_ahead = static_cast<std::size_t>(n);
  }
  ro.score = r.count("score") > 0;
  ro.prune_report = r.count("prune-report") > 0;
  if (r.count("model-seeds")) {
    ro.model_seeds = r["model-seeds"].as<int>();
    if (ro.model_seeds < 1 || ro.model_seeds > 1000)
      throw std::invalid_argument("--model-seeds must be 1..1000");
  }
  ro.trajectories = string_option(r, "trajectories");
  if (r.count("strategies")) ro.strategies = r["strategies"].as<std::vector<std::string>>();
  if (r.count("compile-workers")) {
    const int n = r["compile-workers"].as<int>();
    if (n < 1 || n > 1024)
      throw std::invalid_argument("--compile-workers " + std::to_string(n) +
                                  ": give the compile workers of the machine to simulate, 1 to "
                                  "1024 (`run` uses one per core, memory permitting)");
    ro.compile_workers = static_cast<std::size_t>(n);
  }
  tuner::ReplayReport rep;
  try {
    rep = tuner::replay(job, r["measurements"].as<std::string>(), ro);
  } catch (const JobError&) {
    throw;
  } catch (const pruner::DeviceError&) {
    throw;
  } catch (const std::runtime_error& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  }
  tuner::print_replay_report(rep, std::cout);
  cuda::trim_cache_after_use(tuner::cache_for(ro.cache_dir).dir(), std::cerr);
  return 0;
}

}  // namespace gputune::app
