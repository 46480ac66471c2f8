/** \file tuner/run/measurement_row.h
 * Owns: building the stored measurement row, in one place: from a candidate and its trial in a
 * context (`run`'s outcomes, the rows `prune` stores for its decisions), or from its keys alone
 * (what the daemon's supervisor knows of a variant that crashed its worker). HangWatch stores the
 * row `run` built before launching, with its status set to timeout.
 * Consumes: Candidate, Trial, Outcome. Produces: db::MeasurementRecord (the caller stores it).
 * Must not: write SQL or launch anything. */
#pragma once

#include <cstdint>
#include <string>

#include "db/store.h"
#include "tuner/compile/candidate.h"

namespace gputune::tuner {

struct Outcome;  // tuner/measure/measure.h

struct RowKeys {
  std::int64_t run_id = 0, context_id = 0, variant_id = 0;
};

/// The row of a variant known by its keys alone.
db::MeasurementRecord measurement_row(const RowKeys& keys, db::Status status,
                                      const std::string& reason);

/// A candidate's row in a context, status and reason unset: its compile time and cubin hash;
/// with its resources read, registers, shared memory, spills and occupancy; with a launch, its
/// grid and block; the model's prediction (the real one once compiled, else the best case); and
/// whether it is the job's default.
db::MeasurementRecord measurement_row(const RowKeys& keys, const Candidate& c, const Trial& t);

/// The outcome of a launch: status, reason, samples, and when correct its time and the work
/// rates (GFLOP/s, GB/s) the job's Work gives.
void set_outcome(db::MeasurementRecord& row, const Outcome& o, const Trial& t);

/// A row that failed without an outcome (its measurement hung, or lost the CUDA context): the
/// status and reason set, no samples, time or rates. A reason the row carried already is its role
/// (what launched it: "re-measurement of a top-3 variant", "regret sample (...)") and is kept
/// before the failure's, so that a resume knows which stage the row belongs to.
void set_failed(db::MeasurementRecord& row, db::Status status, const std::string& reason);

/// Why a candidate cannot be launched in this context (it did not compile, its cubin could not be
/// read, it has no launch geometry): the row's status and reason are set and true returned.
bool set_unlaunchable(db::MeasurementRecord& row, const Candidate& c, const Trial& t);

}  // namespace gputune::tuner
