// gputune: the command line. A thin shell over the libraries: it parses options, calls one
// library entry point per subcommand, and turns errors into messages and exit codes (README).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "db/interchange.h"
#include "db/store.h"
#include "db/tuned_header.h"
#include "pruner/device_spec.h"
#include "tuner/arguments.h"
#include "tuner/batch.h"
#include "tuner/cache_admin.h"
#include "tuner/compile.h"
#include "tuner/cpu_check.h"
#include "tuner/cpu_emulator.h"
#include "tuner/cuda_driver.h"
#include "tuner/daemon.h"
#include "tuner/generate.h"
#include "tuner/hang_watch.h"
#include "tuner/inspect.h"
#include "tuner/job_files.h"
#include "tuner/pipeline.h"
#include "tuner/progress.h"
#include "tuner/prune.h"
#include "tuner/replay.h"
#include "tuner/stop_signals.h"
#include "variants/hash.h"
#include "variants/space.h"
#include "web/client.h"
#include "web/server.h"

using namespace gputune;

namespace {

const char* kUsage = R"(gputune: GPU kernel autotuner

usage: gputune COMMAND [options]

commands:
  run JOB            compile, verify and time every configuration of a T1 job; store it all
  batch SUITE...     run every job of a suite (suite files, folders, jobs); report regressions
  space JOB          --count: number of valid configurations; --list: each as a JSON line
  generate FILE.cu   rewrite a naive kernel (--kernel NAME) into variants (--out DIR, --check)
  check JOB          run configurations on the CPU against the reference (--size 37, no GPU needed)
  prune JOB          compile for a device (--device NAME, no GPU needed) and apply the pruning rules
  replay JOB         score strategies (and the pruner) against recorded measurements (--measurements FILE)
  best KERNEL        the stored winner(s) of a kernel (--context LABEL, --device NAME)
  show RUN           a run's summary and its measurements
  runs               the most recent runs
  export --t4        T4 results of a run (--run ID, --context LABEL, -o FILE)
  import FILE        a Kernel Tuner cache or T4 file as measurements of its device (--kernel, --device)
  cache              what the cubin and analysis cache holds; --max-size SIZE limits it, --clear
  devices            the CUDA devices the driver reports (or why there are none)
  serve              the daemon: HTTP API + dashboard, one worker process per GPU tuning queued jobs
  submit JOB         queue a job on a running daemon (--server URL)
  cancel ID          cancel a queued or running job (--server URL)

Run `gputune COMMAND --help` for a command's options.
exit codes: 0 ok, 1 internal error, 2 bad input, 3 no CUDA device (compiled, stored, not timed),
            4 no correct variant, 5 interrupted, 6 check: some configurations differ,
            7 batch: a context's best time regressed)";

/// --help, or a missing required option: print the command's help; the exit code to return.
std::optional<int> help_or_missing(const cxxopts::Options& o, const cxxopts::ParseResult& r,
                                   const char* required) {
  bool help = r.count("help") > 0;
  if (!help && (!required || r.count(required))) return std::nullopt;
  std::cout << o.help() << "\n";
  return help ? 0 : tuner::kExitBadInput;
}

std::string db_of(const cxxopts::ParseResult& r) {
  return r.count("db") ? r["db"].as<std::string>() : db::default_database_path();
}

// Ctrl-C or SIGTERM (tuner/stop_signals.h) during `run`: the run stops before the next variant
// is measured and stores what it has as an interrupted run (exit 5; it can be resumed). During
// `check` and `generate --check`: the launch on the CPU stops at once, and what was checked before
// is reported (exit 5). A second one ends the process at once.

/// --gpu N: the CUDA device to use instead of the job's GPUTune.Device.Index, checked now when a
/// driver is present (the error names --gpu and the devices there are).
void apply_gpu_option(const cxxopts::ParseResult& r, Job& job) {
  if (!r.count("gpu")) return;
  job.device_index = r["gpu"].as<int>();
  if (tuner::Driver::instance().available()) (void)tuner::job_device(job, "command line", "--gpu");
}

/// --budget N of `run` and `batch`: configurations measured, at least 1.
std::uint64_t budget_option(const cxxopts::ParseResult& r) {
  const auto n = r["budget"].as<std::uint64_t>();
  if (n == 0)
    throw JobError("command line", "--budget", "a budget of 0 configurations measures nothing",
                   "give a positive number of configurations");
  return n;
}

/// --model-analyses N of `run` and `prune`: a space larger than N is searched by the model
/// (tuner/model_search.h); 0: never, the whole space is analysed.
std::uint64_t model_analyses_option(const cxxopts::ParseResult& r) {
  const std::int64_t n = r["model-analyses"].as<std::int64_t>();
  if (n < 0 || n == 1)
    throw JobError("command line", "--model-analyses", std::to_string(n) + " analyses",
                   "give 0 (analyse the whole space) or at least 2");
  return n == 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(n);
}

constexpr const char* kModelAnalysesHelp =
    "with the model, a space larger than N is searched by the model and only what it looked at "
    "is compiled; 0: the whole space (default: the job's GPUTune.Search.ModelAnalyses, else "
    "20000)";

/// --max-restarts N of `run` and `batch`.
int max_restarts_option(const cxxopts::ParseResult& r) {
  const int n = r["max-restarts"].as<int>();
  if (n < 0 || n > 1000000)
    throw JobError("command line", "--max-restarts", std::to_string(n) + " restarts",
                   "give a number from 0 (stop at the first hung kernel) to 1000000");
  return n;
}

int cmd_run(int argc, char** argv) {
  cxxopts::Options o("gputune run",
                     "Tune a T1 job: compile, inspect, verify and time its configurations");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "db", "database file (default: job's GPUTune.Database, $GPUTUNE_DB, ./gputune.db)",
      cxxopts::value<std::string>())("arch",
                                     "target architecture, e.g. sm_90 (default: the device's)",
                                     cxxopts::value<std::string>())(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>()->default_value("0"))(
      "strategy", "replace the job's GPUTune.Search.Strategy: brute_force, random, model_guided",
      cxxopts::value<std::string>())(
      "budget", "replace the job's GPUTune.Budget.Configurations (configurations measured)",
      cxxopts::value<std::uint64_t>())("model-analyses", kModelAnalysesHelp,
                                       cxxopts::value<std::int64_t>())(
      "no-gpu", "do not use a GPU even if one is present")(
      "resume",
      "continue run RUN of this job (one that was interrupted), skipping what it measured",
      cxxopts::value<std::int64_t>())(
      "no-screen",
      "with the pruner on, compile every planned configuration (default: not those rule 4 drops "
      "from their source alone)")(
      "gpu", "CUDA device to tune on (default: the job's GPUTune.Device.Index, else 0)",
      cxxopts::value<int>())(
      "kernel-timeout",
      "seconds a variant's measurement may take before it counts as hung: it is stored as "
      "timeout and the tuning process ends, to be restarted with --resume, which skips it (see "
      "--max-restarts); 0: wait for ever (default: 120, or more when the job's TimeoutSeconds "
      "allows longer launches: (warm-up launches + 3) x TimeoutSeconds)",
      cxxopts::value<double>())(
      "max-restarts",
      "after a hung kernel (see --kernel-timeout), start again with --resume at most this many "
      "times, so one command measures the rest of the space; 0: stop at the first hang",
      cxxopts::value<int>()->default_value("10"))(
      "skip-unchanged",
      "do nothing (exit 0) when a finished run of this job and strategy already measured every "
      "context with the same kernel source, device, driver, toolkit and problem sizes")(
      "q,quiet", "no progress line")("h,help", "help");
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  if (r.count("strategy")) {
    set_strategy(job, r["strategy"].as<std::string>(), "command line", "--strategy");
  }
  if (r.count("budget")) job.budget.max_configurations = budget_option(r);
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
  tuner::trim_cache_after_use(tuner::cache_for(opt.cache_dir).dir(), std::cerr);
  return rep.exit_code;
}

