#include "tuner/run/pipeline.h"

#include <iomanip>
#include <iostream>
#include <sstream>

#include "tuner/measure/device_info.h"
#include "tuner/run/hang_watch.h"
#include "tuner/run/model_work.h"
#include "tuner/run/run_stages.h"

namespace gputune::tuner {

namespace {

/// What the run compiled, for the report.
void count_compiles(RunState& s) {
  for (const auto& [index, c] : s.candidates) {
    if (c.state != Candidate::Compile::kDone) continue;
    if (c.usable())
      ++s.rep.compiled_ok;
    else
      ++s.rep.compile_failed;
    s.rep.cached += c.compiled.cached;
  }
}

/// A kernel that compiled for none of the configurations the run tried is the job's fault: the
/// failures are stored with their logs; say so, and how to fix the likeliest cause.
void no_compile_at_all(RunState& s) {
  if (s.rep.compiled_ok > 0 || s.rep.compile_failed == 0 || s.rep.interrupted) return;
  std::string first_log;
  for (const auto& [index, c] : s.candidates)
    if (c.state == Candidate::Compile::kDone && !c.compiled.ok) {
      first_log = c.compiled.log;
      break;
    }
  s.store->finish_run(s.run_id, db::RunStatus::kFailed, "no configuration compiled");
  s.store->update_run_progress(s.run_id, s.done_total, std::nullopt);
  if (first_log.size() > 4000) first_log = first_log.substr(0, 4000) + "\n...";
  // Parameters become -D macros, which CUDA's own headers also see: name the clash.
  std::string fix = "fix the compile errors above";
  if (first_log.find("__nv_nvrtc_builtin_header") != std::string::npos)
    for (auto& p : s.job.parameters)
      if (first_log.find(" " + p.name + "[") != std::string::npos ||
          first_log.find(" " + p.name + ";") != std::string::npos ||
          first_log.find(" " + p.name + " ") != std::string::npos)
        fix = "parameter '" + p.name + "' becomes the macro -D" + p.name +
              ", which clashes with an identifier in CUDA's headers; rename the parameter";
  throw JobError(s.job.file.string(), "KernelSpecification.KernelFile",
                 "the kernel does not compile for any of the " +
                     std::to_string(s.rep.compile_failed) + " configurations (run " +
                     std::to_string(s.run_id) + " keeps every log). First log:\n" + first_log,
                 fix);
}

/// The screen: what rule 4 judged from the source alone and no stage compiled since.
void report_screen(RunState& s) {
  std::size_t never = 0;
  for (std::size_t index : s.screened) {
    auto it = s.candidates.find(index);
    never += it == s.candidates.end() || it->second.state == Candidate::Compile::kNot;
  }
  s.rep.screened = never;
  if (never == 0 || !s.opt.screen) return;
  s.log << "gputune: screen: " << never << " of " << s.rep.planned
        << " configurations not compiled: rule 4 judged them from their source (their best "
           "prediction at any occupancy is more than "
        << s.job.pruner.model_margin << " x the best compiled one)\n";
}

/// How the run used its time: when it first measured, and how long the GPU worked.
void report_time(RunState& s) {
  RunReport& rep = s.rep;
  rep.wall_s = std::chrono::duration<double>(Clock::now() - s.started).count();
  rep.gpu_s = s.gpu_seconds;
  rep.first_measurement_s = s.first_measurement_s;
  if (!std::getenv("GPUTUNE_TIME_STAGES")) return;
  std::ostringstream line;
  line.precision(3);
  line << "gputune: stage stream: ";
  if (rep.first_measurement_s)
    line << "first measurement after " << *rep.first_measurement_s << " s; ";
  line << "GPU busy " << rep.gpu_s << " s of " << rep.wall_s << " s";
  if (rep.wall_s > 0) line << " (" << 100 * (1 - rep.gpu_s / rep.wall_s) << "% idle)";
  line << "; compiled " << rep.compiled_ok + rep.compile_failed << " (" << rep.cached
       << " from the cache)\n";
  s.log << line.str();
}

}  // namespace

RunReport run_job(const Job& job, const RunOptions& opt) {
  RunReport rep;
  RunState s(job, opt, rep);
  // Bad input stops here, before the database is touched: nothing is compiled or stored.
  if (!prepare_run(s)) return rep;  // --skip-unchanged: nothing to do
  open_run(s);  // the run exists from here: `show`, `runs`, the dashboard and Ctrl-C see it
  // From here on an error must not leave the run marked running: it ends as failed, with why.
  try {
    if (opt.on_run_started) opt.on_run_started(s.run_id);
    // The compile workers, the default configuration first of all: it is the reference and the
    // baseline, compiled and measured while the model plans and analyses on the other cores.
    s.pool = std::make_unique<CompilePool>(opt.threads ? opt.threads : s.job.compile_threads,
                                           [&s, cache = cache_for(s.opt.cache_dir)](Candidate& c) {
                                             compile_candidate(s.job, s.source, s.rep.arch, cache,
                                                               c, static_cast<bool>(s.dev));
                                           });
    if (s.default_index >= 0)
      s.pool->submit(s.candidate(static_cast<std::size_t>(s.default_index)));
    bool search = false;
    Plan plan = plan_without_search(s, search);
    ModelWork model(s, std::move(plan), search);
    if (s.dev) {
      s.gpu = std::make_unique<cuda::PrimaryContext>(s.dev->index);
      // A launch that never returns ends the process (a kernel cannot be interrupted in it).
      if (opt.hang_limit_s > 0)
        s.hang_watch =
            std::make_unique<HangWatch>(rep.db_path, s.run_id, opt.hang_limit_s, s.resume_command,
                                        opt.hang_report_fd, opt.should_stop, s.spent_before);
    }
    // The time budget, as a deadline (max() when the job sets none).
    s.measuring_since = Clock::now();
    if (s.job.budget.max_seconds)
      s.deadline = s.measuring_since +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                       std::max(0.0, *s.job.budget.max_seconds - s.spent_before)));
    for (std::size_t k = 0; k < s.job.contexts.size() && !rep.interrupted; ++k)
      tune_context(s, model, k);
    count_compiles(s);
    report_screen(s);
    no_compile_at_all(s);
    finish_run(s);
    s.pool.reset();  // before the state it compiles for
    report_time(s);
    return rep;
  } catch (const cuda::ContextLost& e) {
    // The variant that caused it is stored (ContextRun::launch): the run is interrupted, to be
    // resumed by a new process (the daemon restarts its worker, which resumes it).
    s.pool.reset();
    rep.interrupted = rep.context_lost = true;
    rep.exit_code = kExitInterrupted;
    rep.message = "stopped after " + std::to_string(s.done_total) +
                  " measurements: a variant lost the CUDA context (" + e.what() +
                  "), and CUDA cannot go on in this process; `" + s.resume_command +
                  "` goes on without it";
    s.store->stop_run(s.run_id, db::RunStatus::kInterrupted, rep.message);
    report_time(s);
    return rep;
  } catch (const std::exception& e) {
    s.pool.reset();
    try {
      if (auto r = s.store->run(s.run_id); r && r->status == db::RunStatus::kRunning) {
        // Bad input found once the run had begun (the first compiled variant does not take the
        // job's arguments) leaves nothing behind when the run had stored nothing yet.
        const bool discarded =
            dynamic_cast<const JobError*>(&e) != nullptr && s.store->discard_run(s.run_id);
        if (!discarded) {
          const std::int64_t measured = s.store->stop_run(
              s.run_id, db::RunStatus::kFailed, std::string("stopped by an error: ") + e.what());
          s.log << "gputune: run " << s.run_id << " stopped by the error below; its " << measured
                << " measurements are stored, and `" << s.resume_command << "` measures the rest\n";
        }
      }
    } catch (const std::exception&) {  // the database itself failed: the first error matters
      // (a full disk): what it stored stays, and the same command goes on once it can write
      if (s.run_id > 0 && !s.resume_command.empty())
        s.log << "gputune: run " << s.run_id
              << " stopped by the error below, which also kept it from recording that; what it "
                 "measured is stored, and `"
              << s.resume_command << "` measures the rest once the database can be written\n";
    }
    throw;
  }
}

}  // namespace gputune::tuner
