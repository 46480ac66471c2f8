// traffic_to_json / traffic_from_json (declared in pruner/traffic.h).
#include <nlohmann/json.hpp>

#include "pruner/traffic.h"

namespace gputune::pruner {

using nlohmann::json;

std::string traffic_to_json(const TrafficReport& r) {
  json accesses = json::array();
  for (const Access& a : r.accesses)
    accesses.push_back({{"line", a.line},
                        {"column", a.column},
                        {"array", a.array},
                        {"space", a.space},
                        {"kind", a.kind},
                        {"element_bytes", a.element_bytes},
                        {"analysed", a.analysed},
                        {"note", a.note},
                        {"requests", a.requests},
                        {"sectors", a.sectors},
                        {"wavefronts", a.wavefronts},
                        {"ideal", a.ideal},
                        {"bytes", a.bytes}});
  const json j = {{"parsed", r.parsed},
                  {"error", r.error},
                  {"accesses", accesses},
                  {"notes", r.notes},
                  {"unanalysed", r.unanalysed},
                  {"load_sectors", r.load_sectors},
                  {"store_sectors", r.store_sectors},
                  {"requested_bytes", r.requested_bytes},
                  {"compulsory_bytes", r.compulsory_bytes},
                  {"shared_wavefronts", r.shared_wavefronts},
                  {"shared_ideal", r.shared_ideal},
                  {"flops", r.flops},
                  {"control_instructions", r.control_instructions},
                  {"blocks", r.blocks},
                  {"warps_per_block", r.warps_per_block},
                  {"warps_simulated", r.warps_simulated}};
  return j.dump();
}

std::optional<TrafficReport> traffic_from_json(const std::string& text) {
  try {
    const json j = json::parse(text);
    TrafficReport r;
    j.at("parsed").get_to(r.parsed);
    j.at("error").get_to(r.error);
    for (const json& e : j.at("accesses")) {
      Access a;
      e.at("line").get_to(a.line);
      e.at("column").get_to(a.column);
      e.at("array").get_to(a.array);
      e.at("space").get_to(a.space);
      e.at("kind").get_to(a.kind);
      e.at("element_bytes").get_to(a.element_bytes);
      e.at("analysed").get_to(a.analysed);
      e.at("note").get_to(a.note);
      e.at("requests").get_to(a.requests);
      e.at("sectors").get_to(a.sectors);
      e.at("wavefronts").get_to(a.wavefronts);
      e.at("ideal").get_to(a.ideal);
      e.at("bytes").get_to(a.bytes);
      r.accesses.push_back(std::move(a));
    }
    j.at("notes").get_to(r.notes);
    j.at("unanalysed").get_to(r.unanalysed);
    j.at("load_sectors").get_to(r.load_sectors);
    j.at("store_sectors").get_to(r.store_sectors);
    j.at("requested_bytes").get_to(r.requested_bytes);
    j.at("compulsory_bytes").get_to(r.compulsory_bytes);
    j.at("shared_wavefronts").get_to(r.shared_wavefronts);
    j.at("shared_ideal").get_to(r.shared_ideal);
    j.at("flops").get_to(r.flops);
    j.at("control_instructions").get_to(r.control_instructions);
    j.at("blocks").get_to(r.blocks);
    j.at("warps_per_block").get_to(r.warps_per_block);
    j.at("warps_simulated").get_to(r.warps_simulated);
    return r;
  } catch (const json::exception&) {
    return std::nullopt;  // not a whole report (a null where a number was: infinite, say)
  }
}

}  // namespace gputune::pruner