int cmd_batch(int argc, char** argv) {
  cxxopts::Options o("gputune batch",
                     "Tune a suite of jobs one after another, each as its own `gputune run`, and "
                     "compare every context's best time with the previous run's (a nightly "
                     "re-tune)");
  o.add_options()("suite", "suite files, folders of jobs, or job files",
                  cxxopts::value<std::vector<std::string>>())(
      "db", "database file for every job's runs (default: $GPUTUNE_DB, ./gputune.db)",
      cxxopts::value<std::string>())(
      "regression",
      "percent: a context whose best time is this much slower than the previous finished run's "
      "is a regression (exit 7)",
      cxxopts::value<double>()->default_value("5"))(
      "no-gpu", "do not use a GPU even if one is present (compile and inspect only)")(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>())(
      "strategy", "every job's search strategy: brute_force, random, model_guided",
      cxxopts::value<std::string>())("budget", "every job's GPUTune.Budget.Configurations",
                                     cxxopts::value<std::uint64_t>())(
      "kernel-timeout", "as for `run`: seconds before a measurement counts as hung",
      cxxopts::value<double>())("max-restarts",
                                "as for `run`: restarts of a job after hung kernels",
                                cxxopts::value<int>()->default_value("10"))(
      "skip-unchanged",
      "as for `run`: a job whose last finished run measured the same kernel source, device, "
      "driver, toolkit and contexts is not re-tuned (listed as unchanged)")(
      "q,quiet", "no progress lines")("h,help", "help");
  o.parse_positional({"suite"});
  o.positional_help("SUITE...");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "suite")) return *rc;
  const double pct = r["regression"].as<double>();
  if (!(pct >= 0) || pct > 1000)
    throw JobError("command line", "--regression", "a threshold of " + std::to_string(pct) + "%",
                   "give a percentage from 0 to 1000");
  const int max_restarts = max_restarts_option(r);
  tuner::Suite suite = tuner::collect_suite(r["suite"].as<std::vector<std::string>>());
  tuner::BatchOptions bo;
  bo.db_path = db_of(r), bo.regression = pct / 100, bo.max_restarts = max_restarts;
  // What every run gets; checked here once, so a typo fails in a second and not once per job.
  if (r.count("strategy")) {
    Job probe;  // only the name is checked: each run sets it on its own job
    set_strategy(probe, r["strategy"].as<std::string>(), "command line", "--strategy");
    bo.run_args.insert(bo.run_args.end(), {"--strategy", r["strategy"].as<std::string>()});
    bo.strategy = r["strategy"].as<std::string>();
  }
  if (r.count("budget"))
    bo.run_args.insert(bo.run_args.end(), {"--budget", std::to_string(budget_option(r))});
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
  if (r.count("quiet")) bo.run_args.push_back("--quiet");
  if (r.count("skip-unchanged")) bo.run_args.push_back("--skip-unchanged");
  bo.should_stop = [] { return tuner::supervisor_stop_requested(); };
  for (const std::string& s : suite.skipped) std::cerr << "gputune batch: skipped " << s << "\n";
  std::cerr << "gputune batch: " << suite.jobs.size() << " job"
            << (suite.jobs.size() == 1 ? "" : "s") << ", runs stored in " << bo.db_path << "\n";
  tuner::BatchReport rep = tuner::run_batch(suite.jobs, bo, std::cerr);
  tuner::print_batch_report(rep, std::cout);
  return rep.exit_code;
}

