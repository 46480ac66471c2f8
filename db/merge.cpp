/** \file db/merge.cpp
 * Owns: `gputune db merge OUT SHARD...` (db/merge.h): every shard is checked before OUT is
 * opened, copied (a snapshot through SQLite's backup API, so a shard is never written, and one of
 * an older schema is migrated in its copy), ATTACHed to OUT's connection, and merged with
 * INSERT ... SELECT inside one write transaction for the whole invocation: SQLite's journal then
 * makes a kill -9 leave OUT as it was or fully merged.
 * Must not: write a shard, merge the daemon's queue (queue, queue_files: one daemon's local state,
 * meaningless elsewhere), or keep rows whose run, context or variant a shard does not hold.
 *
 * What is "the same row" (so that merging twice changes nothing, and any order gives one result):
 * - devices by uid, kernels by hash, jobs by hash (of the document), contexts by hash, variants by
 *   hash, runs by uid. Descriptive fields outside an identity keep the smallest value seen
 *   (a job's file and name, a context's label, a device's source), which no order changes.
 * - A run met again keeps the state furthest along: the largest (done, seconds_spent, finished
 *   or not, finished_at, status, message, total): a shard copied mid-run and one copied later.
 * - Measurements have no uid. Their key is (run uid, context hash, variant hash, created_at,
 *   status, is_default, time_ms, samples, reason): a run's rows come from the processes of that
 *   run only, which store one (context, variant) pair once per pass, and a second pass (the
 *   re-measurement) has other samples and a later created_at (milliseconds). Rows equal in the
 *   whole key are counted, not collapsed: OUT keeps as many as the shard holding the most
 *   (the k-th such row of a shard is the k-th of OUT). Every other column is written once when
 *   the row is stored, except predicted_ms (Store::set_predicted_ms, after the default
 *   configuration's row): OUT fills one it lacks from a shard that has it. A run OUT holds with
 *   the same counts per (context, status) as the shard is skipped whole (a run's rows are only
 *   appended, so two copies of it are prefixes of one sequence: equally long, equal), which
 *   makes merging a shard again cheap.
 * - model_calibrations by their whole content (device uid, run uid, samples, error, parameters,
 *   created_at); run_plans by run uid, the larger plan text where two differ.
 * - measurement_counts follows through its triggers.
 * Winners: each context's candidates are the winners OUT and the shards name (remapped). A
 * re-measured winner beats a provisional one (a run's first-pass word, not re-measured yet); then
 * the fastest time wins; ties go to the smallest (run uid, variant hash, created_at). A total
 * order, so the result is the same for any order and grouping of shards; the loser stays in
 * measurements as history. A provisional winner keeps the winner it replaced (remapped).
 * More shards than SQLite attaches at once (10 by default): groups of them are merged into a
 * staging database beside the copies first, and OUT takes the staging database in one
 * transaction, so OUT is still written once.
 */
#include "db/merge.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <tuple>

#include "db/snapshot.h"
#include "db/store.h"

namespace gputune::db {

namespace fs = std::filesystem;

namespace {

const char* const kNothingWritten = "; nothing was written to ";

/// A shard accepted for merging: its snapshot copy and what it was.
struct Snapshot {
  std::string shard, copy;
  int version = 0;
  bool skipped = false;  // OUT itself
};

/// Checks a shard (read only) and copies it to `copy`; migrates the copy when older. Throws
/// DbError naming the shard and the fix when it cannot be merged.
Snapshot snapshot(const std::string& shard, const std::string& copy, const std::string& out) {
  Snapshot s{shard, copy};
  s.version = snapshot_database(
      shard, copy,
      {kNothingWritten + out, "give gputune database files as shards (a run's --db file)",
       "merge with the gputune that wrote the shard (or a newer one)",
       "free space for the copy (--temp-dir)"});
  return s;
}

/// The rank of a winner candidate: re-measured before provisional, then by time, then content.
using Rank = std::tuple<int, double, std::string, std::string, std::string>;

class Merger {
 public:
  explicit Merger(Database& db) : db_(db) {}

