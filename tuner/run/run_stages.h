/** \file tuner/run/run_stages.h
 * Owns: what the stages of `gputune run` share (RunState) and the stage functions run_job calls in
 * order (tuner/run/pipeline.cpp reads as the list of them):
 *   prepare_run   (run_stages.cpp)    inputs, database, resume checks, device, argument sizes
 *   open_run      (run_stages.cpp)    the run's rows: it exists before the first compile
 *   ModelWork     (model_work.h)      on other cores: the plan (the model's search of a large
 *                                     space) and each context's best cases
 *   tune_context  (tune_context.cpp)  the default first, then the search as a stream of compiles
 *                                     and measurements, the regret sample, the calibration, the
 *                                     re-measured winner
 *   finish_run    (run_stages.cpp)    the run's status and message
 * Internal to tuner/: the CLI and the daemon call run_job (pipeline.h).
 * Must not: parse command lines or write SQL (db/ does). */
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda/driver.h"
#include "db/run_lock.h"
#include "db/store.h"
#include "pruner/model.h"
#include "pruner/occupancy.h"
#include "pruner/rules.h"
#include "tuner/compile/candidate.h"
#include "tuner/compile/compile_pool.h"
#include "tuner/measure/device_info.h"
#include "tuner/model/predict.h"
#include "tuner/run/run_options.h"
#include "tuner/run/run_report.h"
#include "variants/space.h"

namespace gputune::tuner {

class HangWatch;
class ModelWork;

using Clock = std::chrono::steady_clock;

/// Logs a stage; with GPUTUNE_TIME_STAGES set, also how long it took.
class Stage {
 public:
  Stage(std::ostream& log, std::string name);
  /// The line goes to `say` instead (ModelWork's thread never writes to the log itself).
  Stage(std::function<void(const std::string&)> say, std::string name);
  ~Stage();

 private:
  std::function<void(const std::string&)> say_;
  std::string name_;
  Clock::time_point t0_;
};

/// The configurations a run tunes, in the strategy's numbering (a position): the whole space,
/// what the model's search chose (then some drawn from what it left out), or the first
/// configurations a strategy without feedback proposes, within the budget.
struct Plan {
  std::vector<std::size_t> index;  ///< per position, the position in the space
  std::vector<char> left_out;      ///< per position: drawn from what the search left out
  bool searched = false;           ///< the model's search chose it
  std::string summary;             ///< the search's own words
  /// The position of a space index (-1: not planned).
  long position(std::size_t space_index) const;
  std::unordered_map<std::size_t, std::size_t> position_of;  ///< space index -> position
};

/// What every stage reads, and the run's records. Built by prepare_run and open_run.
struct RunState {
  RunState(const Job& job, const RunOptions& opt, RunReport& rep);
  Job job;  ///< a resumed run goes on with the budget it planned with
  const RunOptions& opt;
  RunReport& rep;
  std::ostream& log;
  const Clock::time_point started = Clock::now();

  std::string source;
  Space space;
  std::unique_ptr<db::Store> store;
  /// This process's claim on the run while it measures (db/run_lock.h): a resume waits for a
  /// process still finishing the run.
  db::RunLock run_lock;
  bool guided = false;      ///< model_guided
  bool use_model = false;   ///< model_guided, or the pruner on
  double spent_before = 0;  ///< seconds of the time budget earlier processes of the run spent

  // Device (none: everything up to timing runs, nothing is timed).
  std::optional<DeviceInfo> dev;
  std::string no_device_reason;
  pruner::DeviceLimits limits;
  Rates rates;
  pruner::Calibration calibration;  ///< the device's, fitted by earlier runs
  pruner::PruneOptions rule_options;
  std::optional<db::RunPlan> stored_plan;  ///< a resumed model_guided run's

  // Records.
  std::int64_t device_id = 0, job_id = 0, kernel_id = 0, run_id = 0;
  std::string resume_command;
  /// On resume: what the run measured already, per (context, variant).
  std::set<std::pair<std::int64_t, std::int64_t>> already;
  std::int64_t done_total = 0;  ///< decided (context, variant) pairs, for the run's progress

  // The run's configurations, by space index: compiled once, shared by the contexts.
  std::unordered_map<std::size_t, Candidate> candidates;
  Candidate& candidate(std::size_t space_index);
  std::int64_t variant_id(Candidate& c);  ///< its row, stored on first use
  std::unique_ptr<CompilePool> pool;
  /// Configurations rule 4 dropped from their source alone in some context (the screen).
  std::unordered_set<std::size_t> screened;
  long default_index = -1;  ///< the default configuration's space index (-1: not in the space)
  /// The first compiled variant's cubin showed the job's arguments fit the kernel (later ones
  /// that differ fail alone).
  bool arguments_checked = false;

  // The time budget and GPU time.
  Clock::time_point measuring_since = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();
  bool out_of_time = false;
  double gpu_seconds = 0;                     ///< in the measurer (launches, copies, verification)
  std::optional<double> first_measurement_s;  ///< after the start, for the stage log
  std::optional<double> seconds_spent() const;  ///< of the time budget, all processes
  std::unique_ptr<HangWatch> hang_watch;
  std::unique_ptr<cuda::PrimaryContext> gpu;

  /// The record that identifies a context's times.
  db::ContextRecord context_record(const ContextSpec& ctx) const;
};

/// Inputs, database, resume checks, device, argument sizes; --skip-unchanged. Throws JobError and
/// db::DbError before anything is written. Returns false when there is nothing to do
/// (rep.unchanged).
bool prepare_run(RunState& s);
/// The job, kernel and run rows, and the resume command: the run exists from here.
void open_run(RunState& s);
/// A compiled candidate came back from the pool: the job's arguments are checked against the
/// first that compiled (a mismatch there is bad input); a later one that differs fails alone.
void check_compiled(RunState& s, Candidate& c);
/// Waits until `c` is compiled (submitting it if it is not queued), taking every other
/// candidate that comes back meanwhile (each checked by check_compiled). `on_other` is called for
/// those. False when Ctrl-C stopped the wait.
bool wait_compiled(RunState& s, Candidate& c, const std::function<void(Candidate&)>& on_other = {});
/// One context: the default first, the search, the regret sample, calibration, winner.
void tune_context(RunState& s, ModelWork& model, std::size_t context_index);
/// The run's status, message and exit code.
void finish_run(RunState& s);

}  // namespace gputune::tuner
