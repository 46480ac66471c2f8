/** \file db/schema.cpp
 * Owns: the database's schema, as the migrations that build it (each from user_version i to
 * i+1, applied in order inside a write transaction), and opening a file as a gputune database:
 * what is refused (another application's database, a newer schema) and the connection's modes
 * (WAL, foreign keys).
 * Must not: read or write rows (store.cpp, queue.cpp and browse.cpp do).
 */
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "db/store.h"

namespace gputune::db {

namespace {

// Each entry migrates from version i to i+1. Never edit a shipped entry: append a new one.
const char* const kMigrations[] = {
    R"SQL(
CREATE TABLE devices(
  id INTEGER PRIMARY KEY,
  uid TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  cc_major INTEGER NOT NULL, cc_minor INTEGER NOT NULL,
  sm_count INTEGER NOT NULL, total_mem INTEGER NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('driver','target','import')));
CREATE TABLE kernels(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  source TEXT);
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL, file TEXT NOT NULL, document TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  uid TEXT NOT NULL UNIQUE,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  strategy TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running','done','no_device','failed','interrupted','imported')),
  message TEXT NOT NULL DEFAULT '',
  total INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  finished_at TEXT);
CREATE TABLE contexts(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  kernel_id INTEGER NOT NULL REFERENCES kernels(id),
  device_id INTEGER NOT NULL REFERENCES devices(id),
  label TEXT NOT NULL,
  problem_size TEXT NOT NULL, input_values TEXT NOT NULL,
  arch TEXT NOT NULL, driver_version INTEGER NOT NULL,
  toolkit_version TEXT NOT NULL, nvrtc_version TEXT NOT NULL);
CREATE TABLE variants(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  kernel_id INTEGER NOT NULL REFERENCES kernels(id),
  config_key TEXT NOT NULL,
  params TEXT NOT NULL);
CREATE TABLE measurements(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  context_id INTEGER NOT NULL REFERENCES contexts(id),
  variant_id INTEGER NOT NULL REFERENCES variants(id),
  status TEXT NOT NULL CHECK (status IN ('correct','compile','runtime','correctness','timeout','constraints','compiled')),
  reason TEXT NOT NULL DEFAULT '', log TEXT NOT NULL DEFAULT '',
  time_ms REAL, samples TEXT NOT NULL DEFAULT '[]',
  compile_ms REAL, registers INTEGER, static_smem INTEGER, local_bytes INTEGER, spill_bytes INTEGER,
  occupancy REAL, gflops REAL, gbps REAL,
  cubin_hash TEXT NOT NULL DEFAULT '', grid TEXT NOT NULL DEFAULT '', block TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  CHECK (status <> 'correct' OR time_ms IS NOT NULL));
CREATE INDEX measurements_run ON measurements(run_id, status, time_ms);
CREATE INDEX measurements_context ON measurements(context_id, status, time_ms);
CREATE TABLE winners(
  context_id INTEGER PRIMARY KEY REFERENCES contexts(id),
  measurement_id INTEGER NOT NULL REFERENCES measurements(id),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));
)SQL",
    // 2: the daemon's job queue (lives in the database so a restart resumes it), the variant a
    // worker is measuring (to blame a crash or hang on it), model predictions, and indexes for
    // the dashboard's sortable, paged measurement lists.
    R"SQL(
ALTER TABLE measurements ADD COLUMN predicted_ms REAL;
ALTER TABLE measurements ADD COLUMN is_default INTEGER NOT NULL DEFAULT 0;
CREATE TABLE queue(
  id INTEGER PRIMARY KEY,
  uid TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  job_file TEXT NOT NULL,
  document TEXT NOT NULL,
  kernel_file TEXT NOT NULL,
  kernel_source TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','cancelled','no_device')),
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  run_id INTEGER REFERENCES runs(id),
  worker TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT '',
  inflight_context_id INTEGER, inflight_variant_id INTEGER, inflight_since REAL,
  submitted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  started_at TEXT, finished_at TEXT);
CREATE INDEX queue_status ON queue(status, id);
CREATE INDEX measurements_run_registers ON measurements(run_id, registers);
CREATE INDEX measurements_run_occupancy ON measurements(run_id, occupancy);
CREATE INDEX measurements_run_compile ON measurements(run_id, compile_ms);
CREATE INDEX measurements_run_time ON measurements(run_id, time_ms);
CREATE INDEX measurements_variant ON measurements(variant_id);
)SQL",
    // 3: what the dashboard needs to stay fast on millions of measurements: per-run counts kept
    // by triggers (page totals, run summaries, cache keys), a per-context index for best times,
    // and a partial index for the default configuration's times.
    R"SQL(
CREATE TABLE measurement_counts(
  run_id INTEGER NOT NULL REFERENCES runs(id),
  context_id INTEGER NOT NULL REFERENCES contexts(id),
  status TEXT NOT NULL,
  n INTEGER NOT NULL,
  max_id INTEGER NOT NULL,
  PRIMARY KEY (run_id, context_id, status)) WITHOUT ROWID;
INSERT INTO measurement_counts(run_id, context_id, status, n, max_id)
  SELECT run_id, context_id, status, count(*), max(id) FROM measurements GROUP BY run_id, context_id, status;