  /// Merges the attached schema `s` (a current-version gputune database); inside a transaction.
  /// Merges shard `shard`, attached as schema `s`, into OUT (main), step by step.
  void merge(const std::string& s, const std::string& shard, ShardMergeReport& rep) {
    merge_identities(s);
    merge_runs(s, rep);
    refuse_orphans(s, shard, rep);
    const bool overlap = find_unchanged_runs(s);
    merge_measurements(s, overlap, rep);
    merge_calibrations_and_plans(s, rep);
    merge_winners(s);
  }

  /// Devices, kernels, jobs, contexts and variants by their content identities, and the maps
  /// from the shard's integer ids to OUT's (temp.map_dev, map_ctx, map_var; temp.old_runs: the
  /// shard's runs OUT holds already).
  void merge_identities(const std::string& s) {
    exec_sql(
        "DROP TABLE IF EXISTS temp.map_ctx; DROP TABLE IF EXISTS temp.map_var;"
        "DROP TABLE IF EXISTS temp.map_run; DROP TABLE IF EXISTS temp.map_dev;"
        "DROP TABLE IF EXISTS temp.old_runs; DROP TABLE IF EXISTS temp.out_n;");
    exec_sql(
        "INSERT INTO main.devices(uid,name,cc_major,cc_minor,sm_count,total_mem,source) "
        "SELECT uid,name,cc_major,cc_minor,sm_count,total_mem,source FROM S.devices WHERE true "
        "ON CONFLICT(uid) DO UPDATE SET source=excluded.source WHERE excluded.source<source;"
        "INSERT INTO main.kernels(hash,name,source) SELECT hash,name,source FROM S.kernels "
        "WHERE true ON CONFLICT(hash) DO UPDATE SET name=min(name,excluded.name), "
        "source=coalesce(source,excluded.source) "
        "WHERE excluded.name<name OR (source IS NULL AND excluded.source IS NOT NULL);"
        "INSERT INTO main.jobs(hash,name,file,document) SELECT hash,name,file,document "
        "FROM S.jobs WHERE true ON CONFLICT(hash) DO UPDATE SET name=min(name,excluded.name), "
        "file=min(file,excluded.file) WHERE excluded.name<name OR excluded.file<file;"
        "INSERT INTO main.contexts(hash,kernel_id,device_id,label,problem_size,input_values,arch,"
        "driver_version,toolkit_version,nvrtc_version) "
        "SELECT c.hash,k2.id,d2.id,c.label,c.problem_size,c.input_values,c.arch,c.driver_version,"
        "c.toolkit_version,c.nvrtc_version FROM S.contexts c "
        "JOIN S.kernels k ON k.id=c.kernel_id JOIN main.kernels k2 ON k2.hash=k.hash "
        "JOIN S.devices d ON d.id=c.device_id JOIN main.devices d2 ON d2.uid=d.uid WHERE true "
        "ON CONFLICT(hash) DO UPDATE SET label=excluded.label WHERE excluded.label<label;"
        "INSERT INTO main.variants(hash,kernel_id,config_key,params) "
        "SELECT v.hash,k2.id,v.config_key,v.params FROM S.variants v "
        "JOIN S.kernels k ON k.id=v.kernel_id JOIN main.kernels k2 ON k2.hash=k.hash WHERE true "
        "ON CONFLICT(hash) DO NOTHING;"
        "CREATE TEMP TABLE map_dev(s INTEGER PRIMARY KEY, o INTEGER NOT NULL);"
        "INSERT INTO temp.map_dev SELECT d.id,d2.id FROM S.devices d "
        "JOIN main.devices d2 ON d2.uid=d.uid;"
        "CREATE TEMP TABLE map_ctx(s INTEGER PRIMARY KEY, o INTEGER NOT NULL);"
        "INSERT INTO temp.map_ctx SELECT c.id,c2.id FROM S.contexts c "
        "JOIN main.contexts c2 ON c2.hash=c.hash;"
        "CREATE TEMP TABLE map_var(s INTEGER PRIMARY KEY, o INTEGER NOT NULL);"
        "INSERT INTO temp.map_var SELECT v.id,v2.id FROM S.variants v "
        "JOIN main.variants v2 ON v2.hash=v.hash;"
        "CREATE TEMP TABLE old_runs(o INTEGER PRIMARY KEY);"
        "INSERT INTO temp.old_runs SELECT r2.id FROM S.runs r JOIN main.runs r2 ON r2.uid=r.uid;",
        s);
  }

