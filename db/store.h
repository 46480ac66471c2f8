/** \file db/store.h
 * Owns: the gputune database: schema and migrations, and every SQL statement the project runs.
 * Devices, kernels (by source hash), jobs and runs, input contexts, variants (by parameters),
 * measurements (all samples, resources, status, reason) and the winner per context.
 * Identities that must survive merging databases from several machines are content hashes
 * (kernel, variant, context, device uid, run uid); integer ids stay local.
 * Consumes: plain records. Produces: rows and query results.
 * Must not: know about CUDA, NVRTC, or how jobs are parsed. */
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/sqlite.h"
#include "db/status.h"

namespace gputune::db {

/// A random identity (32 hex digits) for a run or a queued job: unique across machines, so shards
/// of several machines can be merged.
std::string random_uid();

struct DeviceRecord {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::int64_t total_mem = 0;
  std::string source = "driver";  ///< driver, target (no GPU: compile target only), import
  std::string uid() const;        ///< content hash of the identity fields
};

struct ContextRecord {
  std::int64_t kernel_id = 0, device_id = 0;
  std::string label;               ///< e.g. "4096x4096"
  std::string problem_size_json;   ///< [4096, 4096, 1]
  std::string values_json = "{}";  ///< other input values
  std::string arch;                ///< sm_90
  int driver_version = 0;          ///< 0: none
  std::string toolkit_version, nvrtc_version;
  std::string hash;  ///< computed by the store when empty
};

struct MeasurementRecord {
  std::int64_t run_id = 0, context_id = 0, variant_id = 0;
  Status status;                  ///< db/status.h
  std::string reason;             ///< failure reason or note
  std::string log;                ///< compile log for failures
  std::optional<double> time_ms;  ///< median
  std::vector<double> samples_ms;
  std::optional<double> compile_ms;
  std::optional<int> registers, static_smem, local_bytes, spill_bytes;
  std::optional<double> occupancy;
  std::optional<double> gflops, gbps;
  std::string cubin_hash;
  std::string grid, block;             ///< "x,y,z"
  std::optional<double> predicted_ms;  ///< the model's prediction, when a model ran
  bool is_default = false;             ///< the job's default configuration (speedup baseline)
};

struct MeasurementRow : MeasurementRecord {
  std::int64_t id = 0;
  std::string config_key, params_json, context_label, created_at;
};

struct WinnerRow {
  std::string kernel, context_label, device, config_key, params_json;
  double time_ms = 0;
  std::int64_t run_id = 0, measurement_id = 0;
  std::int64_t context_id = 0;
  std::string kernel_hash;  ///< the kernel source's content hash (one per version of the source)
  std::optional<double> gflops, gbps;
  std::optional<int> registers;
  std::optional<double> occupancy;
  /// Named as its run went, not re-measured yet (the run stopped early, or is still going).
  bool provisional = false;
};

struct RunRow {
  std::int64_t id = 0;
  std::string uid, job_name, job_file;
  RunStatus status = RunStatus::kRunning;
  std::string message, strategy, started_at, finished_at;
  std::int64_t total = 0, done = 0;    ///< planned and decided (context, variant) pairs
  std::optional<std::int64_t> budget;  ///< configurations it measures at most; none: no budget
  /// Seconds it spent measuring over all its processes (the job's time budget counts these);
  /// none: a run stored before schema 6.
  std::optional<double> seconds_spent;
  /// Why a naive kernel's run tuned its block shape only (outside the generator's subset), so
  /// its winner is the kernel file as written; "" for every other run.
  std::string naive_fallback;
  /// The job's notes when the run began (Job::notes: what its reading of the files said), one
  /// per line; "" for a run without any or stored before schema 13.
  std::string notes;
};

/// A file a queued job reads besides its document and kernel (a header, a BinaryRaw input), by
/// its absolute path on the machine that submitted the job.
struct QueueFile {
  std::string path;
  std::string bytes;
};

/// A job waiting in (or taken from) the daemon's queue. The job document, the kernel source and
/// the files they read (Store::queue_files) travel together so a worker can run it anywhere.
struct QueueItem {
  std::int64_t id = 0;
  std::string uid, name, job_file, document, kernel_file, kernel_source;
  std::string client_cwd;  ///< the submitter's working directory (relative -I folders); "" if none
  QueueStatus status = QueueStatus::kQueued;
  bool cancel_requested = false;
  std::optional<std::int64_t> run_id;
  std::string worker, message, submitted_at, started_at, finished_at;
  int attempts = 0;
  std::optional<std::int64_t> inflight_context_id, inflight_variant_id;
  std::optional<double> inflight_since;  ///< unix seconds
};

/// What a model_guided run planned: the configurations the model's search chose from a space too
/// large to analyse whole, and those drawn from what it left out for the regret sample (by
/// configuration key), or, with `searched` false, the whole space. `run --resume` goes on with it.
struct RunPlan {
  bool searched = false;
  std::vector<std::string> chosen, left_out;
  std::string summary;  ///< the search's own words (ModelSearch::summary); "" without a search
};

/// A stored measurement's status; a text no version of gputune wrote is a damaged database
/// (DbError naming the text).
Status status_of(const std::string& text);
/// A stored run's or queued job's status from its column's text; throws DbError naming the text
/// when it names none (a database changed outside gputune).
RunStatus run_status_of(const std::string& text);
QueueStatus queue_status_of(const std::string& text);

/// Whether `path` is an SQLite database (its 16-byte header), such as a gputune database; false
/// for a file that cannot be read.
bool is_sqlite_file(const std::string& path);

class Store {
 public:
  static constexpr int kSchemaVersion = 14;
  static constexpr std::int64_t kApplicationId = 0x47505455;  // "GPTU"

