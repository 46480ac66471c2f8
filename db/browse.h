/** \file db/browse.h
 * Owns: the read-only queries behind the HTTP API and dashboard, returning JSON: devices, kernels,
 * a kernel's contexts x devices with winners and speedups, runs with progress,
 * paged/sorted/filtered measurements, best-so-far series, parameter effects, predicted-vs-measured
 * pairs, winners, a context's history across runs, and the queue. Consumes: a Store. Produces:
 * nlohmann::json values (plain data; web/ renders them). Must not: write to the database, know
 * about HTTP, or know about CUDA. */
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "db/store.h"

namespace gputune::db {

/// Thrown for a query parameter out of range; web/ turns it into a 400 naming `field`.
class QueryError : public std::runtime_error {
 public:
  QueryError(std::string field_, const std::string& what)
      : std::runtime_error(what), field(std::move(field_)) {}
  std::string field;
};

struct MeasurementQuery {
  std::int64_t run_id = 0;
  std::int64_t context_id = 0;   ///< 0: all contexts
  std::string status;            ///< empty: any
  std::string search;            ///< substring of the configuration key
  std::string sort = "time_ms";  ///< time_ms, registers, occupancy, compile_ms, status, id
  bool descending = false;
  int limit = 50;  ///< 1..1000
  std::int64_t offset = 0;
};

/// The command that writes the source of a configuration of a stored job (its document, its file
/// and the configuration's key), when that source is not the kernel file's: a naive kernel's
/// generated variant. The tuner knows how (tuner::generate_command); db/ only asks.
using SourceCommand = std::function<std::optional<std::string>(
    const std::string& job_document, const std::string& job_file, const std::string& config_key)>;

class Browser {
 public:
  explicit Browser(Store& store, SourceCommand source_command = {})
      : s_(store), source_command_(std::move(source_command)) {}

  nlohmann::json devices();
  nlohmann::json kernels();
  /// Kernel by id: its contexts x devices, each with the winner, its time, the speedup over the
  /// default configuration, and for a naive kernel how to have the winner's source
  /// (`source_command`, from the SourceCommand given) or why it was tuned as written
  /// (`naive_fallback`). nullopt when unknown.
  std::optional<nlohmann::json> kernel(std::int64_t id);
  nlohmann::json runs(int limit, std::int64_t offset);
  std::optional<nlohmann::json> run(std::int64_t id);
  nlohmann::json measurements(const MeasurementQuery& q);
  /// Best correct time so far, in the order measurements were stored.
  nlohmann::json best_over_time(std::int64_t run_id);
  /// For each parameter and value: count, best and median time of the correct measurements.
  nlohmann::json parameter_effects(std::int64_t run_id, std::int64_t context_id = 0);
  /// (predicted_ms, time_ms) of the correct measurements that have a prediction (an even sample
  /// of about 2,000 for large runs).
  nlohmann::json predicted_vs_measured(std::int64_t run_id);
  nlohmann::json winners(int limit);
  /// Winning time per run for the context's kernel, device and label (nightly regressions).
  std::optional<nlohmann::json> context_history(std::int64_t context_id);
  nlohmann::json queue(int limit);
  /// Changes whenever a measurement is added to the run (for caching derived results).
  std::int64_t run_version(std::int64_t run_id);
  /// Changes whenever a measurement is added to any run (for caching what spans runs, such as a
  /// context's history).
  std::int64_t measurements_version();

 private:
  Store& s_;
  SourceCommand source_command_;
};

/// A queue item as JSON (without the document and kernel source).
nlohmann::json queue_item_json(const QueueItem& q);

}  // namespace gputune::db