  /// Runs by uid: a run found again keeps the state furthest along; temp.map_run.
  void merge_runs(const std::string& s, ShardMergeReport& rep) {
    const std::int64_t old_runs = count("SELECT count(*) FROM temp.old_runs");
    exec_sql(
        "INSERT INTO main.runs(uid,job_id,strategy,status,message,total,done,started_at,"
        "finished_at,budget,seconds_spent,naive_fallback,notes) "
        "SELECT r.uid,j2.id,r.strategy,r.status,r.message,r.total,r.done,r.started_at,"
        "r.finished_at,r.budget,r.seconds_spent,r.naive_fallback,r.notes FROM S.runs r "
        "JOIN S.jobs j ON j.id=r.job_id JOIN main.jobs j2 ON j2.hash=j.hash WHERE true "
        "ON CONFLICT(uid) DO UPDATE SET strategy=excluded.strategy, status=excluded.status, "
        "message=excluded.message, total=excluded.total, done=excluded.done, "
        "started_at=excluded.started_at, finished_at=excluded.finished_at, "
        "budget=excluded.budget, seconds_spent=excluded.seconds_spent, "
        "naive_fallback=excluded.naive_fallback, notes=excluded.notes "
        "WHERE (excluded.done, coalesce(excluded.seconds_spent,-1), excluded.finished_at IS NOT "
        "NULL, coalesce(excluded.finished_at,''), excluded.status, excluded.message, "
        "excluded.total) > (done, coalesce(seconds_spent,-1), finished_at IS NOT NULL, "
        "coalesce(finished_at,''), status, message, total);",
        s);
    const std::int64_t runs_changed = count("SELECT changes()");
    const std::int64_t runs_in_shard = count("SELECT count(*) FROM " + s + ".runs");
    exec_sql(
        "CREATE TEMP TABLE map_run(s INTEGER PRIMARY KEY, o INTEGER NOT NULL);"
        "INSERT INTO temp.map_run SELECT r.id,r2.id FROM S.runs r "
        "JOIN main.runs r2 ON r2.uid=r.uid;",
        s);
    rep.runs_added = runs_in_shard - old_runs;
    rep.runs_updated = runs_changed - rep.runs_added;
  }

  /// A row whose run, context or variant the shard does not hold: a damaged shard, refused.
  void refuse_orphans(const std::string& s, const std::string& shard, ShardMergeReport& rep) {
    rep.measurements = count("SELECT count(*) FROM " + s + ".measurements");
    const std::int64_t orphans =
        count(sub("SELECT count(*) FROM S.measurements m LEFT JOIN temp.map_run r ON r.s=m.run_id "
                  "LEFT JOIN temp.map_ctx c ON c.s=m.context_id LEFT JOIN temp.map_var v "
                  "ON v.s=m.variant_id WHERE r.o IS NULL OR c.o IS NULL OR v.o IS NULL",
                  s));
    if (orphans)
      throw DbError(shard + ": " + std::to_string(orphans) +
                    " measurements name a run, context or variant the shard does not hold (it "
                    "was changed outside gputune); nothing was written. Fix: leave this shard "
                    "out, or repair it");
  }