int cmd_generate(int argc, char** argv) {
  cxxopts::Options o("gputune generate",
                     "Rewrite a naive CUDA kernel (one thread per output) into tuned variants");
  o.add_options()("file", "the naive kernel's .cu file", cxxopts::value<std::string>())(
      "kernel", "the __global__ function", cxxopts::value<std::string>())(
      "out", "folder for the variant files (none: print the analysis and the space size)",
      cxxopts::value<std::string>()->default_value(""))(
      "job",
      "a naive T1 job (GPUTune.Naive): its parameters narrow the space; --check runs its "
      "first context's arguments",
      cxxopts::value<std::string>()->default_value(""))(
      "limit", "variant files written at most, spread over the space (0: all)",
      cxxopts::value<size_t>()->default_value("64"))(
      "config",
      "one configuration only: its key, as best, show and prune print it, or a JSON line of "
      "`space --list` (without --out its source goes to stdout)",
      cxxopts::value<std::string>()->default_value(""))(
      "check", "run every written variant and the naive kernel on the CPU and compare")(
      "size",
      "ProblemSize for --check, e.g. 37,41 (default: the job's first context, each dimension above "
      "64 replaced by 37, 29, 23)",
      cxxopts::value<std::vector<std::int64_t>>())("h,help", "help");
  o.parse_positional({"file"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "file")) return *rc;
  if (!r.count("kernel")) {
    std::cerr << "gputune generate: --kernel NAME is required\n" << o.help() << "\n";
    return tuner::kExitBadInput;
  }
  tuner::GenerateOptions g;
  g.kernel_file = r["file"].as<std::string>();
  g.kernel = r["kernel"].as<std::string>();
  g.out_dir = r["out"].as<std::string>();
  g.job_file = r["job"].as<std::string>();
  g.limit = r["limit"].as<size_t>();
  g.config = r["config"].as<std::string>();
  g.check = r.count("check") > 0;
  if (r.count("size")) g.check_size = r["size"].as<std::vector<std::int64_t>>();
  if (g.check)
    tuner::watch_stop_signals("\ngputune: stopping the check (again to quit now)\n",
                              tuner::interrupt_cpu_launches);
  return tuner::generate(g);
}

int cmd_check(int argc, char** argv) {
  cxxopts::Options o("gputune check",
                     "Run a job's configurations on the CPU and compare their outputs with the "
                     "reference (no GPU needed)");
  o.add_options()("job", "T1 job file (parametric or naive)", cxxopts::value<std::string>())(
      "size",
      "ProblemSize to check at, e.g. 37 or 37,29 (default: the job's first context; a naive job's "
      "with each dimension above 64 replaced by 37, 29, 23)",
      cxxopts::value<std::vector<std::int64_t>>())(
      "limit", "configurations checked at most, spread over the space (0: all)",
      cxxopts::value<size_t>()->default_value("1000"))(
      "timeout", "CPU seconds one launch may use before it is stopped and reported (0: none)",
      cxxopts::value<double>()->default_value("60"))(
      "j,threads", "host compiler processes", cxxopts::value<int>()->default_value("2"))("h,help",
                                                                                         "help");
  o.parse_positional({"job"});
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

/// What loading the job noted (keys outside the T1 schema, a naive kernel tuned over block shape
/// only), on stderr; `run` prints the same through the pipeline's log.
void print_job_notes(const Job& job) {
  for (const std::string& n : job.notes) std::cerr << "gputune: note: " << n << "\n";
}

int cmd_space(int argc, char** argv) {
  cxxopts::Options o("gputune space", "Build a job's search space");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "count", "print the number of valid configurations")(
      "list", "print each configuration as a JSON line")("h,help", "help");
  o.parse_positional({"job"});
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
  cxxopts::Options o("gputune prune",
                     "Compile every configuration for a device and apply the pruning rules");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "device",
      "a device of configs/devices (e.g. h100-sxm, rtx-a4000); default: the GPU present, else the "
      "job's arch",
      cxxopts::value<std::string>()->default_value(""))(
      "context", "context label (default: the job's first)",
      cxxopts::value<std::string>()->default_value(""))(
      "spill-limit",
      "spill bytes (stores + loads) above which a variant is pruned; -1 disables (default: the "
      "job's GPUTune.Pruner.MaxSpillBytes, else 0)",
      cxxopts::value<int>())("margin",
                             "rule 4: prune variants predicted slower than MARGIN x the best "
                             "prediction (default: the job's GPUTune.Pruner.ModelMargin, else 2)",
                             cxxopts::value<double>())(
      "no-model", "skip the traffic model and rule 4 (resource rules only)")(
      "screen",
      "apply rule 4 before compiling: a variant whose best possible prediction (any occupancy) is "
      "more than the margin x the best compiled prediction is not compiled; same kept set, fewer "
      "compiles, no registers for the screened ones")("model-analyses", kModelAnalysesHelp,
                                                      cxxopts::value<std::int64_t>())(
      "json", "one JSON object per configuration")(
      "db", "database file", cxxopts::value<std::string>())("no-store", "do not store the result")(
      "cache-dir", "cubin cache folder ('-' disables)", cxxopts::value<std::string>())(
      "j,threads", "compile workers", cxxopts::value<int>()->default_value("0"))(
      "gpu",
      "CUDA device to read the limits and rates of (default: the job's Device.Index, else 0)",
      cxxopts::value<int>())("h,help", "help");
  o.parse_positional({"job"});
  auto r = o.parse(argc, argv);
  tuner::end_on_stop_signals();  // not NVRTC's exit code 4 for a Ctrl-C while compiling
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  apply_gpu_option(r, job);
  if (!r.count("json")) print_job_notes(job);  // with --json, stderr stays for the search's line
  tuner::PruneRunOptions po;
  po.device = r["device"].as<std::string>();
  po.context = r["context"].as<std::string>();
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
  tuner::trim_cache_after_use(tuner::cache_for(po.cache_dir).dir(), std::cerr);
  return 0;
}

