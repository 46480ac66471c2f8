/** \file select/wisdom.cpp
 * Owns: writing a DecisionTable as Kernel Launcher wisdom files (wisdom.h): the header line, and
 * per device and tuned context its fastest measured candidates as records.
 * Must not: write files or read a database. */
#include "select/wisdom.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace gputune::select {

using ordered = nlohmann::ordered_json;

std::string wisdom_file_name(const std::string& key) {
  std::string out = key;
  for (char& c : out) {
    const bool valid = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == '-' || c == '.';
    if (!valid) c = '_';
  }
  return out + ".wisdom";
}

int compute_capability(const std::string& arch) {
  size_t at = arch.find('_');
  if (at == std::string::npos || at + 1 >= arch.size()) return 0;
  int cc = 0;
  for (size_t i = at + 1; i < arch.size(); ++i) {
    if (arch[i] < '0' || arch[i] > '9') break;  // sm_90a: 90
    cc = cc * 10 + (arch[i] - '0');
    if (cc > 100000) return 0;
  }
  return cc;
}

namespace {

WisdomFile kernel_wisdom(const KernelTable& k, const WisdomOptions& o) {
  WisdomFile f;
  f.kernel = k.name, f.file_name = wisdom_file_name(k.name);
  // The header: the key order of Kernel Launcher's own writer (_create_header).
  ordered header;
  header["version"] = kWisdomVersion;
  header["objective"] = kWisdomObjective;
  header["tunable_parameters"] = k.parameters;
  header["key"] = k.name;
  f.text = header.dump() + "\n";
  const size_t dims = static_cast<size_t>(k.dims());
  bool said_values = false;
  for (const DeviceTable& d : k.devices) {
    for (const TunedInput& in : d.inputs) {
      ordered size = ordered::array();
      bool too_large = false;
      for (size_t i = 0; i < dims && i < in.size.size(); ++i) {
        too_large = too_large || in.size[i] > std::numeric_limits<std::uint32_t>::max();
        size.push_back(in.size[i]);
      }
      if (too_large) {
        f.notes.push_back("context " + in.label + " on " + d.name + ": a problem size beyond " +
                          "2^32-1, which Kernel Launcher's ProblemSize (uint32) cannot hold; " +
                          "left out");
        continue;
      }
      if (!in.values.empty() && !said_values) {
        said_values = true;
        f.notes.push_back("context " + in.label + " on " + d.name +
                          " has input values besides its problem size; Kernel Launcher keys "
                          "records by device and problem size only (the values are kept in "
                          "each record's environment as gputune_values)");
      }
      ordered env;
      if (!o.date.empty()) env["date"] = o.date;
      env["device_name"] = d.name;
      if (const int cc = compute_capability(d.arch)) env["compute_capability"] = cc;
      env["gputune_context"] = in.label;
      if (!k.hash.empty()) env["gputune_kernel_hash"] = k.hash;
      if (!in.values.empty()) env["gputune_values"] = in.values;
      // The context's fastest candidates, the winner first (it is the fastest measured).
      std::vector<std::pair<double, std::string>> by_time;
      for (const auto& [key, ms] : in.times_ms)
        if (k.configs.count(key)) by_time.emplace_back(ms, key);
      if (by_time.empty() && k.configs.count(in.winner))
        by_time.emplace_back(in.best_ms, in.winner);
      std::sort(by_time.begin(), by_time.end());
      for (size_t i = 0; i < by_time.size() && static_cast<int>(i) < o.max_results; ++i) {
        const ordered& params = k.configs.at(by_time[i].second);
        ordered config = ordered::array();
        for (const std::string& p : k.parameters) {
          if (!params.contains(p))
            throw std::invalid_argument("kernel '" + k.name + "': configuration " +
                                        by_time[i].second + " has no value for parameter '" + p +
                                        "'. Fix: export from a database whose runs of this "
                                        "source all tuned the same parameters.");
          config.push_back(params[p]);
        }
        ordered record;
        record["config"] = std::move(config);
        record["problem_size"] = size;
        record["time"] = by_time[i].first;
        record["environment"] = env;
        f.text += record.dump() + "\n";
        ++f.records;
      }
    }
  }
  return f;
}

}  // namespace

std::vector<WisdomFile> to_wisdom(const DecisionTable& table, const WisdomOptions& options) {
  std::vector<WisdomFile> out;
  for (const KernelTable& k : table.kernels) out.push_back(kernel_wisdom(k, options));
  return out;
}

}  // namespace gputune::select