  /// The runs OUT holds whole already (temp.same_runs) and those it holds in part
  /// (temp.diff_runs, with OUT's rows of them counted by key in temp.out_n); true when there are
  /// any of the latter.
  bool find_unchanged_runs(const std::string& s) {
    // A run OUT holds with the same counts per (context, status) as the shard holds the same
    // rows: a run's rows are only ever appended, by that run's processes (and by merges of its
    // copies), so two copies of it are prefixes of one sequence, equal when equally long. Its
    // rows are skipped unless the shard has predictions of the default configuration (written
    // after its row) that OUT lacks. The rest of OUT's rows of runs it had already are counted
    // by the measurement key (see above).
    exec_sql(
        "DROP TABLE IF EXISTS temp.same_runs; DROP TABLE IF EXISTS temp.diff_runs;"
        "CREATE TEMP TABLE same_runs(o INTEGER PRIMARY KEY);"
        "CREATE TEMP TABLE diff_runs(o INTEGER PRIMARY KEY);"
        "INSERT OR IGNORE INTO temp.diff_runs SELECT run FROM ("
        "SELECT r.o AS run, c.o AS ctx, x.status, x.n FROM S.measurement_counts x "
        "JOIN temp.map_run r ON r.s=x.run_id JOIN temp.map_ctx c ON c.s=x.context_id "
        "WHERE x.n>0 AND r.o IN (SELECT o FROM temp.old_runs) EXCEPT "
        "SELECT run_id, context_id, status, n FROM main.measurement_counts WHERE n>0);"
        "INSERT OR IGNORE INTO temp.diff_runs SELECT run FROM ("
        "SELECT run_id AS run, context_id, status, n FROM main.measurement_counts "
        "WHERE n>0 AND run_id IN (SELECT o FROM temp.old_runs) EXCEPT "
        "SELECT r.o, c.o, x.status, x.n FROM S.measurement_counts x "
        "JOIN temp.map_run r ON r.s=x.run_id JOIN temp.map_ctx c ON c.s=x.context_id "
        "WHERE x.n>0);"
        "INSERT OR IGNORE INTO temp.diff_runs SELECT run FROM ("
        "SELECT r.o AS run, count(m.predicted_ms) AS p FROM S.measurements m "
        "JOIN temp.map_run r ON r.s=m.run_id WHERE m.is_default=1 AND m.status='correct' "
        "AND r.o IN (SELECT o FROM temp.old_runs) GROUP BY r.o) sp WHERE sp.p > (SELECT "
        "count(predicted_ms) FROM main.measurements o WHERE o.run_id=sp.run AND o.is_default=1 "
        "AND o.status='correct');"
        "INSERT INTO temp.same_runs SELECT o FROM temp.old_runs "
        "WHERE o NOT IN (SELECT o FROM temp.diff_runs);"
        "CREATE TEMP TABLE out_n AS SELECT run_id,context_id,variant_id,created_at,status,"
        "is_default,time_ms,samples,reason,count(*) AS n,count(predicted_ms) AS np "
        "FROM main.measurements WHERE run_id IN (SELECT o FROM temp.diff_runs) "
        "GROUP BY run_id,context_id,variant_id,created_at,status,is_default,time_ms,samples,"
        "reason;"
        "CREATE INDEX temp.out_n_key ON out_n(run_id,context_id,variant_id,created_at);",
        s);
    return count("SELECT count(*) FROM temp.diff_runs") > 0;
  }