  /// Opens or creates `path`, migrating an older gputune schema. Throws DbError when the file is
  /// not a database, or is another application's database (nothing in it is changed then).
  explicit Store(const std::string& path);
  Database& db() { return db_; }

  std::int64_t upsert_device(const DeviceRecord& d);
  std::int64_t upsert_kernel(const std::string& name, const std::string& hash,
                             const std::string& source);
  std::int64_t upsert_job(const std::string& name, const std::string& file,
                          const std::string& document);
  std::int64_t upsert_context(ContextRecord c);
  std::int64_t upsert_variant(std::int64_t kernel_id, const std::string& config_key,
                              const std::string& params_json);

  std::int64_t begin_run(std::int64_t job_id, const std::string& strategy, std::int64_t total,
                         std::optional<std::int64_t> budget = std::nullopt,
                         const std::string& naive_fallback = "", const std::string& notes = "");
  /// Marks an interrupted run running again, with what it now plans (`run --resume`).
  void resume_run(std::int64_t run_id, std::int64_t total, std::optional<std::int64_t> budget);
  /// What the run planned (RunPlan), stored when it begins; replaces an earlier plan of the run.
  void save_run_plan(std::int64_t run_id, const RunPlan& plan);
  /// The run's plan; none for a run that did not plan under model_guided, or one stored before
  /// plans were. Throws DbError naming the run when the stored plan cannot be read.
  std::optional<RunPlan> run_plan(std::int64_t run_id);
  /// The job document the run was started with ("" when there is no such run).
  std::string run_job_document(std::int64_t run_id);
  /// Hashes of the kernels (their source) the run has measurements of.
  std::vector<std::string> run_kernel_hashes(std::int64_t run_id);
  /// Decided pairs so far and, when given, the seconds spent measuring (RunRow::seconds_spent).
  void update_run_progress(std::int64_t run_id, std::int64_t done,
                           std::optional<double> seconds_spent = std::nullopt);
  void set_run_seconds_spent(std::int64_t run_id, double seconds);
  void finish_run(std::int64_t run_id, RunStatus status, const std::string& message);
  /// Ends a run that stopped early (an error, a hung kernel): finish_run, with its progress set
  /// to the (context, variant) pairs it measured. Returns that count.
  std::int64_t stop_run(std::int64_t run_id, RunStatus status, const std::string& message);

