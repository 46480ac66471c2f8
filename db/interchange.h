/** \file db/interchange.h
 * Owns: moving measurements between the database and community file formats: importing Kernel
 * Tuner cache files (.json or .json.gz) as measurements of their device, and exporting T4 results
 * (with metadata) from the database.
 * Must not: know about CUDA; all SQL stays in store.cpp. */
#pragma once

#include <cstdint>
#include <string>

#include "db/store.h"

namespace gputune::db {

struct ImportSummary {
  std::int64_t run_id = 0;
  std::int64_t measurements = 0, correct = 0, failed = 0;
  std::string kernel, device, context;
  double best_ms = 0;
  std::string best_key;
};

/// Reads a whole file, gunzipping when it is gzip-compressed. Throws std::runtime_error naming it.
std::string read_maybe_gzip(const std::string& path);

/// Imports a Kernel Tuner cache file (keys: device_name, kernel_name, problem_size,
/// tune_params_keys, cache). All-or-nothing: one transaction. Throws std::runtime_error naming the
/// file and the field for malformed input.
ImportSummary import_kernel_tuner_cache(Store& store, const std::string& path);

/// T4 document (schema_version, metadata, results) of a run's timed measurements (all runs when
/// run_id is 0). Variants compiled but never timed are left out.
std::string export_t4(Store& store, std::int64_t run_id);

}  // namespace gputune::db