  /// The shard's measurements OUT does not hold (by the measurement key), and predictions OUT
  /// lacks on rows it has.
  void merge_measurements(const std::string& s, bool overlap, ShardMergeReport& rep) {
    const std::string skip =
        " WHERE run_id NOT IN (SELECT s FROM temp.map_run WHERE o IN (SELECT o FROM "
        "temp.same_runs))";
    const std::string numbered =
        overlap ? "(SELECT *, row_number() OVER (PARTITION BY run_id,context_id,variant_id,"
                  "created_at,status,is_default,time_ms,samples,reason ORDER BY id) AS ord "
                  "FROM S.measurements" +
                      skip + ")"
                : "(SELECT *, 1 AS ord FROM S.measurements" + skip + ")";
    const std::string key_join =
        "k.run_id=r.o AND k.context_id=c.o AND k.variant_id=v.o AND k.created_at=m.created_at "
        "AND k.status=m.status AND k.is_default=m.is_default AND k.time_ms IS m.time_ms "
        "AND k.samples=m.samples AND k.reason=m.reason";
    exec_sql(
        "INSERT INTO main.measurements(run_id,context_id,variant_id,status,reason,log,time_ms,"
        "samples,compile_ms,registers,static_smem,local_bytes,spill_bytes,occupancy,gflops,gbps,"
        "cubin_hash,grid,block,created_at,predicted_ms,is_default) "
        "SELECT r.o,c.o,v.o,m.status,m.reason,m.log,m.time_ms,m.samples,m.compile_ms,"
        "m.registers,m.static_smem,m.local_bytes,m.spill_bytes,m.occupancy,m.gflops,m.gbps,"
        "m.cubin_hash,m.grid,m.block,m.created_at,m.predicted_ms,m.is_default FROM " +
            numbered +
            " m JOIN temp.map_run r ON r.s=m.run_id JOIN temp.map_ctx c ON c.s=m.context_id "
            "JOIN temp.map_var v ON v.s=m.variant_id LEFT JOIN temp.out_n k ON " +
            key_join + " WHERE m.ord > coalesce(k.n,0) ORDER BY m.id;",
        s);
    rep.measurements_added = count("SELECT changes()");
    if (overlap)  // predictions OUT lacks on rows it has (set after the row: the default's)
      exec_sql(
          "UPDATE main.measurements AS o SET predicted_ms=p.predicted_ms FROM ("
          "SELECT r.o AS run_id,c.o AS context_id,v.o AS variant_id,m.created_at,m.status,"
          "m.time_ms,m.samples,m.reason,m.is_default,m.predicted_ms FROM S.measurements m "
          "JOIN temp.map_run r ON r.s=m.run_id JOIN temp.map_ctx c ON c.s=m.context_id "
          "JOIN temp.map_var v ON v.s=m.variant_id JOIN temp.out_n k ON " +
              key_join +
              " WHERE m.predicted_ms IS NOT NULL AND k.np<k.n) p "
              "WHERE o.predicted_ms IS NULL AND o.run_id=p.run_id AND o.context_id=p.context_id "
              "AND o.variant_id=p.variant_id AND o.created_at=p.created_at "
              "AND o.status=p.status AND o.time_ms IS p.time_ms AND o.samples=p.samples "
              "AND o.reason=p.reason AND o.is_default=p.is_default;",
          s);
  }

  /// Calibrations by their whole content, run plans by run (the larger text where two differ).
  void merge_calibrations_and_plans(const std::string& s, ShardMergeReport& rep) {
    exec_sql(
        "INSERT INTO main.model_calibrations(device_id,run_id,samples,rms_log_error,params_json,"
        "created_at) SELECT d.o,r.o,m.samples,m.rms_log_error,m.params_json,m.created_at "
        "FROM S.model_calibrations m JOIN temp.map_dev d ON d.s=m.device_id "
        "LEFT JOIN temp.map_run r ON r.s=m.run_id WHERE NOT EXISTS (SELECT 1 FROM "
        "main.model_calibrations x WHERE x.device_id=d.o AND x.run_id IS r.o "
        "AND x.samples=m.samples AND x.rms_log_error=m.rms_log_error "
        "AND x.params_json=m.params_json AND x.created_at=m.created_at) "
        "ORDER BY m.created_at, m.id;",
        s);
    rep.calibrations_added = count("SELECT changes()");
    exec_sql(
        "INSERT INTO main.run_plans(run_id,plan_json) SELECT r.o,p.plan_json FROM S.run_plans p "
        "JOIN temp.map_run r ON r.s=p.run_id WHERE true ON CONFLICT(run_id) DO UPDATE SET "
        "plan_json=excluded.plan_json WHERE excluded.plan_json>plan_json;",
        s);
    rep.plans_added = count("SELECT changes()");
  }

  std::int64_t winners_changed() const { return static_cast<std::int64_t>(changed_.size()); }

