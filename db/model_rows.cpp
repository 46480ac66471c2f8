/** \file db/model_rows.cpp
 * Owns: what the performance model keeps in the database and reads back: its calibrations per
 * device, and the past times (verified, and with a prediction) of a kernel's measurements that it
 * learns from, found by the indexes that keep them fast on large databases.
 * Must not: fit or predict (tuner/model/ does).
 */
#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "db/store.h"

namespace gputune::db {

std::int64_t Store::save_calibration(std::int64_t device_id, std::optional<std::int64_t> run_id,
                                     int samples, double rms_log_error,
                                     const std::string& params_json) {
  Statement s(db_,
              "INSERT INTO model_calibrations(device_id, run_id, samples, rms_log_error, "
              "params_json) VALUES(?,?,?,?,?)");
  s.bind(1, device_id).bind(2, run_id).bind(3, samples).bind(4, rms_log_error).bind(5, params_json);
  s.step();
  return db_.last_insert_rowid();
}

std::optional<Store::NamedCalibration> Store::latest_calibration_named(
    const std::vector<std::string>& names, int cc_major, int cc_minor, int sm_count) {
  if (names.empty()) return std::nullopt;
  std::string in;
  for (size_t i = 0; i < names.size(); ++i) in += i ? ",lower(?)" : "lower(?)";
  Statement s(
      db_,
      "SELECT c.params_json, d.name, d.id FROM model_calibrations c JOIN devices d ON "
      "d.id = c.device_id WHERE lower(d.name) IN (" +
          in +
          ") AND d.cc_major=? AND d.cc_minor=? AND d.sm_count=? ORDER BY c.created_at DESC, "
          "c.id DESC LIMIT 1");
  int k = 1;
  for (const std::string& n : names) s.bind(k++, n);
  s.bind(k, cc_major).bind(k + 1, cc_minor).bind(k + 2, sm_count);
  if (!s.step()) return std::nullopt;
  return NamedCalibration{s.text(0), s.text(1), s.int64(2)};
}

// The newest by created_at, then id: a merged database (db/merge.h) holds other machines'
// calibrations in the order they were merged, not fitted.
std::optional<std::string> Store::latest_calibration(std::int64_t device_id) {
  Statement s(db_,
              "SELECT params_json FROM model_calibrations WHERE device_id=? ORDER BY created_at "
              "DESC, id DESC LIMIT 1");
  s.bind(1, device_id);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

std::vector<Store::PredictedTime> Store::predicted_times(std::int64_t device_id,
                                                         const std::string& kernel,
                                                         std::int64_t skip_run,
                                                         std::int64_t skip_context, int limit) {
  return past_times(device_id, kernel, skip_run, skip_context, limit, true);
}

std::vector<Store::PredictedTime> Store::verified_times(std::int64_t device_id,
                                                        const std::string& kernel,
                                                        std::int64_t skip_run,
                                                        std::int64_t skip_context, int limit) {
  return past_times(device_id, kernel, skip_run, skip_context, limit, false);
}

std::vector<Store::PredictedTime> Store::past_times(std::int64_t device_id,
                                                    const std::string& kernel,
                                                    std::int64_t skip_run,
                                                    std::int64_t skip_context, int limit,
                                                    bool with_prediction) {
  // Re-measurements repeat a time already counted (the winner's check), so they are left out.
  const std::string filter =
      std::string("m.status = 'correct' AND m.time_ms > 0 AND ") +
      (with_prediction ? "m.predicted_ms > 0 AND " : "") +
      "m.reason NOT LIKE 're-measurement%' AND NOT (m.run_id = ? AND m.context_id = ?)";
  // Whether a row is an import's (predicted_times has none: an import has no predictions).
  const std::string columns =
      "SELECT m.run_id, m.context_id, v.params, m.time_ms, coalesce(m.predicted_ms, 0), " +
      std::string(with_prediction ? "0"
                                  : "(SELECT d.source = 'import' FROM contexts c JOIN devices d ON "
                                    "d.id = c.device_id WHERE c.id = m.context_id)") +
      " FROM measurements m ";
  // The kernel's contexts on the device; without a prediction, also those of imported Kernel
  // Tuner caches of a device of the same name (an import has no predictions).
  const std::string kernel_contexts =
      "SELECT c.id FROM contexts c JOIN kernels k ON k.id = c.kernel_id WHERE k.name = ?2 AND "
      "(c.device_id = ?1" +
      std::string(with_prediction
                      ? ")"
                      : " OR c.device_id IN (SELECT i.id FROM devices i JOIN devices d ON d.id = "
                        "?1 WHERE i.source = 'import' AND i.name = d.name COLLATE NOCASE))");
  // How the rows are found depends on how many the kernel has on the device, counted on the
  // (context, status) index up to a bound. Few (a kernel's first runs in a large database): from
  // its contexts, then sorted (walking all measurements newest first to find none took 183 ms on
  // 1M rows). Many: newest first, which stops after `limit` (sorting all 1.2M of a kernel took
  // 4.3 s). bench/results/predicted-times-vm-2026-11-25.md.
  constexpr std::int64_t kFromContexts = 20000;
  Statement count(db_,
                  "SELECT count(*) FROM (SELECT 1 FROM measurements m INDEXED BY "
                  "measurements_context WHERE m.context_id IN (" +
                      kernel_contexts + ") AND m.status = 'correct' LIMIT ?)");
  count.bind(1, device_id).bind(2, kernel).bind(3, kFromContexts + 1);
  const std::int64_t rows = count.step() ? count.int64(0) : 0;
  if (rows == 0) return {};
  const bool few = rows <= kFromContexts;
  Statement s(db_, columns + (few ? "INDEXED BY measurements_context " : "NOT INDEXED ") +
                       "JOIN variants v ON v.id = m.variant_id WHERE m.context_id IN (" +
                       kernel_contexts + ") AND " + filter + " ORDER BY m.id DESC LIMIT ?");
  s.bind(1, device_id).bind(2, kernel).bind(3, skip_run).bind(4, skip_context).bind(5, limit);
  std::vector<PredictedTime> out;
  while (s.step())
    out.push_back({s.int64(0), s.int64(1), s.text(2), s.real(3), s.real(4), s.int64(5) != 0});
  return out;
}

}  // namespace gputune::db