CREATE TRIGGER measurement_counts_insert AFTER INSERT ON measurements BEGIN
  INSERT INTO measurement_counts(run_id, context_id, status, n, max_id)
    VALUES (NEW.run_id, NEW.context_id, NEW.status, 1, NEW.id)
    ON CONFLICT(run_id, context_id, status) DO UPDATE SET n = n + 1, max_id = max(max_id, NEW.id);
END;
CREATE TRIGGER measurement_counts_delete AFTER DELETE ON measurements BEGIN
  UPDATE measurement_counts SET n = n - 1
    WHERE run_id = OLD.run_id AND context_id = OLD.context_id AND status = OLD.status;
END;
CREATE INDEX measurements_run_context ON measurements(run_id, context_id, status, time_ms);
CREATE INDEX measurements_default ON measurements(context_id, time_ms) WHERE is_default = 1 AND status = 'correct';
)SQL",
    // 4: the performance model's calibration per device (fitted from measured variants).
    R"SQL(
CREATE TABLE model_calibrations(
  id INTEGER PRIMARY KEY,
  device_id INTEGER NOT NULL REFERENCES devices(id),
  run_id INTEGER REFERENCES runs(id),
  samples INTEGER NOT NULL,
  rms_log_error REAL NOT NULL,
  params_json TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));
CREATE INDEX model_calibrations_device ON model_calibrations(device_id, id);
)SQL",
    // 5: the budget a run planned with (configurations measured at most; NULL: none, or a run
    // stored before this), so that `run --resume` goes on with it.
    R"SQL(
ALTER TABLE runs ADD COLUMN budget INTEGER;
)SQL",
    // 6: the seconds a run spent measuring, over all its processes (what the job's time budget,
    // GPUTune.Budget.Seconds, counts), so that `run --resume` goes on with what is left of it.
    R"SQL(
ALTER TABLE runs ADD COLUMN seconds_spent REAL;
)SQL",
    // 7: what a queued job reads besides its document and kernel (quoted headers, BinaryRaw
    // inputs), and the submitter's working directory, so that a worker can write the job out.
    R"SQL(
ALTER TABLE queue ADD COLUMN client_cwd TEXT NOT NULL DEFAULT '';
CREATE TABLE queue_files(
  id INTEGER PRIMARY KEY,
  queue_id INTEGER NOT NULL REFERENCES queue(id),
  path TEXT NOT NULL,
  content BLOB NOT NULL,
  UNIQUE (queue_id, path));
)SQL",
    // 8: what a run planned when the model searched its space (tuner/model/space_search.h), or that
    // it planned the whole space, so that `run --resume` goes on with that plan instead of
    // searching again (a calibration fitted in between could choose other configurations).
    R"SQL(
CREATE TABLE run_plans(
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  plan_json TEXT NOT NULL);
)SQL",
    // 9: why a run of a naive kernel tuned its block shape only (the kernel is outside the
    // generator's subset; '' for every other run), so that `best` and `show` say its winner is the
    // kernel as written, not a generated variant.
    R"SQL(
ALTER TABLE runs ADD COLUMN naive_fallback TEXT NOT NULL DEFAULT '';
)SQL",
    // 10: a winner named as a run goes (its fastest first-pass time so far, so that a run stopped
    // early still has one) is provisional until the run re-measures its top variants; it keeps
    // the winner it replaced, which the re-measured one is compared with.
    R"SQL(
ALTER TABLE winners ADD COLUMN provisional INTEGER NOT NULL DEFAULT 0;
ALTER TABLE winners ADD COLUMN replaced_measurement_id INTEGER REFERENCES measurements(id);
)SQL",
    // 11: a kernel's variants by kernel: the dashboard's kernel list counted them by scanning
    // every variant (20 ms per request over 100,000); a context's fastest time per variant from
    // an index alone: a tuned header read every measurement row of its contexts (1.5 to 4 s over
    // a million; bench/results/load-*.md).
    R"SQL(
CREATE INDEX variants_kernel ON variants(kernel_id);
CREATE INDEX measurements_context_variant ON measurements(context_id, status, variant_id, time_ms);
)SQL",
    // 12: a kernel's variant count kept by triggers: the kernel list still counted 100,000 index
    // entries per request (5 ms of a core each, which other requests on a 2-core machine waited
    // behind: bench/results/load-*.md); and a run's measurements of one context by time from an
    // index alone: a page of them read a table row per measurement of the run until it had 50 of
    // that context (1.5 ms per page over 600,000 in 8 contexts, 0.4 ms with the index).
    R"SQL(
CREATE INDEX measurements_run_context_time ON measurements(run_id, context_id, time_ms);
ALTER TABLE kernels ADD COLUMN variant_count INTEGER NOT NULL DEFAULT 0;
UPDATE kernels SET variant_count = (SELECT count(*) FROM variants v WHERE v.kernel_id = kernels.id);
CREATE TRIGGER kernel_variant_count_insert AFTER INSERT ON variants BEGIN
  UPDATE kernels SET variant_count = variant_count + 1 WHERE id = NEW.kernel_id;
