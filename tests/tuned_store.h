// Test fixtures that store tuned results of the vector_add example directly (no run): a context
// of a device, and a correct measurement offered as the context's winner.
#pragma once

#include <cstdint>
#include <string>

#include "db/store.h"

namespace gputune::test {

/// A context `label` of problem size [size, 1, 1] for `kernel` on a device of compute capability
/// `cc` (architecture sm_<cc>0).
inline std::int64_t vector_add_context(db::Store& store, std::int64_t kernel,
                                       const std::string& device, int cc, int sm_count,
                                       const std::string& label, long size) {
  db::DeviceRecord d;
  d.name = device, d.cc_major = cc, d.sm_count = sm_count;
  db::ContextRecord c;
  c.kernel_id = kernel, c.device_id = store.upsert_device(d), c.label = label;
  c.problem_size_json = "[" + std::to_string(size) + ", 1, 1]";
  c.arch = "sm_" + std::to_string(cc) + "0", c.toolkit_version = "13.0";
  return store.upsert_context(c);
}

/// vector_add's configuration (block_size_x, tile_size_x) measured correct at `ms` in `context`
/// by `run`, and offered as the context's winner.
inline void vector_add_measurement(db::Store& store, std::int64_t run, std::int64_t kernel,
                                   std::int64_t context, int block, int tile, double ms) {
  db::MeasurementRecord m;
  m.run_id = run, m.context_id = context;
  m.variant_id = store.upsert_variant(kernel, std::to_string(block) + "," + std::to_string(tile),
                                      R"({"block_size_x": )" + std::to_string(block) +
                                          R"(, "tile_size_x": )" + std::to_string(tile) + "}");
  m.status = db::Status::kCorrect, m.time_ms = ms, m.samples_ms = {ms};
  store.offer_winner(context, store.add_measurement(m));
}

}  // namespace gputune::test