 private:
  static std::string sub(std::string sql, const std::string& s) {
    for (std::size_t at = 0; (at = sql.find("S.", at)) != std::string::npos;) {
      const bool word =
          at > 0 && (std::isalnum(static_cast<unsigned char>(sql[at - 1])) || sql[at - 1] == '_');
      if (word) {
        at += 2;
        continue;
      }
      sql.replace(at, 1, s);
      at += s.size() + 1;
    }
    return sql;
  }
  void exec_sql(const std::string& sql, const std::string& s = "main") { db_.exec(sub(sql, s)); }
  std::int64_t count(const std::string& sql) {
    Statement st(db_, sql);
    st.step();
    return st.int64(0);
  }

  /// OUT's id of the shard's measurement `id` (its key and rank among equal keys), if any.
  std::optional<std::int64_t> out_measurement(const std::string& s, std::int64_t id) {
    Statement k(db_, sub("SELECT r.o,c.o,v.o,m.created_at,m.status,m.is_default,m.time_ms,"
                         "m.samples,m.reason,(SELECT count(*) FROM S.measurements x WHERE "
                         "x.run_id=m.run_id AND x.context_id=m.context_id AND "
                         "x.variant_id=m.variant_id AND x.created_at=m.created_at AND "
                         "x.status=m.status AND x.is_default=m.is_default AND x.time_ms IS "
                         "m.time_ms AND x.samples=m.samples AND x.reason=m.reason AND x.id<=m.id) "
                         "FROM S.measurements m JOIN temp.map_run r ON r.s=m.run_id JOIN "
                         "temp.map_ctx c ON c.s=m.context_id JOIN temp.map_var v ON "
                         "v.s=m.variant_id WHERE m.id=?",
                         s));
    k.bind(1, id);
    if (!k.step()) return std::nullopt;
    Statement o(db_,
                "SELECT id FROM main.measurements WHERE run_id=? AND context_id=? AND "
                "variant_id=? AND created_at=? AND status=? AND is_default=? AND time_ms IS ? "
                "AND samples=? AND reason=? ORDER BY id LIMIT 1 OFFSET ?");
    const std::string created = k.text(3), status = k.text(4), samples = k.text(7),
                      reason = k.text(8);
    o.bind(1, k.int64(0)).bind(2, k.int64(1)).bind(3, k.int64(2)).bind(4, created);
    o.bind(5, status).bind(6, k.int64(5));
    if (k.is_null(6))
      o.bind_null(7);
    else
      o.bind(7, k.real(6));
    o.bind(8, samples).bind(9, reason).bind(10, k.int64(9) - 1);
    if (!o.step()) return std::nullopt;
    return o.int64(0);
  }

  /// The rank of OUT's measurement `id` as a winner (none: not a correct measurement).
  std::optional<Rank> rank(std::int64_t id, bool provisional) {
    Statement st(db_,
                 "SELECT m.time_ms, r.uid, v.hash, m.created_at FROM main.correct_measurements m "
                 "JOIN main.runs r ON r.id=m.run_id JOIN main.variants v ON v.id=m.variant_id "
                 "WHERE m.id=?");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    return Rank{provisional ? 1 : 0, st.real(0), st.text(1), st.text(2), st.text(3)};
  }

