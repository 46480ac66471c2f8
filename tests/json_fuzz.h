// Random structural changes to JSON documents, for the tests that feed every reader of user files
// (jobs, measurement files) malformed input: it must be refused with an error naming the file,
// never crash or escape as another exception.
#pragma once

#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

namespace gputune::test {

using nlohmann::json;

// One random change to a JSON document: a value replaced by one of another kind or at an edge, a
// key removed, an array emptied or grown. Walks to a uniformly chosen node first.
inline void mutate_json(json& doc, std::mt19937& rng) {
  std::vector<json*> nodes;
  std::vector<json*> todo{&doc};
  while (!todo.empty()) {
    json* n = todo.back();
    todo.pop_back();
    nodes.push_back(n);
    if (n->is_structured())
      for (auto& child : *n) todo.push_back(&child);
  }
  json& target = *nodes[rng() % nodes.size()];
  static const std::vector<json> replacements = {nullptr,
                                                 true,
                                                 0,
                                                 -1,
                                                 1,
                                                 7,
                                                 1e300,
                                                 -1e-300,
                                                 9223372036854775807LL,
                                                 "",
                                                 "x",
                                                 "[",
                                                 "ProblemSize[0]",
                                                 "1/0",
                                                 "2**64",
                                                 "range(10**9)",
                                                 "[0]",
                                                 json::array(),
                                                 json::object(),
                                                 json::array({nullptr}),
                                                 json::array({"1", 2}),
                                                 json{{"X", "0"}},
                                                 "0x",
                                                 "-1",
                                                 "1e400"};
  switch (rng() % 4) {
    case 0:
      if (target.is_object() && !target.empty()) {
        auto it = target.begin();
        std::advance(it, rng() % target.size());
        target.erase(it);
        return;
      }
      [[fallthrough]];
    case 1:
      if (target.is_array() && !target.empty()) {
        if (rng() % 2)
          target.push_back(target[rng() % target.size()]);
        else
          target.erase(target.begin() + static_cast<long>(rng() % target.size()));
        return;
      }
      [[fallthrough]];
    default:
      target = replacements[rng() % replacements.size()];
  }
}

}  // namespace gputune::test