  std::int64_t add_measurement(const MeasurementRecord& m);
  /// Makes this measurement the context's winner if it is correct and faster than the current one
  /// (or the current winner's measurement is gone). Returns true when it became the winner.
  /// `provisional`: a run names its fastest first-pass time as it goes, so that a run stopped
  /// early (Ctrl-C, a kill, a spent budget) still has a winner; the winner it replaces is kept
  /// with it. The run's own later offers (a faster first pass, or the re-measured winner, not
  /// provisional) replace its provisional winner whatever its time, and a re-measured winner
  /// slower than the one the provisional replaced gives that one back. Returns true when the
  /// measurement became the winner.
  bool offer_winner(std::int64_t context_id, std::int64_t measurement_id, bool provisional = false);
  /// The model's prediction for a stored measurement, known only after it was stored (the
  /// default configuration is measured before the model has analysed it).
  void set_predicted_ms(std::int64_t measurement_id, double ms);
  /// The (context, variant) pairs a run plans, once its model search has chosen them.
  void set_run_total(std::int64_t run_id, std::int64_t total);
  /// Deletes a run that has no measurement (bad input found once it had begun, such as arguments
  /// the first compiled variant does not take); false, and nothing changed, when it has some.
  bool discard_run(std::int64_t run_id);

  /// The performance model's calibration for a device (pruner::Calibration::json()).
  std::int64_t save_calibration(std::int64_t device_id, std::optional<std::int64_t> run_id,
                                int samples, double rms_log_error, const std::string& params_json);
  std::optional<std::string> latest_calibration(std::int64_t device_id);
  /// A verified time with the model's prediction for it: what the model missed there.
  struct PredictedTime {
    std::int64_t run_id = 0, context_id = 0;
    std::string params_json;
    double time_ms = 0, predicted_ms = 0;
    bool imported = false;  ///< from an imported Kernel Tuner cache (`gputune import`)
  };
  /// The newest `limit` verified times with a prediction of kernels named `kernel` on a device,
  /// leaving out one (run, context) (the one being measured, which a resumed run has begun):
  /// what earlier contexts and runs teach a search about the kernel's parameters there.
  std::vector<PredictedTime> predicted_times(std::int64_t device_id, const std::string& kernel,
                                             std::int64_t skip_run, std::int64_t skip_context,
                                             int limit);
  /// As predicted_times, with or without a prediction (predicted_ms 0 where there is none), and
  /// the times of imported Kernel Tuner caches of the kernel on a device of the same name: what
  /// earlier searches teach a search over variants the model cannot read.
  std::vector<PredictedTime> verified_times(std::int64_t device_id, const std::string& kernel,
                                            std::int64_t skip_run, std::int64_t skip_context,
                                            int limit);
  struct NamedCalibration {
    std::string params_json;
    std::string device_name;  ///< the device record it was fitted for
    std::int64_t device_id = 0;
  };
  /// The newest calibration of any device named one of `names` (case-insensitively) with this
  /// compute capability and SM count: how `prune --device` finds what runs fitted on that GPU,
  /// whose device records carry the driver's name.
  std::optional<NamedCalibration> latest_calibration_named(const std::vector<std::string>& names,
                                                           int cc_major, int cc_minor,
                                                           int sm_count);