int cmd_replay(int argc, char** argv) {
  cxxopts::Options o("gputune replay",
                     "Score strategies and the pruner against recorded measurements");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>())(
      "measurements", "Kernel Tuner cache file (.json/.json.gz), T4 file or gputune database",
      cxxopts::value<std::string>())(
      "run",
      "from a gputune database: the run (default: the newest of this job that timed "
      "something)",
      cxxopts::value<std::int64_t>())(
      "context",
      "context label the pruner predicts at, and a database's measurements are read "
      "from (default: the job's first)",
      cxxopts::value<std::string>()->default_value(""))(
      "seeds", "random-search seeds", cxxopts::value<int>()->default_value("100"))(
      "device", "device for the pruner (configs/devices name)",
      cxxopts::value<std::string>()->default_value(""))(
      "within", "tolerances to score, in percent of the optimum (1 to 4, comma-separated)",
      cxxopts::value<std::vector<double>>()->default_value("5,10"))(
      "look-ahead",
      "model_guided's look-ahead as `run` streams it: compiles asked for before the outcomes "
      "before them are known (default: two per compile worker of this machine)",
      cxxopts::value<int>())("cache-dir", "cubin cache folder", cxxopts::value<std::string>())(
      "h,help", "help");
  o.parse_positional({"job"});
  auto r = o.parse(argc, argv);
  tuner::end_on_stop_signals();  // not NVRTC's exit code 4 for a Ctrl-C while compiling
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  if (auto rc = help_or_missing(o, r, "measurements")) return *rc;
  Job job = tuner::load_tuning_job(r["job"].as<std::string>());
  print_job_notes(job);
  tuner::ReplayOptions ro;
  ro.seeds = r["seeds"].as<int>();
  if (ro.seeds < 1 || ro.seeds > 100000) throw std::invalid_argument("--seeds must be 1..100000");
  ro.device = r["device"].as<std::string>();
  if (r.count("run")) ro.run = r["run"].as<std::int64_t>();
  ro.context = r["context"].as<std::string>();
  const auto within = r["within"].as<std::vector<double>>();
  if (within.empty() || within.size() > 4)
    throw std::invalid_argument("--within takes 1 to 4 percentages, e.g. --within 1,5,10");
  ro.within.clear();
  for (double pct : within) {
    if (!(pct >= 0 && pct <= 1000))
      throw std::invalid_argument("--within " + (std::ostringstream() << pct).str() +
                                  ": a tolerance is a percentage from 0 (the optimum itself) "
                                  "to 1000, e.g. --within 1,5,10");
    ro.within.push_back(1 + pct / 100);
  }
  if (r.count("cache-dir")) ro.cache_dir = r["cache-dir"].as<std::string>();
  if (r.count("look-ahead")) {
    const int n = r["look-ahead"].as<int>();
    if (n < 1 || n > 4096)
      throw std::invalid_argument("--look-ahead " + std::to_string(n) +
                                  ": give 1 (no look-ahead: each outcome known before the next "
                                  "is asked for) to 4096");
    ro.look_ahead = static_cast<std::size_t>(n);
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
  tuner::trim_cache_after_use(tuner::cache_for(ro.cache_dir).dir(), std::cerr);
  return 0;
}