  void merge_winners(const std::string& s) {
    struct Offer {
      std::int64_t context, measurement;
      bool provisional;
      std::optional<std::int64_t> replaced;
    };
    std::vector<Offer> offers;
    {
      Statement w(db_, sub("SELECT c.o, w.measurement_id, w.provisional, "
                           "w.replaced_measurement_id FROM S.winners w JOIN temp.map_ctx c "
                           "ON c.s=w.context_id ORDER BY c.o",
                           s));
      while (w.step())
        offers.push_back({w.int64(0), w.int64(1), w.int64(2) != 0,
                          w.is_null(3) ? std::nullopt : std::optional<std::int64_t>(w.int64(3))});
    }
    for (const Offer& offer : offers) {
      auto m = out_measurement(s, offer.measurement);
      if (!m) continue;
      auto candidate = rank(*m, offer.provisional);
      if (!candidate) continue;  // not a correct measurement: no winner
      {
        Statement cur(db_,
                      "SELECT measurement_id, provisional FROM main.winners WHERE context_id=?");
        cur.bind(1, offer.context);
        if (cur.step()) {
          // The same measurement ranks equal unless one side names it provisional: the
          // re-measured word wins, in any order.
          auto current = rank(cur.int64(0), cur.int64(1) != 0);
          if (current && !(*candidate < *current)) continue;
        }
      }
      std::optional<std::int64_t> replaced;
      if (offer.provisional && offer.replaced) replaced = out_measurement(s, *offer.replaced);
      Statement up(db_,
                   "INSERT INTO main.winners(context_id,measurement_id,provisional,"
                   "replaced_measurement_id) VALUES(?,?,?,?) ON CONFLICT(context_id) DO UPDATE "
                   "SET measurement_id=excluded.measurement_id, provisional=excluded.provisional, "
                   "replaced_measurement_id=excluded.replaced_measurement_id, "
                   "updated_at=strftime('%Y-%m-%dT%H:%M:%fZ','now')");
      up.bind(1, offer.context).bind(2, *m).bind(3, offer.provisional ? 1 : 0).bind(4, replaced);
      up.run();
      changed_.insert(offer.context);
    }
  }

  Database& db_;
  std::set<std::int64_t> changed_;
};

/// Merges `snaps` (attached as shard0, shard1, ...) into the store in one transaction.
void merge_group(Store& store, const std::vector<Snapshot*>& snaps,
                 std::vector<ShardMergeReport*> reps, Merger& merger, const MergeOptions& options) {
  Database& db = store.db();
  std::vector<std::string> names;
  for (std::size_t i = 0; i < snaps.size(); ++i) {
    names.push_back("shard" + std::to_string(i));
    Statement a(db, "ATTACH DATABASE ? AS " + names.back());
    a.bind(1, snaps[i]->copy);
    a.run();
  }
  try {
    Transaction t(db);
    for (std::size_t i = 0; i < snaps.size(); ++i) {
      merger.merge(names[i], snaps[i]->shard, *reps[i]);
      if (options.note)
        options.note(snaps[i]->shard + ": " + std::to_string(reps[i]->measurements_added) + " of " +
                     std::to_string(reps[i]->measurements) + " measurements new, " +
                     std::to_string(reps[i]->runs_added) + " runs new");
    }
    t.commit();
  } catch (...) {
    for (const std::string& n : names) {
      try {
        db.exec("DETACH DATABASE " + n);
      } catch (const DbError&) {
      }
    }
    throw;
  }
  for (const std::string& n : names) db.exec("DETACH DATABASE " + n);
}

/// A folder removed with its files when it goes.
struct TempFolder {
  std::string path;
  ~TempFolder() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

MergeReport merge_shards(const std::string& out, const std::vector<std::string>& shards,
                         const MergeOptions& options) {
  if (shards.empty())
    throw DbError(out + ": no shard to merge. Fix: name one or more shard files after OUT");
  MergeReport report;
  std::error_code ec;
  const bool out_exists = fs::exists(out, ec);
  report.created = !out_exists;
  if (out_exists && !is_sqlite_file(out))
    throw DbError(out +
                  ": OUT is not an SQLite database; nothing was written to it. Fix: give a "
                  "gputune database or a new file name as OUT");

  // Every shard is checked and copied before OUT is opened.
  fs::path parent = fs::absolute(out).parent_path();
  std::string base = options.temp_dir.empty()
                         ? (parent / ("." + fs::path(out).filename().string() + ".merge-XXXXXX"))
                         : (fs::path(options.temp_dir) / "gputune-merge-XXXXXX");
  std::vector<char> templ(base.begin(), base.end());
  templ.push_back('\0');
  if (!mkdtemp(templ.data()))
    throw DbError(base +
                  ": cannot create the folder for the shards' copies; nothing was written "
                  "to " +
                  out + ". Fix: give a writable --temp-dir");
  TempFolder tmp{templ.data()};
  std::vector<Snapshot> snaps;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (out_exists && fs::equivalent(shards[i], out, ec)) {
      snaps.push_back({shards[i], "", Store::kSchemaVersion, true});
      continue;
    }
    snaps.push_back(snapshot(
        shards[i], (fs::path(tmp.path) / ("shard" + std::to_string(i) + ".db")).string(), out));
    if (options.note)
      options.note(shards[i] + ": a gputune database of schema " +
                   std::to_string(snaps.back().version) +
                   (snaps.back().version < Store::kSchemaVersion ? " (its copy migrated)" : ""));
  }
  for (const Snapshot& s : snaps) {
    ShardMergeReport r;
    r.path = s.shard, r.schema_version = s.version, r.skipped = s.skipped;
    r.migrated = s.version < Store::kSchemaVersion;
    report.shards.push_back(r);
  }
  std::vector<Snapshot*> todo;
  std::vector<ShardMergeReport*> reps;
  for (std::size_t i = 0; i < snaps.size(); ++i)
    if (!snaps[i].skipped) todo.push_back(&snaps[i]), reps.push_back(&report.shards[i]);