  /// Winners of a kernel (by name or hash prefix), optionally one context label / device name.
  std::vector<WinnerRow> winners(const std::string& kernel, const std::string& context_label = {},
                                 const std::string& device = {});
  std::optional<RunRow> run(std::int64_t run_id);
  std::vector<RunRow> runs(int limit = 20);
  /// Runs of the job with this document (Job::document, as stored by upsert_job) whose id is
  /// above `after_run_id`, oldest first: what one `gputune run` of that job stored.
  std::vector<RunRow> runs_of_job(const std::string& document, std::int64_t after_run_id = 0);
  /// The best correct time of the newest finished ("done") run of the same job before `run_id`,
  /// in a context with the device, label, problem size and input values of `context_id` (the
  /// kernel's source, the driver and the toolkit may differ): what `gputune batch` compares with.
  struct PreviousBest {
    std::int64_t run_id = 0;
    double best_ms = 0;
    std::int64_t context_id = 0;  ///< that run's matching context
  };
  std::optional<PreviousBest> previous_best(std::int64_t run_id, std::int64_t context_id);
  /// The fastest correct measurement of a run in a context (its first pass or a re-measurement).
  struct Fastest {
    std::string config_key, params_json;
    double time_ms = 0;
  };
  std::optional<Fastest> fastest_correct(std::int64_t run_id, std::int64_t context_id);
  /// The newest finished ("done") run of the job with this document and strategy that measured
  /// in every one of `contexts` as they are now: the same kernel source (`kernel_hash`, as
  /// upsert_kernel stores it; each record's kernel_id is not used), device, problem size, input
  /// values, architecture, driver, toolkit and NVRTC (the context's hash). Reads only: nothing
  /// is inserted for a kernel or context never stored. What `run --skip-unchanged` skips on.
  std::optional<RunRow> unchanged_run(const std::string& document, const std::string& strategy,
                                      const std::string& kernel_hash,
                                      const std::vector<ContextRecord>& contexts);
  /// (context, variant) pairs of a run with a verified time: what was measured on a GPU. A run
  /// without a GPU and a `prune` decide every pair (RunRow::done) and time none. A scan of the
  /// run's measurements: for the CLI, not for what the dashboard polls.
  std::int64_t timed_pairs(std::int64_t run_id);
  /// Measurements of a run (all when run_id is 0), fastest correct first.
  std::vector<MeasurementRow> measurements(std::int64_t run_id, std::int64_t context_id = 0);
  /// Contexts of a kernel (id, label, device name).
  struct ContextRow {
    std::int64_t id;
    std::string label, device, problem_size_json, arch;
    std::string kernel;  ///< the kernel's name
  };
  std::vector<ContextRow> contexts(const std::string& kernel);
  /// One context by id (none: no such context).
  std::optional<ContextRow> context(std::int64_t context_id);
  /// The parameter names, in their configurations' order, of each stored kernel of this name
  /// (one list per kernel version with variants, newest first).
  std::vector<std::vector<std::string>> parameter_orders(const std::string& kernel);
  /// Devices measured in a run (all devices when run_id is 0).
  std::vector<DeviceRecord> devices(std::int64_t run_id = 0);

  // --- The daemon's queue ---------------------------------------------------------------------
  /// Queues the item with its files, in one transaction.
  std::int64_t enqueue(const QueueItem& item, const std::vector<QueueFile>& files = {});
  /// The files a queued job was submitted with, by path (none once it has finished: finishing
  /// or cancelling a job drops them).
  std::vector<QueueFile> queue_files(std::int64_t id);
  /// Atomically takes the oldest queued job for `worker` (status -> running, attempts + 1).
  std::optional<QueueItem> claim_next(const std::string& worker);
  std::optional<QueueItem> queue_item(std::int64_t id);
  std::vector<QueueItem> queue(int limit = 50, bool include_finished = true);
  void set_queue_run(std::int64_t id, std::int64_t run_id);
  void finish_queue(std::int64_t id, QueueStatus status, const std::string& message);
  /// Queued jobs are cancelled at once; running ones when their worker next checks. False when
  /// the job is unknown or already finished.
  bool request_cancel(std::int64_t id);
  bool cancel_requested(std::int64_t id);
  /// Puts running jobs back in the queue (after a daemon restart or a worker fault); returns them.
  /// `count_attempt` false: their claim is not counted as an attempt (the worker ended because a
  /// variant lost its CUDA context: the job made progress, nothing failed).
  std::vector<std::int64_t> requeue_running(const std::string& worker = {},
                                            bool count_attempt = true);
  void set_in_flight(std::int64_t queue_id, std::int64_t context_id, std::int64_t variant_id);
  void clear_in_flight(std::int64_t queue_id);
  /// (context_id, variant_id) pairs a run has measured in its first pass (not re-measurements).
  std::vector<std::pair<std::int64_t, std::int64_t>> measured_pairs(std::int64_t run_id);

 private:
  void drop_queue_files(std::int64_t id);
  /// predicted_times and verified_times: the newest verified times, with a prediction only when
  /// `with_prediction`.
  std::vector<PredictedTime> past_times(std::int64_t device_id, const std::string& kernel,
                                        std::int64_t skip_run, std::int64_t skip_context, int limit,
                                        bool with_prediction);

  void migrate();
  Database db_;
};

/// The schema migrations, in order (migration i takes user_version i to i+1). For tests.
const std::vector<std::string>& schema_migrations();

/// The default database file: $GPUTUNE_DB, else ./gputune.db.
std::string default_database_path();

}  // namespace gputune::db