END;
CREATE TRIGGER kernel_variant_count_delete AFTER DELETE ON variants BEGIN
  UPDATE kernels SET variant_count = variant_count - 1 WHERE id = OLD.kernel_id;
END;
CREATE TRIGGER kernel_variant_count_move AFTER UPDATE OF kernel_id ON variants
  WHEN OLD.kernel_id IS NOT NEW.kernel_id BEGIN
  UPDATE kernels SET variant_count = variant_count - 1 WHERE id = OLD.kernel_id;
  UPDATE kernels SET variant_count = variant_count + 1 WHERE id = NEW.kernel_id;
END;
)SQL",
    // 13: what the job's reading said the run should know (its notes: a naive kernel's constructs
    // read in another spelling or not understood, keys gputune ignored, ...), one per line, so
    // that `show` and the dashboard's run page say it after the terminal is gone.
    R"SQL(
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
)SQL",
    // 14: the winner rule, defined once. A measurement may win when it is correct (timed and
    // verified; the CHECK above gives it a time): correct_measurements. Of a run's correct
    // measurements in a context, the fastest is the run's best there, ties to the one stored
    // first: run_bests, one row per run and context that has a correct measurement. Its pairs come
    // from measurement_counts' key and its measurement from one probe of the (run, context, status,
    // time) index, so a query on a run, or a run and a context, reads an index entry per pair.
    // Winners across runs (the winners table, Store::offer_winner) follow the same rule.
    R"SQL(
CREATE VIEW correct_measurements AS SELECT * FROM measurements WHERE status = 'correct';
CREATE VIEW run_bests(run_id, context_id, measurement_id, variant_id, time_ms) AS
  SELECT b.run_id, b.context_id, m.id, m.variant_id, m.time_ms FROM measurement_counts b
  JOIN measurements m ON m.id = (SELECT f.id FROM correct_measurements f
    WHERE f.run_id = b.run_id AND f.context_id = b.context_id ORDER BY f.time_ms, f.id LIMIT 1)
  WHERE b.status = 'correct';
)SQL",
};

// Switching a file to WAL needs it to itself, and SQLite answers BUSY at once (its busy handler
// could deadlock there) while another connection has it open, as when the daemon and a CLI run
// open a new file together. WAL is stored in the file, so whoever switches first switches it for
// all: wait for that, up to the busy timeout's 10 s.
void use_wal(Database& db) {
  for (int attempt = 0;; ++attempt) {
    {
      Statement mode(db, "PRAGMA journal_mode");
      mode.step();
      if (mode.text(0) == "wal") return;
    }
    try {
      db.exec("PRAGMA journal_mode=WAL");  // a file system without WAL keeps its mode, as before
      return;
    } catch (const DbError& e) {
      if ((e.code & 0xff) != SQLITE_BUSY || attempt >= 1000) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace

bool is_sqlite_file(const std::string& path) {
  static constexpr char kHeader[] = "SQLite format 3";  // and its NUL: 16 bytes
  char head[sizeof kHeader] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(head, sizeof head) && std::equal(head, head + sizeof head, kHeader);
}

const std::vector<std::string>& schema_migrations() {
  static const std::vector<std::string> m(std::begin(kMigrations), std::end(kMigrations));
  return m;
}

Store::Store(const std::string& path) : db_(path) {
  // Reading the header first distinguishes "not a database" from "someone else's database".
  std::int64_t app_id, n_tables;
  {
    Statement app(db_, "PRAGMA application_id");
    app.step();
    app_id = app.int64(0);
    Statement tables(db_, "SELECT count(*) FROM sqlite_master");
    tables.step();
    n_tables = tables.int64(0);
  }
  if (app_id != kApplicationId && (app_id != 0 || n_tables > 0))
    throw DbError(path + ": not a gputune database (it holds " + std::to_string(n_tables) +
                  " tables of another application); nothing was changed. Fix: give a new file name "
                  "or an existing gputune database (--db; replay's --measurements also reads "
                  "Kernel Tuner cache and T4 files)");
  use_wal(db_);
  db_.exec("PRAGMA foreign_keys=ON");
  db_.exec("PRAGMA synchronous=NORMAL");
  migrate();
}

// Each step reads the version inside its own write transaction: another process opening the same
// file at the same moment (the daemon, a CLI run, a reader) may have applied it already.
void Store::migrate() {
  const int target = static_cast<int>(std::size(kMigrations));
  for (;;) {
    Transaction t(db_);
    int version;
    {
      Statement v(db_, "PRAGMA user_version");
      v.step();
      version = static_cast<int>(v.int64(0));
    }
    if (version > target)
      throw DbError(db_.path() + ": database schema version " + std::to_string(version) +
                    " is newer than this gputune (" + std::to_string(target) +
                    "). Fix: upgrade gputune");
    if (version == target) return;  // the transaction only read: rolling it back changes nothing
    db_.exec(kMigrations[version]);
    db_.exec("PRAGMA application_id=" + std::to_string(kApplicationId));
    db_.exec("PRAGMA user_version=" + std::to_string(version + 1));
    t.commit();
  }
}

}  // namespace gputune::db
