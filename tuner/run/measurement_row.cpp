#include "tuner/run/measurement_row.h"

#include "tuner/measure/measure.h"

namespace gputune::tuner {

namespace {

std::string dims(const std::array<std::int64_t, 3>& d) {
  return std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
}

}  // namespace

db::MeasurementRecord measurement_row(const RowKeys& keys, db::Status status,
                                      const std::string& reason) {
  db::MeasurementRecord m;
  m.run_id = keys.run_id, m.context_id = keys.context_id, m.variant_id = keys.variant_id;
  m.status = status, m.reason = reason;
  return m;
}

db::MeasurementRecord measurement_row(const RowKeys& keys, const Candidate& c, const Trial& t) {
  db::MeasurementRecord m = measurement_row(keys, db::Status::kUnset, "");
  if (c.state == Candidate::Compile::kDone) {
    m.compile_ms = c.compiled.compile_ms;
    m.cubin_hash = c.compiled.cubin_hash;
  }
  if (c.state == Candidate::Compile::kDone && c.inspected.ok) {
    const auto& r = c.inspected.res;
    m.registers = r.registers, m.static_smem = r.static_smem, m.local_bytes = r.local_bytes;
    if (r.spill_stores >= 0) m.spill_bytes = r.spill_stores + r.spill_loads;
    if (t.launch) m.occupancy = t.occupancy.occupancy;
  }
  if (t.launch) m.grid = dims(t.launch->geometry.grid), m.block = dims(t.launch->geometry.block);
  if (t.prediction.ok)
    m.predicted_ms = t.prediction.ms;
  else if (t.best_case_ms)
    m.predicted_ms = *t.best_case_ms;
  m.is_default = c.is_default;
  return m;
}

void set_outcome(db::MeasurementRecord& m, const Outcome& o, const Trial& t) {
  m.status = o.status, m.reason = o.reason, m.samples_ms = o.samples_ms;
  if (o.status != db::Status::kCorrect) return;
  m.time_ms = o.median_ms;
  if (t.launch && t.launch->flops) m.gflops = *t.launch->flops / (o.median_ms * 1e-3) / 1e9;
  if (t.launch && t.launch->bytes) m.gbps = *t.launch->bytes / (o.median_ms * 1e-3) / 1e9;
}

void set_failed(db::MeasurementRecord& row, db::Status status, const std::string& reason) {
  row.status = status, row.reason = row.reason.empty() ? reason : row.reason + ": " + reason;
  row.samples_ms.clear(), row.time_ms.reset(), row.gflops.reset(), row.gbps.reset();
}

bool set_unlaunchable(db::MeasurementRecord& m, const Candidate& c, const Trial& t) {
  if (c.state == Candidate::Compile::kDone && !c.compiled.ok) {
    m.status = db::Status::kCompile, m.reason = "NVRTC compile failed", m.log = c.compiled.log;
    return true;
  }
  if (c.state == Candidate::Compile::kDone && !c.inspected.ok) {
    m.status = db::Status::kCompile, m.reason = c.inspected.reason;
    return true;
  }
  if (!t.geometry_error.empty()) {
    m.status = db::Status::kConstraints, m.reason = t.geometry_error;
    return true;
  }
  return false;
}

}  // namespace gputune::tuner
