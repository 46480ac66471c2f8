/** \file db/decisions.h
 * Owns: reading what a runtime decision table is made of (select/ builds the table from it): per
 * kernel, its newest source version, the job document its winners were tuned with, and per device
 * each tuned context's problem size, input values, winner and the fastest correct time of every
 * configuration measured there.
 * Consumes: a Store. Produces: plain records.
 * Must not: choose, fit or predict anything (select/ does), or write to the database. */
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "db/store.h"

namespace gputune::db {

struct TunedContext {
  std::int64_t id = 0;
  std::string label;
  std::string problem_size_json;  ///< [4096, 4096, 1]
  std::string values_json = "{}";
  std::string winner_key;  ///< the winner's configuration key
  double best_ms = 0;      ///< the winner's time
  std::int64_t run_id = 0;
  /// The winner's run stopped before re-measuring it, or before naming any winner (then the
  /// context's fastest correct measurement stands in).
  bool provisional = false;
  /// Fastest correct time of each configuration measured in the context, over all runs.
  std::map<std::string, double> times_ms;
};

struct TunedDevice {
  std::string name, arch;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  std::vector<TunedContext> contexts;  ///< by label
};

struct TunedKernel {
  std::string name, hash;               ///< the newest version of the source (the latest winner's)
  std::string source;                   ///< the kernel's source as stored ("" when not stored)
  std::string job_document;             ///< the job the newest winner's run was started with
  std::vector<std::string> parameters;  ///< names, in the configurations' order
  std::map<std::string, std::string> params_json;  ///< config key -> {"name": value, ...}
  std::vector<TunedDevice> devices;                ///< by name
  std::size_t older_contexts = 0;  ///< contexts of older versions of the source, left out
};

/// The tuned kernels named `kernel` (a name or a kernel-hash prefix; empty: every kernel with a
/// correct measurement), each at the newest version of its source, with the latest winner per
/// device and context label (a context without a winner row: its fastest correct measurement,
/// provisional). Empty when nothing is stored.
std::vector<TunedKernel> tuned_kernels(Store& store, const std::string& kernel = {});

}  // namespace gputune::db