/// Writes `text` to `file` through a temporary file beside it and a rename, so an existing file
/// is replaced whole or not at all. False (with the reason on stderr) when it cannot.
bool write_file_atomically(const std::string& file, const std::string& text) {
  const std::string tmp = file + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::cerr << "gputune: cannot write " << file << ": " << std::strerror(errno) << "\n";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    std::cerr << "gputune: cannot write " << file << ": " << std::strerror(errno) << "\n";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

/// Today's date in UTC, as 2026-11-24.
std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

/// The database a reading command (best, show, runs, export) looks in: it must exist already, so
/// a mistyped --db is an error instead of a new, empty database.
db::Store existing_store(const cxxopts::ParseResult& r) {
  const std::string path = db_of(r);
  if (!std::filesystem::exists(path))
    throw JobError("command line", r.count("db") ? "--db" : "$GPUTUNE_DB / ./gputune.db",
                   "there is no database at " + path,
                   "give the database a run stored to (gputune run creates it)");
  return db::Store(path);
}

int cmd_best(int argc, char** argv) {
  cxxopts::Options o("gputune best", "Look up the stored winner of a kernel");
  o.add_options()("kernel", "kernel name or hash prefix", cxxopts::value<std::string>())(
      "context", "context label, e.g. 4096x4096", cxxopts::value<std::string>()->default_value(""))(
      "device", "device name", cxxopts::value<std::string>()->default_value(""))(
      "db", "database file", cxxopts::value<std::string>())("json", "print JSON")(
      "header",
      "write a C/C++ header of the winners (-DGPUTUNE_TARGET_<device>, -DGPUTUNE_CONTEXT_<label> "
      "select one) to FILE ('-': stdout)",
      cxxopts::value<std::string>())("h,help", "help");
  o.parse_positional({"kernel"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "kernel")) return *rc;
  db::Store store = existing_store(r);
  std::string kernel = r["kernel"].as<std::string>();
  auto ws = store.winners(kernel, r["context"].as<std::string>(), r["device"].as<std::string>());
  // A naive kernel's winner is generated code: the command that writes its source. A run that
  // fell back to block shape only tuned the kernel as written: why, and no command.
  struct NaiveWinner {
    std::optional<std::string> command;
    std::string fallback;
  };
  auto naive_winner = [&](const db::WinnerRow& w) {
    NaiveWinner n;
    if (auto run = store.run(w.run_id); run && !run->naive_fallback.empty())
      n.fallback = run->naive_fallback;
    else if (run)
      n.command =
          tuner::generate_command(store.run_job_document(w.run_id), run->job_file, w.config_key);
    return n;
  };
  if (r.count("header")) {
    db::HeaderOptions h{r["context"].as<std::string>(), r["device"].as<std::string>(), db_of(r),
                        today_utc()};
    std::string text;
    try {
      text = db::tuned_header(store, kernel, h);
    } catch (const std::invalid_argument& e) {
      std::cerr << "gputune: " << e.what() << "\n";
      return tuner::kExitBadInput;
    }
    // A naive kernel's winners are generated code: the #defines name what was chosen, and the
    // naive source ignores them.
    for (const db::WinnerRow& w : ws)
      if (auto cmd = naive_winner(w).command) {
        std::cerr << "gputune: note: kernel '" << w.kernel
                  << "' was tuned as a naive kernel: its winners are generated variants, which "
                     "these #defines do not make of its source; `"
                  << *cmd << "` writes the source of the winner for " << w.context_label << " on "
                  << w.device << " (`gputune best` shows every winner's command)\n";
        break;
      }
    const std::string file = r["header"].as<std::string>();
    if (file == "-") {
      std::cout << text;
      return 0;
    }
    if (!write_file_atomically(file, text)) return tuner::kExitBadInput;
    std::cerr << "gputune: wrote " << file << "\n";
    return 0;
  }
  if (ws.empty()) {
    std::cerr << "gputune: no winner stored for kernel '" << kernel << "'";
    auto ctxs = store.contexts(kernel);
    if (!ctxs.empty()) {
      std::cerr << "; its contexts are:";
      for (auto& c : ctxs) std::cerr << " " << c.label << " (" << c.device << ")";
    }
    std::cerr << "\n";
    return 2;
  }
  for (auto& w : ws) {
    if (r.count("json")) {
      nlohmann::json j = {
          {"kernel", w.kernel},          {"context", w.context_label},
          {"device", w.device},          {"configuration", nlohmann::json::parse(w.params_json)},
          {"time_ms", w.time_ms},        {"run", w.run_id},
          {"provisional", w.provisional}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << w.kernel << "  " << w.context_label << "  " << w.device << "  " << w.time_ms
                << " ms  " << w.params_json << "\n";
      if (w.provisional)
        std::cout << "  provisional: the fastest first pass of run " << w.run_id
                  << ", which stopped before re-measuring its top variants (`gputune run ... "
                     "--resume "
                  << w.run_id << "` finishes it)\n";
      if (const NaiveWinner n = naive_winner(w); n.command)
        std::cout << "  a generated variant of the naive kernel; its source: " << *n.command
                  << "\n";
      else if (!n.fallback.empty())
        std::cout << "  the naive kernel as written, launched at this block shape (tuned over "
                     "block shape only: "
                  << n.fallback << ")\n";
    }
  }
  return 0;
}

int cmd_show(int argc, char** argv) {
  cxxopts::Options o("gputune show", "Show a run and its measurements");
  o.add_options()("run", "run id", cxxopts::value<long>())("db", "database file",
                                                           cxxopts::value<std::string>())(
      "n,limit", "measurements to list per context", cxxopts::value<int>()->default_value("10"))(
      "failures", "list failures with their reasons")("h,help", "help");
  o.parse_positional({"run"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "run")) return *rc;
  db::Store store = existing_store(r);
  auto run = store.run(r["run"].as<long>());
  if (!run) {
    std::cerr << "gputune: no run " << r["run"].as<long>() << " in " << db_of(r)
              << " (see `gputune runs`)\n";
    return 2;
  }
  std::cout << "run " << run->id << " (" << run->uid << ") job " << run->job_name << " ["
            << run->job_file << "]\n"
            << "status " << run->status << ", strategy " << run->strategy << ", " << run->done
            << "/" << run->total << " done, " << store.timed_pairs(run->id) << " timed, started "
            << run->started_at << ", finished " << run->finished_at;
  if (run->seconds_spent) {  // what the job's time budget counts, over all the run's processes
    std::ostringstream spent;
    spent << std::fixed << std::setprecision(1) << *run->seconds_spent;
    std::cout << ", " << spent.str() << " s measuring";
  }
  if (run->budget) std::cout << ", budget " << *run->budget << " configurations";
  std::cout << "\n" << run->message << "\n";
  if (const auto plan = store.run_plan(run->id); plan && plan->searched)
    std::cout << "plan: " << plan->summary << "\n";
  if (!run->naive_fallback.empty())
    std::cout << "block shape only: " << run->naive_fallback
              << " (the naive kernel is outside the generator's subset; its variants are the "
                 "kernel as written, launched at each block shape)\n";
  auto ms = store.measurements(run->id);
  // Per outcome; what the pruner removed, per rule.
  std::map<std::string, int> counts;
  for (auto& m : ms) {
    if (m.status == "constraints" && m.reason.rfind("pruned by rule ", 0) == 0) {
      counts[m.reason.substr(0, m.reason.find(':'))]++;  // "pruned by rule spills"
    } else {
      counts[m.status]++;
    }
  }
  for (auto& [k, v] : counts) std::cout << "  " << k << ": " << v << "\n";
  // The timed variants, fastest first; with --failures what failed or was removed. A run that
  // timed nothing (no GPU, a prune) lists what it compiled, fastest predicted first.
  const size_t limit = static_cast<size_t>(std::max(r["limit"].as<int>(), 0));
  const bool failures = r.count("failures") > 0;
  std::vector<const db::MeasurementRow*> list;
  for (const auto& m : ms)
    if (failures ? m.status != "correct" && m.status != "compiled" : m.status == "correct")
      list.push_back(&m);
  if (!failures && list.empty()) {
    for (const auto& m : ms)
      if (m.status == "compiled") list.push_back(&m);
    const auto predicted = [](const db::MeasurementRow* m) {
      return m->predicted_ms.value_or(std::numeric_limits<double>::infinity());
    };
    std::stable_sort(list.begin(), list.end(), [&](auto* a, auto* b) {
      return a->context_label != b->context_label ? a->context_label < b->context_label
                                                  : predicted(a) < predicted(b);
    });
    if (!list.empty())
      std::cout << "nothing was timed; the compiled variants"
                << (list.front()->predicted_ms ? ", fastest predicted first" : "") << ":\n";
  }
  // Each context in the order the run measured them (its job's), each with its first `limit`.
  std::map<std::int64_t, std::vector<const db::MeasurementRow*>> by_context;
  for (const auto* m : list) by_context[m->context_id].push_back(m);
  for (const auto& [context, rows] : by_context) {
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      const auto& m = *rows[i];
      std::cout << "  " << m.context_label << "  " << m.status << "  ";
      if (m.time_ms) std::cout << *m.time_ms << " ms  ";
      if (m.predicted_ms && !m.time_ms) std::cout << "predicted " << *m.predicted_ms << " ms  ";
      if (m.registers) std::cout << *m.registers << " regs  ";
      if (m.occupancy) std::cout << "occ " << *m.occupancy << "  ";
      std::cout << m.params_json;
      if (!m.reason.empty()) std::cout << "  (" << m.reason << ")";
      std::cout << "\n";
    }
    if (rows.size() > limit)
      std::cout << "  (" << rows.size() - limit << " more in " << rows.front()->context_label
                << "; -n N lists more)\n";
  }
  return 0;
}

int cmd_runs(int argc, char** argv) {
  cxxopts::Options o("gputune runs", "List recent runs");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "n,limit", "how many", cxxopts::value<int>()->default_value("20"))("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  const int limit = r["limit"].as<int>();
  if (limit < 1) {
    std::cerr << "gputune runs: --limit " << limit << ": give a positive number of runs\n";
    return tuner::kExitBadInput;
  }
  db::Store store = existing_store(r);
  const auto runs = store.runs(limit);
  if (runs.empty()) {
    std::cout << "no runs in " << db_of(r) << "\n";
    return 0;
  }
  // Columns as wide as their widest entry; the message (why a run failed or stopped) last.
  // progress: (context, variant) pairs decided of those planned; timed: those with a verified
  // time (none without a GPU, none for `prune`).
  std::vector<std::array<std::string, 6>> rows{
      {"run", "status", "job", "progress", "timed", "started"}};
  for (const auto& run : runs)
    rows.push_back({std::to_string(run.id), run.status, run.job_name,
                    std::to_string(run.done) + "/" + std::to_string(run.total),
                    std::to_string(store.timed_pairs(run.id)), run.started_at});
  std::array<size_t, 6> width{};
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 0; c < rows[i].size(); ++c)
      std::cout << (c == 0 || c == 4 ? std::string(width[c] - rows[i][c].size(), ' ') + rows[i][c]
                                     : rows[i][c] + std::string(width[c] - rows[i][c].size(), ' '))
                << "  ";
    std::string message = i == 0 ? "message" : runs[i - 1].message;
    if (const size_t nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    if (message.size() > 100) message = message.substr(0, 97) + "...";
    std::cout << message << "\n";
  }
  if (runs.size() == static_cast<size_t>(limit))
    std::cout << "(the " << limit << " most recent; -n N lists more)\n";
  return 0;
}

