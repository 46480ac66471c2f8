/** \file db/store.cpp
 * Owns: the Store's rows: kernels, devices, contexts, variants, jobs and runs, measurements and
 * plans (the schema that holds them is schema.cpp's; the winners are winners.cpp's, the model's
 * calibrations and past times model_rows.cpp's, the daemon's queue queue.cpp's).
 * Must not: decide what is measured or which configuration wins beyond "the fastest correct".
 */
#include "db/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "variants/hash.h"

namespace gputune::db {

std::string default_database_path() {
  const char* env = std::getenv("GPUTUNE_DB");
  return env && *env ? env : "gputune.db";
}

std::string random_uid() {
  std::random_device rd;
  std::ostringstream ss;
  ss << rd() << '-' << rd() << '-' << rd() << '-' << std::time(nullptr);
  return sha256_hex(ss.str()).substr(0, 32);
}

std::string DeviceRecord::uid() const {
  return sha256_hex(name + "|" + std::to_string(cc_major) + "." + std::to_string(cc_minor) + "|" +
                    std::to_string(sm_count) + "|" + std::to_string(total_mem))
      .substr(0, 32);
}

Status status_of(const std::string& text) {
  if (auto st = Status::parse(text)) return *st;
  throw DbError("a measurement has the unknown status '" + text +
                "'; the database was changed outside gputune");
}

RunStatus run_status_of(const std::string& text) {
  if (auto st = parse_run_status(text)) return *st;
  throw DbError("a run has the unknown status '" + text +
                "'; the database was changed outside gputune");
}

QueueStatus queue_status_of(const std::string& text) {
  if (auto st = parse_queue_status(text)) return *st;
  throw DbError("a queued job has the unknown status '" + text +
                "'; the database was changed outside gputune");
}

namespace {
std::int64_t upsert(Database& db, const std::string& insert, const std::string& select,
                    const std::string& key, const std::function<void(Statement&)>& bind_rest) {
  Statement ins(db, insert);
  ins.bind(1, key);
  bind_rest(ins);
  ins.run();
  Statement sel(db, select);
  sel.bind(1, key);
  if (!sel.step()) throw DbError("row for " + key + " vanished");
  return sel.int64(0);
}
}  // namespace

std::int64_t Store::upsert_device(const DeviceRecord& d) {
  std::string uid = d.uid();
  return upsert(db_,
                "INSERT INTO devices(uid,name,cc_major,cc_minor,sm_count,total_mem,source) "
                "VALUES(?,?,?,?,?,?,?) ON CONFLICT(uid) DO NOTHING",
                "SELECT id FROM devices WHERE uid=?", uid, [&](Statement& s) {
                  s.bind(2, d.name).bind(3, d.cc_major).bind(4, d.cc_minor).bind(5, d.sm_count);
                  s.bind(6, d.total_mem).bind(7, d.source);
                });
}

std::int64_t Store::upsert_kernel(const std::string& name, const std::string& hash,
                                  const std::string& source) {
  return upsert(db_,
                "INSERT INTO kernels(hash,name,source) VALUES(?,?,?) ON CONFLICT(hash) DO NOTHING",
                "SELECT id FROM kernels WHERE hash=?", hash,
                [&](Statement& s) { s.bind(2, name).bind(3, source); });
}

std::int64_t Store::upsert_job(const std::string& name, const std::string& file,
                               const std::string& document) {
  std::string hash = sha256_hex(document);
  return upsert(
      db_, "INSERT INTO jobs(hash,name,file,document) VALUES(?,?,?,?) ON CONFLICT(hash) DO NOTHING",
      "SELECT id FROM jobs WHERE hash=?", hash,
      [&](Statement& s) { s.bind(2, name).bind(3, file).bind(4, document); });
}

namespace {
// A context's identity: everything that can change its times.
std::string context_hash(const ContextRecord& c, const std::string& kernel_hash,
                         const std::string& device_uid) {
  return sha256_hex(kernel_hash + "|" + device_uid + "|" + c.problem_size_json + "|" +
                    c.values_json + "|" + c.arch + "|" + std::to_string(c.driver_version) + "|" +
                    c.toolkit_version + "|" + c.nvrtc_version);
}

std::optional<std::string> device_uid(Database& db, std::int64_t device_id) {
  Statement d(db, "SELECT uid FROM devices WHERE id=?");
  d.bind(1, device_id);
  if (!d.step()) return std::nullopt;
  return d.text(0);
}
}  // namespace

std::int64_t Store::upsert_context(ContextRecord c) {
  if (c.hash.empty()) {
    Statement k(db_, "SELECT hash FROM kernels WHERE id=?");
    k.bind(1, c.kernel_id);
    auto uid = device_uid(db_, c.device_id);
    if (!k.step() || !uid) throw DbError("context refers to an unknown kernel or device");
    c.hash = context_hash(c, k.text(0), *uid);
  }
  return upsert(
      db_,
      "INSERT INTO contexts(hash,kernel_id,device_id,label,problem_size,input_values,arch,"
      "driver_version,toolkit_version,nvrtc_version) VALUES(?,?,?,?,?,?,?,?,?,?) "
      "ON CONFLICT(hash) DO NOTHING",
      "SELECT id FROM contexts WHERE hash=?", c.hash, [&](Statement& s) {
        s.bind(2, c.kernel_id).bind(3, c.device_id).bind(4, c.label);
        s.bind(5, c.problem_size_json).bind(6, c.values_json).bind(7, c.arch);
        s.bind(8, c.driver_version).bind(9, c.toolkit_version).bind(10, c.nvrtc_version);
      });
}

std::int64_t Store::upsert_variant(std::int64_t kernel_id, const std::string& config_key,
                                   const std::string& params_json) {
  Statement k(db_, "SELECT hash FROM kernels WHERE id=?");
  k.bind(1, kernel_id);
  if (!k.step()) throw DbError("variant refers to an unknown kernel");
  std::string hash = sha256_hex(k.text(0) + "|" + config_key);
  return upsert(db_,
                "INSERT INTO variants(hash,kernel_id,config_key,params) VALUES(?,?,?,?) "
                "ON CONFLICT(hash) DO NOTHING",
                "SELECT id FROM variants WHERE hash=?", hash, [&](Statement& s) {
                  s.bind(2, kernel_id).bind(3, config_key).bind(4, params_json);
                });
}

std::int64_t Store::begin_run(std::int64_t job_id, const std::string& strategy, std::int64_t total,
                              std::optional<std::int64_t> budget, const std::string& naive_fallback,
                              const std::string& notes) {
  Statement s(db_,
              "INSERT INTO runs(uid,job_id,strategy,status,total,budget,naive_fallback,notes) "
              "VALUES(?,?,?,'running',?,?,?,?)");
  std::string uid = random_uid();
  s.bind(1, uid).bind(2, job_id).bind(3, strategy).bind(4, total);
  if (budget) s.bind(5, *budget);
  s.bind(6, naive_fallback);
  s.bind(7, notes);
  s.run();
  return db_.last_insert_rowid();
}

void Store::resume_run(std::int64_t run_id, std::int64_t total,
                       std::optional<std::int64_t> budget) {
  Statement s(db_,
              "UPDATE runs SET status='running', message='resumed', finished_at=NULL, total=?, "
              "budget=? WHERE id=?");
  s.bind(1, total);
  if (budget) s.bind(2, *budget);
  s.bind(3, run_id);
  s.run();
}

void Store::save_run_plan(std::int64_t run_id, const RunPlan& plan) {
  nlohmann::json j = {{"searched", plan.searched},
                      {"chosen", plan.chosen},
                      {"left_out", plan.left_out},
                      {"summary", plan.summary}};
  const std::string text = j.dump();
  Statement s(db_, "INSERT OR REPLACE INTO run_plans(run_id, plan_json) VALUES(?,?)");
  s.bind(1, run_id);
  s.bind(2, text);
  s.run();
}

std::optional<RunPlan> Store::run_plan(std::int64_t run_id) {
  Statement s(db_, "SELECT plan_json FROM run_plans WHERE run_id=?");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  const std::string text = s.text(0);
  try {
    const auto j = nlohmann::json::parse(text);
    RunPlan plan;
    plan.searched = j.at("searched").get<bool>();
    plan.chosen = j.at("chosen").get<std::vector<std::string>>();
    plan.left_out = j.at("left_out").get<std::vector<std::string>>();
    plan.summary = j.at("summary").get<std::string>();
    return plan;
  } catch (const nlohmann::json::exception& e) {
    throw DbError(db_.path() + ": the plan stored with run " + std::to_string(run_id) +
                  " is not readable (" + e.what() +
                  "). Fix: start a new run of the job instead of resuming this one");
  }
}

std::string Store::run_job_document(std::int64_t run_id) {
  Statement s(db_, "SELECT j.document FROM runs r JOIN jobs j ON j.id=r.job_id WHERE r.id=?");
  s.bind(1, run_id);
  return s.step() ? s.text(0) : "";
}

std::vector<std::string> Store::run_kernel_hashes(std::int64_t run_id) {
  Statement s(
      db_,
      "SELECT DISTINCT k.hash FROM measurement_counts m JOIN contexts c ON c.id=m.context_id "
      "JOIN kernels k ON k.id=c.kernel_id WHERE m.run_id=? AND m.n > 0 ORDER BY k.hash");
  s.bind(1, run_id);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

void Store::update_run_progress(std::int64_t run_id, std::int64_t done,
                                std::optional<double> seconds_spent) {
  Statement s(db_, "UPDATE runs SET done=?, seconds_spent=coalesce(?, seconds_spent) WHERE id=?");
  s.bind(1, done);
  if (seconds_spent) s.bind(2, *seconds_spent);
  s.bind(3, run_id);
  s.run();
}

void Store::set_run_seconds_spent(std::int64_t run_id, double seconds) {
  Statement s(db_, "UPDATE runs SET seconds_spent=? WHERE id=?");
  s.bind(1, seconds).bind(2, run_id);
  s.run();
}

void Store::finish_run(std::int64_t run_id, RunStatus status, const std::string& message) {
  const std::string status_text(text(status));
  Statement s(
      db_,
      "UPDATE runs SET status=?, message=?, finished_at=strftime('%Y-%m-%dT%H:%M:%fZ','now') "
      "WHERE id=?");
  s.bind(1, status_text).bind(2, message).bind(3, run_id);
  s.run();
}

std::int64_t Store::stop_run(std::int64_t run_id, RunStatus status, const std::string& message) {
  const auto measured = static_cast<std::int64_t>(measured_pairs(run_id).size());
  update_run_progress(run_id, measured);
  finish_run(run_id, status, message);
  return measured;
}

std::int64_t Store::add_measurement(const MeasurementRecord& m) {
  if (!m.status.valid())
    throw DbError(m.status == Status::kUnset ? "a measurement without a status"
                                             : "a measurement with an unknown status");
  Statement s(
      db_,
      "INSERT INTO measurements(run_id,context_id,variant_id,status,reason,log,time_ms,samples,"
      "compile_ms,registers,static_smem,local_bytes,spill_bytes,occupancy,gflops,gbps,"
      "cubin_hash,grid,block,predicted_ms,is_default) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  const std::string samples = nlohmann::json(m.samples_ms).dump(), status = m.status.str();
  s.bind(1, m.run_id).bind(2, m.context_id).bind(3, m.variant_id).bind(4, status);
  s.bind(5, m.reason).bind(6, m.log).bind(7, m.time_ms).bind(8, samples).bind(9, m.compile_ms);
  s.bind(10, m.registers).bind(11, m.static_smem).bind(12, m.local_bytes).bind(13, m.spill_bytes);
  s.bind(14, m.occupancy).bind(15, m.gflops).bind(16, m.gbps).bind(17, m.cubin_hash);
  s.bind(18, m.grid).bind(19, m.block).bind(20, m.predicted_ms).bind(21, m.is_default ? 1 : 0);
  s.run();
  return db_.last_insert_rowid();
}

void Store::set_predicted_ms(std::int64_t measurement_id, double ms) {
  Statement s(db_, "UPDATE measurements SET predicted_ms=? WHERE id=?");
  s.bind(1, ms).bind(2, measurement_id);
  s.run();
}

void Store::set_run_total(std::int64_t run_id, std::int64_t total) {
  Statement s(db_, "UPDATE runs SET total=? WHERE id=?");
  s.bind(1, total).bind(2, run_id);
  s.run();
}

bool Store::discard_run(std::int64_t run_id) {
  Transaction tx(db_);
  Statement n(db_, "SELECT count(*) FROM measurements WHERE run_id=?");
  n.bind(1, run_id);
  if (!n.step() || n.int64(0) > 0) return false;
  for (const char* sql : {"UPDATE queue SET run_id=NULL WHERE run_id=?",
                          "DELETE FROM model_calibrations WHERE run_id=?",
                          "DELETE FROM run_plans WHERE run_id=?", "DELETE FROM runs WHERE id=?"}) {
    Statement d(db_, sql);
    d.bind(1, run_id);
    d.run();
  }
  tx.commit();
  return true;
}

namespace {
RunRow read_run(Statement& s) {
  RunRow r;
  r.id = s.int64(0), r.uid = s.text(1), r.job_name = s.text(2), r.job_file = s.text(3);
  r.status = run_status_of(s.text(4)), r.message = s.text(5), r.strategy = s.text(6),
  r.started_at = s.text(7);
  r.finished_at = s.text(8), r.total = s.int64(9), r.done = s.int64(10);
  if (!s.is_null(11)) r.budget = s.int64(11);
  if (!s.is_null(12)) r.seconds_spent = s.real(12);
  r.naive_fallback = s.text(13);
  r.notes = s.text(14);
  return r;
}
const char* kRunSelect =
    "SELECT r.id, r.uid, j.name, j.file, r.status, r.message, r.strategy, r.started_at, "
    "coalesce(r.finished_at,''), r.total, r.done, r.budget, r.seconds_spent, "
    "r.naive_fallback, r.notes FROM runs r JOIN jobs j ON j.id=r.job_id ";
}  // namespace

std::optional<RunRow> Store::run(std::int64_t run_id) {
  Statement s(db_, std::string(kRunSelect) + "WHERE r.id=?");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::vector<RunRow> Store::runs_of_job(const std::string& document, std::int64_t after_run_id) {
  const std::string hash = sha256_hex(document);
  Statement s(db_, std::string(kRunSelect) + "WHERE j.hash=? AND r.id>? ORDER BY r.id");
  s.bind(1, hash).bind(2, after_run_id);
  std::vector<RunRow> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

std::optional<RunRow> Store::unchanged_run(const std::string& document, const std::string& strategy,
                                           const std::string& kernel_hash,
                                           const std::vector<ContextRecord>& contexts) {
  if (contexts.empty()) return std::nullopt;
  std::vector<std::int64_t> ids;
  for (const ContextRecord& c : contexts) {
    auto uid = device_uid(db_, c.device_id);
    if (!uid) return std::nullopt;
    Statement s(db_, "SELECT id FROM contexts WHERE hash=?");
    const std::string hash = context_hash(c, kernel_hash, *uid);
    s.bind(1, hash);
    if (!s.step()) return std::nullopt;  // never measured as it is now
    ids.push_back(s.int64(0));
  }
  const std::string job_hash = sha256_hex(document);
  Statement runs(db_, std::string(kRunSelect) +
                          "WHERE j.hash=? AND r.status='done' AND r.strategy=? ORDER BY r.id DESC");
  runs.bind(1, job_hash).bind(2, strategy);
  while (runs.step()) {
    RunRow r = read_run(runs);
    bool all = true;
    for (std::int64_t id : ids) {
      Statement m(db_, "SELECT 1 FROM measurements WHERE run_id=? AND context_id=? LIMIT 1");
      m.bind(1, r.id).bind(2, id);
      all = all && m.step();
    }
    if (all) return r;
  }
  return std::nullopt;
}

std::optional<Store::PreviousBest> Store::previous_best(std::int64_t run_id,
                                                        std::int64_t context_id) {
  // Earlier finished runs of the run's job, each with its best in a matching context (through
  // the (run, context, status, time) index), newest first.
  Statement s(db_,
              "SELECT id, best, ctx FROM (SELECT r.id AS id, c2.id AS ctx, (SELECT b.time_ms "
              "FROM run_bests b WHERE b.run_id=r.id AND b.context_id=c2.id) AS best "
              "FROM contexts c JOIN contexts c2 ON c2.device_id=c.device_id AND "
              "c2.label=c.label AND c2.problem_size=c.problem_size AND "
              "c2.input_values=c.input_values JOIN runs r ON r.job_id=(SELECT job_id FROM runs "
              "WHERE id=?1) AND r.id<?1 AND r.status='done' WHERE c.id=?2) WHERE best IS NOT "
              "NULL ORDER BY id DESC, best LIMIT 1");
  s.bind(1, run_id).bind(2, context_id);
  if (!s.step()) return std::nullopt;
  return PreviousBest{s.int64(0), s.real(1), s.int64(2)};
}

std::optional<Store::Fastest> Store::fastest_correct(std::int64_t run_id, std::int64_t context_id) {
  Statement s(db_,
              "SELECT v.config_key, v.params, b.time_ms FROM run_bests b JOIN variants v ON "
              "v.id=b.variant_id WHERE b.run_id=? AND b.context_id=?");
  s.bind(1, run_id).bind(2, context_id);
  if (!s.step()) return std::nullopt;
  return Fastest{s.text(0), s.text(1), s.real(2)};
}

std::int64_t Store::timed_pairs(std::int64_t run_id) {
  Statement s(db_,
              "SELECT count(*) FROM (SELECT DISTINCT context_id, variant_id FROM "
              "correct_measurements WHERE run_id=?)");
  s.bind(1, run_id);
  return s.step() ? s.int64(0) : 0;
}

std::vector<RunRow> Store::runs(int limit) {
  Statement s(db_, std::string(kRunSelect) + "ORDER BY r.id DESC LIMIT ?");
  s.bind(1, limit);
  std::vector<RunRow> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

std::vector<MeasurementRow> Store::measurements(std::int64_t run_id, std::int64_t context_id) {
  Statement s(
      db_,
      "SELECT m.id, m.run_id, m.context_id, m.variant_id, m.status, m.reason, m.log, m.time_ms, "
      "m.samples, m.compile_ms, m.registers, m.static_smem, m.local_bytes, m.spill_bytes, "
      "m.occupancy, m.gflops, m.gbps, m.cubin_hash, m.grid, m.block, v.config_key, v.params, "
      "c.label, m.created_at, m.predicted_ms, m.is_default FROM measurements m JOIN variants v "
      "ON v.id=m.variant_id JOIN contexts c ON c.id=m.context_id WHERE " +
          // Only the filters given, so that SQLite searches the run's (or context's) index: with
          // "?1=0 OR m.run_id=?1" it scanned every measurement (a T4 export of a 24-row run in a
          // million-row database took 130 ms; bench/results/load-*.md).
          std::string(run_id && context_id ? "m.run_id=?1 AND m.context_id=?2 "
                      : run_id             ? "m.run_id=?1 "
                      : context_id         ? "m.context_id=?2 "
                                           : "1 ") +
          "ORDER BY c.label, m.status<>'correct', m.time_ms, m.id");
  if (run_id) s.bind(1, run_id);
  if (context_id) s.bind(2, context_id);
  std::vector<MeasurementRow> out;
  auto opt_int = [&](int c) {
    return s.is_null(c) ? std::nullopt : std::optional<int>(static_cast<int>(s.int64(c)));
  };
  auto opt_real = [&](int c) {
    return s.is_null(c) ? std::nullopt : std::optional<double>(s.real(c));
  };
  while (s.step()) {
    MeasurementRow m;
    m.id = s.int64(0), m.run_id = s.int64(1), m.context_id = s.int64(2), m.variant_id = s.int64(3);
    m.status = status_of(s.text(4)), m.reason = s.text(5), m.log = s.text(6),
    m.time_ms = opt_real(7);
    m.samples_ms = nlohmann::json::parse(s.text(8)).get<std::vector<double>>();
    m.compile_ms = opt_real(9), m.registers = opt_int(10), m.static_smem = opt_int(11);
    m.local_bytes = opt_int(12), m.spill_bytes = opt_int(13), m.occupancy = opt_real(14);
    m.gflops = opt_real(15), m.gbps = opt_real(16), m.cubin_hash = s.text(17), m.grid = s.text(18);
    m.block = s.text(19), m.config_key = s.text(20), m.params_json = s.text(21);
    m.context_label = s.text(22), m.created_at = s.text(23), m.predicted_ms = opt_real(24);
    m.is_default = s.int64(25) != 0;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Store::ContextRow> Store::contexts(const std::string& kernel) {
  Statement s(db_,
              "SELECT c.id, c.label, d.name, c.problem_size, c.arch, k.name FROM contexts c "
              "JOIN kernels k ON k.id=c.kernel_id JOIN devices d ON d.id=c.device_id "
              "WHERE k.name=?1 OR k.hash LIKE ?1 || '%' ORDER BY c.id");
  s.bind(1, kernel);
  std::vector<ContextRow> out;
  while (s.step())
    out.push_back({s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)});
  return out;
}

std::optional<Store::ContextRow> Store::context(std::int64_t context_id) {
  Statement s(db_,
              "SELECT c.id, c.label, d.name, c.problem_size, c.arch, k.name FROM contexts c "
              "JOIN kernels k ON k.id=c.kernel_id JOIN devices d ON d.id=c.device_id "
              "WHERE c.id=?1");
  s.bind(1, context_id);
  if (!s.step()) return std::nullopt;
  return ContextRow{s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)};
}

std::vector<std::vector<std::string>> Store::parameter_orders(const std::string& kernel) {
  // Any one variant of each kernel version: every variant of a version has the same parameters.
  Statement s(db_,
              "SELECT (SELECT v.params FROM variants v WHERE v.kernel_id=k.id LIMIT 1) AS p "
              "FROM kernels k WHERE k.name=?1 AND p IS NOT NULL ORDER BY k.id DESC");
  s.bind(1, kernel);
  std::vector<std::vector<std::string>> out;
  while (s.step()) {
    const auto params = nlohmann::ordered_json::parse(s.text(0), nullptr, false);
    if (!params.is_object()) continue;
    std::vector<std::string> names;
    for (const auto& [name, value] : params.items()) names.push_back(name);
    if (std::find(out.begin(), out.end(), names) == out.end()) out.push_back(std::move(names));
  }
  return out;
}

std::vector<DeviceRecord> Store::devices(std::int64_t run_id) {
  Statement s(db_,
              "SELECT DISTINCT d.name, d.cc_major, d.cc_minor, d.sm_count, d.total_mem, d.source "
              "FROM devices d "
              // the run's contexts from its per-context counts, not from its measurements
              "WHERE ?1=0 OR d.id IN (SELECT c.device_id FROM measurement_counts n JOIN contexts "
              "c ON c.id=n.context_id WHERE n.run_id=?1 AND n.n>0) ORDER BY d.id");
  s.bind(1, run_id);
  std::vector<DeviceRecord> out;
  while (s.step()) {
    DeviceRecord d;
    d.name = s.text(0), d.cc_major = static_cast<int>(s.int64(1)),
    d.cc_minor = static_cast<int>(s.int64(2));
    d.sm_count = static_cast<int>(s.int64(3)), d.total_mem = s.int64(4), d.source = s.text(5);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> Store::measured_pairs(std::int64_t run_id) {
  Statement s(db_,
              "SELECT DISTINCT context_id, variant_id FROM measurements WHERE run_id=? "
              "AND reason NOT LIKE 're-measurement%'");
  s.bind(1, run_id);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  while (s.step()) out.emplace_back(s.int64(0), s.int64(1));
  return out;
}

}  // namespace gputune::db
