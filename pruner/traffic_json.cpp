// traffic_to_json / traffic_from_json (declared in pruner/traffic.h). Each struct's fields are
// listed once, for both directions; reading requires every field (json::at).
#include <nlohmann/json.hpp>

#include "pruner/traffic.h"

namespace gputune::pruner {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Access, line, column, array, space, kind, element_bytes,
                                   analysed, note, requests, sectors, wavefronts, ideal, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrafficReport, parsed, error, accesses, notes, unanalysed,
                                   load_sectors, store_sectors, requested_bytes, compulsory_bytes,
                                   compulsory_load_bytes, load_rounds, shared_wavefronts,
                                   shared_ideal, flops, control_instructions,
                                   conversion_instructions, blocks, warps_per_block,
                                   warps_simulated)

std::string traffic_to_json(const TrafficReport& r) { return nlohmann::json(r).dump(); }

std::optional<TrafficReport> traffic_from_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<TrafficReport>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // not a whole report (a null where a number was: infinite, say)
  }
}

}  // namespace gputune::pruner