int cmd_export(int argc, char** argv) {
  cxxopts::Options o("gputune export", "Export results");
  o.add_options()("t4", "T4 format (the only one so far)")(
      "run", "run id (default: all runs)", cxxopts::value<long>()->default_value("0"))(
      "context", "context label (where the run measured several; a T4 file holds one)",
      cxxopts::value<std::string>()->default_value(""))(
      "kernel", "kernel name (where the runs tuned several kernels)",
      cxxopts::value<std::string>()->default_value(""))("o,output", "output file (default: stdout)",
                                                        cxxopts::value<std::string>())(
      "db", "database file", cxxopts::value<std::string>())("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "t4")) return *rc;
  db::Store store = existing_store(r);
  long run = r["run"].as<long>();
  if (run && !store.run(run)) {
    std::cerr << "gputune: no run " << run << " in " << db_of(r) << "\n";
    return 2;
  }
  std::string doc =
      db::export_t4(store, run, r["context"].as<std::string>(), r["kernel"].as<std::string>());
  if (r.count("output")) {
    if (!write_file_atomically(r["output"].as<std::string>(), doc + "\n"))
      return tuner::kExitBadInput;
  } else {
    std::cout << doc << "\n";
  }
  return 0;
}

int cmd_import(int argc, char** argv) {
  cxxopts::Options o("gputune import",
                     "Import a Kernel Tuner cache file or a T4 results file as measurements");
  o.add_options()("file", "Kernel Tuner cache or T4 file (.json or .json.gz)",
                  cxxopts::value<std::string>())(
      "kernel", "kernel name (a T4 file from elsewhere names none)",
      cxxopts::value<std::string>()->default_value(""))(
      "device", "the GPU it ran on, as the driver names it (a T4 file from elsewhere names none)",
      cxxopts::value<std::string>()->default_value(""))(
      "context", "context label (default: the file's, else its problem size)",
      cxxopts::value<std::string>()->default_value(""))(
      "db", "database file", cxxopts::value<std::string>())("h,help", "help");
  o.parse_positional({"file"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "file")) return *rc;
  db::Store store(db_of(r));
  db::ImportSummary s;
  try {
    s = db::import_measurements(store, r["file"].as<std::string>(),
                                {r["kernel"].as<std::string>(), r["device"].as<std::string>(),
                                 r["context"].as<std::string>()});
  } catch (const db::DbError&) {
    throw;
  } catch (const std::runtime_error& e) {
    std::cerr << "gputune: error: " << e.what() << " (nothing was imported)\n";
    return tuner::kExitBadInput;
  }
  std::cout << "imported " << s.measurements << " measurements (" << s.correct << " correct, "
            << s.failed << " failed) of " << s.kernel << " on " << s.device << ", context "
            << s.context << ", as run " << s.run_id << "; best " << s.best_ms << " ms at "
            << s.best_key
            << (s.parameter_order.empty() ? "" : "; parameters in " + s.parameter_order) << "\n";
  return 0;
}

std::string local_time(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%d %H:%M", &tm);
  return out;
}

int cmd_cache(int argc, char** argv) {
  cxxopts::Options o("gputune cache",
                     "What the cache of compiled variants and traffic analyses holds, and its "
                     "size limit. After a command that wrote to it, a cache over its limit loses "
                     "its least recently used entries down to 90% of the limit.");
  o.add_options()("cache-dir",
                  "the cache folder (default: $GPUTUNE_CACHE_DIR, else $XDG_CACHE_HOME/gputune, "
                  "else ~/.cache/gputune)",
                  cxxopts::value<std::string>())(
      "max-size",
      "set the folder's size limit (10G, 500M: binary units; 0: no limit; default 10G; "
      "$GPUTUNE_CACHE_MAX_SIZE overrides it) and trim the cache to it now",
      cxxopts::value<std::string>())(
      "clear",
      "remove every entry (the limit stays; nothing but the caches' own files is touched)")(
      "h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  if (!r.unmatched().empty())
    throw JobError("command line", r.unmatched().front(),
                   "an argument `gputune cache` does not take", "see `gputune cache --help`");
  const std::string option = r.count("cache-dir") ? r["cache-dir"].as<std::string>() : "";
  if (option == "-")
    throw JobError("command line", "--cache-dir", "'-' (no cache) has nothing to show or trim",
                   "name the cache folder, or leave --cache-dir out for the default one");
  const std::filesystem::path dir = tuner::cache_for(option).dir();
  auto print_removed = [](const tuner::TrimResult& t) {
    std::cout << "removed " << t.removed_entries
              << (t.removed_entries == 1 ? " entry (" : " entries (")
              << tuner::format_size(t.removed_bytes) << ")\n";
  };
  if (r.count("clear") && r.count("max-size"))
    throw JobError("command line", "--clear", "given with --max-size",
                   "give one: --clear empties the cache, --max-size limits it");
  std::optional<tuner::TrimResult> trimmed;  // its `after` is what the folder holds now
  if (r.count("clear")) {
    trimmed = tuner::trim_cache(dir, 0);
    print_removed(*trimmed);
  } else if (r.count("max-size")) {
    const std::uint64_t bytes =
        tuner::size_of(r["max-size"].as<std::string>(), "command line", "--max-size");
    tuner::set_cache_limit(dir, bytes);
    if (const char* env = std::getenv("GPUTUNE_CACHE_MAX_SIZE"); env && *env)
      std::cout << "note: GPUTUNE_CACHE_MAX_SIZE=" << env
                << " is set and overrides this limit while it is\n";
    if (bytes > 0) {
      trimmed = tuner::trim_cache(dir, bytes);
      print_removed(*trimmed);
    }
  }
  const tuner::CacheUsage u = trimmed ? trimmed->after : tuner::cache_usage(dir);
  const tuner::CacheLimit limit = tuner::cache_limit(dir);
  std::error_code ec;
  std::cout << "cache folder   " << dir.string()
            << (std::filesystem::exists(dir, ec) ? "" : " (not created yet: nothing cached)")
            << "\n"
            << "cubins         " << u.cubins.entries << " compiled variants, "
            << tuner::format_size(u.cubins.bytes) << "\n"
            << "traffic        " << u.traffic.entries << " analysis reports, "
            << tuner::format_size(u.traffic.bytes) << "\n";
  if (u.abandoned.entries > 0)
    std::cout << "unfinished     " << u.abandoned.entries << " writes abandoned over an hour ago, "
              << tuner::format_size(u.abandoned.bytes) << " (the next trim removes them)\n";
  std::cout << "total          " << tuner::format_size(u.bytes()) << " on disk of "
            << (limit.bytes ? tuner::format_size(limit.bytes) : std::string("no limit")) << " ("
            << (limit.source == "default" ? "the default" : limit.source) << ")\n";
  if (u.oldest_use > 0)
    std::cout << "last used      " << local_time(u.oldest_use) << " (least recently used entry) to "
              << local_time(u.newest_use) << "\n";
  if (u.other_files > 0)
    std::cout << "other files    " << u.other_files
              << " not written by gputune's caches (never removed)\n";
  return 0;
}

int cmd_devices() {
  const auto& d = tuner::Driver::instance();
  std::cout << "NVRTC " << tuner::nvrtc_version() << "\n";
  if (!d.available()) {
    std::cout << "no CUDA device: " << d.unavailable_reason() << "\n"
              << "gputune can still build spaces, compile and inspect variants (`gputune run` "
                 "stores them "
                 "and exits with code 3), import and export results.\n";
    return tuner::kExitNoDevice;
  }
  std::cout << "driver " << d.version() << "\n";
  for (int i = 0; i < d.device_count(); ++i) {
    auto info = tuner::query_device(i);
    std::cout << i << ": " << info.name << "  " << info.limits.arch() << "  "
              << info.limits.sm_count << " SMs  " << info.total_mem / (1 << 20) << " MiB\n";
  }
  return 0;
}

std::string token_for(const cxxopts::ParseResult& r) {
  if (r.count("token")) return r["token"].as<std::string>();
  if (const char* t = std::getenv("GPUTUNE_TOKEN"); t && *t) return t;
  std::ifstream in(r["token-file"].as<std::string>());
  std::string t;
  std::getline(in, t);
  return t;
}

int cmd_serve(int argc, char** argv) {
  cxxopts::Options o(
      "gputune serve",
      "Daemon: HTTP API and dashboard; one worker process per GPU tunes queued jobs");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "port", "TCP port", cxxopts::value<int>()->default_value("8080"))(
      "bind", "address to listen on (loopback by default)",
      cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "kernel-timeout", "seconds a single measurement may take before its worker is killed",
      cxxopts::value<double>()->default_value("120"))("cache-dir", "cubin cache folder",
                                                      cxxopts::value<std::string>())(
      "no-gpu", "start no workers")("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  tuner::ServeOptions so;
  so.db_path = db_of(r);
  so.port = r["port"].as<int>();
  so.bind = r["bind"].as<std::string>();
  so.kernel_timeout_s = r["kernel-timeout"].as<double>();
  if (so.port < 0 || so.port > 65535) throw std::invalid_argument("--port must be 0..65535");
  if (so.kernel_timeout_s <= 0) throw std::invalid_argument("--kernel-timeout must be positive");
  if (r.count("cache-dir")) so.cache_dir = r["cache-dir"].as<std::string>();
  so.no_gpu = r.count("no-gpu") > 0;
  so.self_exe = std::filesystem::read_symlink("/proc/self/exe").string();
  return tuner::serve(so);
}

int cmd_worker(int argc, char** argv) {
  cxxopts::Options o("gputune worker", "(internal) a daemon worker process for one GPU");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "device", "CUDA device ordinal", cxxopts::value<int>()->default_value("0"))(
      "cache-dir", "cubin cache folder", cxxopts::value<std::string>());
  auto r = o.parse(argc, argv);
  tuner::WorkerOptions wo;
  wo.db_path = db_of(r);
  wo.device = r["device"].as<int>();
  if (r.count("cache-dir")) wo.cache_dir = r["cache-dir"].as<std::string>();
  return tuner::run_worker(wo);
}

void add_client_options(cxxopts::Options& o) {
  o.add_options()("server", "daemon URL",
                  cxxopts::value<std::string>()->default_value("http://127.0.0.1:8080"))(
      "token", "write token (default: $GPUTUNE_TOKEN, else --token-file)",
      cxxopts::value<std::string>())("token-file", "file holding the token",
                                     cxxopts::value<std::string>()->default_value(
                                         db::default_database_path() + ".token"))("h,help", "help");
}

int print_reply(const web::Reply& rep, const std::string& what) {
  if (rep.status == 200 || rep.status == 201) {
    std::cout << what << ": " << rep.body.dump() << "\n";
    return 0;
  }
  std::cerr << "gputune: " << what << " failed";
  if (rep.status) std::cerr << " (HTTP " << rep.status << ")";
  std::cerr << ": " << rep.body.value("error", rep.body.dump());
  if (rep.body.contains("field") && !rep.body["field"].get<std::string>().empty())
    std::cerr << " [field " << rep.body["field"].get<std::string>() << "]";
  std::cerr << "\n";
  return rep.status == 0 ? 1 : 2;
}

int cmd_submit(int argc, char** argv) {
  cxxopts::Options o("gputune submit", "Queue a job on a running daemon");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>());
  add_client_options(o);
  o.parse_positional({"job"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  std::string file = r["job"].as<std::string>();
  Job job =
      tuner::load_tuning_job(file);  // the same checks as `gputune run`, before anything is sent
  const std::string kernel_source = load_kernel_source(job);
  // Sized as `run` sizes them before compiling: a BinaryRaw input that is missing or of the wrong
  // size is this machine's to fix, not the worker's to find.
  for (const ContextSpec& ctx : job.contexts)
    tuner::make_arguments(job, ctx, tuner::ArgumentContents::SizesOnly);
  // The headers and inputs the job reads travel with it: the daemon's worker runs it elsewhere.
  nlohmann::json files = nlohmann::json::array();
  std::size_t bytes = kernel_source.size();
  for (const tuner::JobFile& f : tuner::job_files(job, kernel_source)) {
    files.push_back({{"path", f.path}, {"base64", base64_encode(f.bytes)}});
    bytes += f.bytes.size() * 4 / 3;
  }
  if (bytes > web::kMaxJobRequestBytes) {
    std::cerr << "gputune: " << file << ": the kernel and the " << files.size()
              << " file(s) it reads come to " << (bytes >> 20) << " MiB as sent; a daemon takes "
              << (web::kMaxJobRequestBytes >> 20)
              << " MiB at most. Fix: fill large inputs with FillType Random or Constant instead "
                 "of BinaryRaw, or run the job with `gputune run`\n";
    return tuner::kExitBadInput;
  }
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  nlohmann::json body = {{"name", job.name},
                         {"job_file", std::filesystem::absolute(file).lexically_normal().string()},
                         {"document", nlohmann::json::parse(std::ifstream(file))},
                         {"kernel_source", kernel_source},
                         {"files", files}};
  if (!ec) body["cwd"] = cwd.lexically_normal().string();
  return print_reply(web::post_json(r["server"].as<std::string>(), "/api/jobs", token_for(r), body),
                     "submitted");
}

int cmd_cancel(int argc, char** argv) {
  cxxopts::Options o("gputune cancel", "Cancel a queued or running job");
  o.add_options()("id", "job id (see the dashboard or /api/queue)", cxxopts::value<long>());
  add_client_options(o);
  o.parse_positional({"id"});
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "id")) return *rc;
  return print_reply(web::post_json(r["server"].as<std::string>(),
                                    "/api/jobs/" + std::to_string(r["id"].as<long>()) + "/cancel",
                                    token_for(r), {}),
                     "cancel");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage << "\n";
    return argc < 2 ? tuner::kExitBadInput : 0;
  }
  std::string cmd = argv[1];
  try {
    if (cmd == "run") return cmd_run(argc - 1, argv + 1);
    if (cmd == "batch") return cmd_batch(argc - 1, argv + 1);
    if (cmd == "space") return cmd_space(argc - 1, argv + 1);
    if (cmd == "generate") return cmd_generate(argc - 1, argv + 1);
    if (cmd == "check") return cmd_check(argc - 1, argv + 1);
    if (cmd == "best") return cmd_best(argc - 1, argv + 1);
    if (cmd == "prune") return cmd_prune(argc - 1, argv + 1);
    if (cmd == "replay") return cmd_replay(argc - 1, argv + 1);
    if (cmd == "show") return cmd_show(argc - 1, argv + 1);
    if (cmd == "runs") return cmd_runs(argc - 1, argv + 1);
    if (cmd == "export") return cmd_export(argc - 1, argv + 1);
    if (cmd == "import") return cmd_import(argc - 1, argv + 1);
    if (cmd == "devices") return cmd_devices();
    if (cmd == "cache") return cmd_cache(argc - 1, argv + 1);
    if (cmd == "serve") return cmd_serve(argc - 1, argv + 1);
    if (cmd == "worker") return cmd_worker(argc - 1, argv + 1);
    if (cmd == "submit") return cmd_submit(argc - 1, argv + 1);
    if (cmd == "cancel") return cmd_cancel(argc - 1, argv + 1);
    std::cerr << "gputune: unknown command '" << cmd << "'\n" << kUsage << "\n";
    return tuner::kExitBadInput;
  } catch (const JobError& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const pruner::DeviceError& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const db::DbError& e) {
    std::cerr << "gputune: database error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "gputune " << cmd << ": " << e.what() << " (see `gputune " << cmd << " --help`)\n";
    return tuner::kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "gputune " << cmd << ": " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitInternal;
  }
}