  // A new OUT is built under another name beside it and renamed at the end, so that a kill
  // leaves no OUT rather than an empty one.
  const std::string target = out_exists ? out
                                        : (parent / ("." + fs::path(out).filename().string() +
                                                     ".new-" + std::to_string(getpid())))
                                              .string();
  auto remove_target = [&] {
    for (const char* suffix : {"-wal", "-shm", ""}) fs::remove(target + suffix, ec);
  };
  if (!out_exists) remove_target();
  try {
    Store store(target);
    store.db().exec("PRAGMA cache_size=-131072");
    const int limit = std::max(1, sqlite3_limit(store.db().get(), SQLITE_LIMIT_ATTACHED, -1) - 1);
    if (static_cast<int>(todo.size()) <= limit) {
      Merger merger(store.db());
      if (!todo.empty()) merge_group(store, todo, reps, merger, options);
      report.winners_changed = merger.winners_changed();
      for (const ShardMergeReport* r : reps) report.measurements_added += r->measurements_added;
    } else {
      // Groups into a staging database first; OUT then takes it in one transaction.
      Snapshot staged{"(the shards merged)", (fs::path(tmp.path) / "staging.db").string(),
                      Store::kSchemaVersion};
      {
        Store staging(staged.copy);
        Merger merger(staging.db());
        for (std::size_t at = 0; at < todo.size(); at += static_cast<std::size_t>(limit)) {
          const auto from = static_cast<std::ptrdiff_t>(at);
          const auto to = static_cast<std::ptrdiff_t>(
              std::min(todo.size(), at + static_cast<std::size_t>(limit)));
          merge_group(staging, {todo.begin() + from, todo.begin() + to},
                      {reps.begin() + from, reps.begin() + to}, merger, options);
        }
      }
      ShardMergeReport all;
      Merger merger(store.db());
      merge_group(store, {&staged}, {&all}, merger, options);
      report.winners_changed = merger.winners_changed();
      report.measurements_added = all.measurements_added;
    }
    {
      Statement n(store.db(), "SELECT count(*) FROM measurements");
      n.step();
      report.measurements_total = n.int64(0);
    }
    // One file to rename: the new OUT leaves WAL mode until it is next opened (Store sets it).
    if (!out_exists) store.db().exec("PRAGMA journal_mode=DELETE");
  } catch (...) {
    if (!out_exists) remove_target();
    throw;
  }
  if (!out_exists) {
    fs::rename(target, out, ec);
    if (ec) {
      remove_target();
      throw DbError(out + ": cannot rename the merged database " + target + " to it (" +
                    ec.message() + "); nothing was written to " + out +
                    ". Fix: check the folder's permissions");
    }
  }
  return report;
}

}  // namespace gputune::db
