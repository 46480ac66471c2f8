/** \file select/runtime_header.cpp
 * Owns: writing one kernel's decision table as a self-contained C++17 header (runtime_header.h):
 * the constants (configurations, devices, tuned contexts, trees, leave-one-out figures) and the
 * choose() that applies select.cpp's rules to them.
 * Must not: read a database or write files; the rules here must stay those of select.cpp
 * (tests/select/runtime_header_test.cpp compiles the header and compares every answer). */
#include "select/runtime_header.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace gputune::select {

std::string runtime_namespace(const std::string& kernel) {
  std::string out;
  for (char c : kernel) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (ok || c == '_')
      out += c;
    else if (out.empty() || out.back() != '_')
      out += '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "_" + out;
  return out;
}

namespace {

/// A C string literal: printable ASCII as is, the rest (and " \ ?) as 3-digit octal escapes.
std::string lit(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

/// Text for a // comment: no line breaks, no non-ASCII surprises.
std::string comment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out;
}

std::string dbl(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v))
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "-std::numeric_limits<double>::infinity()";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string value_text(const nlohmann::ordered_json& v) {  // as select.cpp gives it
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string loo(const LooFigures& f) {
  return "{" + std::to_string(f.contexts) + ", " + std::to_string(f.unknown) + ", " +
         dbl(f.median) + ", " + dbl(f.worst) + ", " + dbl(f.mean) + "}";
}

// The part every generated header shares, defined once per translation unit.
constexpr const char* kCommon = R"GT(#ifndef GPUTUNE_TUNED_RUNTIME_V1
#define GPUTUNE_TUNED_RUNTIME_V1
namespace gputune_tuned {
/// How an answer was obtained (select::How).
enum class How { kMeasured, kNearest, kLearned };
inline const char* to_string(How h) {
  return h == How::kMeasured ? "measured" : h == How::kNearest ? "nearest" : "learned";
}
struct Param {
  const char* name;
  const char* value;  ///< as the compiler gets it (-Dname=value)
};
/// Selected time over the true winner's, leave-one-out over the device's contexts.
struct LooFigures {
  int contexts, unknown;
  double median, worst, mean;
};
struct Choice {
  bool ok = false;
  std::string error;        ///< when !ok: what is missing and the fix
  const char* device = "";  ///< the device whose contexts answered (may differ from the one asked)
  How how = How::kMeasured;
  const char* config = "";  ///< configuration key
  std::vector<Param> params;
  std::vector<std::string> from;  ///< labels of the contexts the answer came from
  bool has_measured = false;
  double measured_ms = 0;  ///< kMeasured: the winner's time
  bool has_expected = false;
  LooFigures expected{};  ///< how far from the best this way was (has_expected)
};
namespace detail {
struct Node {
  int config, dim;
  double split;
  int lo, hi;  ///< -1: a leaf naming `config`
};
struct Input {
  const char* label;
  int size_len;
  long long size[GPUTUNE_TUNED_MAX_SLOTS];
  int config;
  double best_ms;
};
struct Device {
  const char* name;
  const char* arch;
  int first_input, input_count;
  bool learned;
  int tree;  ///< root node, -1: none
  bool has_loo;
  LooFigures nearest, learned_loo;
};
inline char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
inline bool same_name(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b)
    if (lower(*a) != lower(*b)) return false;
  return *a == *b;
}
inline double log2_size(long long s) { return std::log2(static_cast<double>(s < 1 ? 1 : s)); }
/// Squared distance in log2 space, each size padded to 3 (select::log_distance).
inline double log_distance(const long long* a, int na, const long long* b, int nb) {
  const int n = std::max(std::max(na, nb), 3);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double d = (i < na ? log2_size(a[i]) : 0.0) - (i < nb ? log2_size(b[i]) : 0.0);
    sum += d * d;
  }
  return sum;
}
inline double work(const long long* s, int n) {
  double w = 1;
  for (int i = 0; i < n; ++i) w *= static_cast<double>(s[i] < 1 ? 1 : s[i]);
  return w;
}
}  // namespace detail
}  // namespace gputune_tuned
#endif  // GPUTUNE_TUNED_RUNTIME_V1
)GT";

// choose(), the same for every kernel: it reads the constants of its namespace.
constexpr const char* kChoose = R"GT(
/// The configuration for the input `size[0..dims)` on `device` (its name as the driver gives it)
/// of architecture `arch` ("sm_90"; "" or null: only a device of that name matches). `values`:
/// the job's other input values in kValueNames order (needed only where contexts have them).
inline Choice choose(const char* device, const char* arch, const long long* size, int dims,
                     const double* values = nullptr, int value_count = 0) {
  using namespace detail;
  Choice c;
  const std::string asked = device ? device : "", asked_arch = arch ? arch : "";
  const int devices = static_cast<int>(sizeof kDevices / sizeof kDevices[0]);
  int dev = -1;
  bool same_arch = false;
  for (int d = 0; d < devices; ++d)
    if (same_name(kDevices[d].name, asked.c_str())) dev = d;
  if (dev < 0 && !asked_arch.empty())
    for (int d = 0; d < devices; ++d)
      if (asked_arch == kDevices[d].arch &&
          (dev < 0 || kDevices[d].input_count > kDevices[dev].input_count))
        dev = d, same_arch = true;
  if (dev < 0 || kDevices[dev].input_count == 0) {
    std::string known;
    for (int d = 0; d < devices; ++d)
      known += std::string(d ? ", " : "") + kDevices[d].name + " (" + kDevices[d].arch + ")";
    c.error = std::string("kernel '") + kKernel + "' was not tuned on '" + asked + "'" +
              (asked_arch.empty() ? std::string() : " nor on any " + asked_arch + " device") +
              "; it was tuned on: " + (known.empty() ? "no device" : known) +
              ". Fix: tune it there (`gputune run`), regenerate this header, or give one of those "
              "devices.";
    return c;
  }
  const Device& D = kDevices[dev];
  if (dims < 0 || (dims > 0 && !size)) dims = 0;
  for (int i = 0; i < dims; ++i)
    if (size[i] < 1) {
      c.error = "problem size " + std::to_string(i) + " of kernel '" + kKernel + "' is " +
                std::to_string(size[i]) + ". Fix: sizes are positive.";
      return c;
    }
  if (dims < kDims) {
    c.error = std::string("kernel '") + kKernel + "' was tuned for " + std::to_string(kDims) +
              " problem size(s) (e.g. " + kInputs[D.first_input].label + "); the input gives " +
              std::to_string(dims) + ". Fix: pass all " + std::to_string(kDims) + ".";
    return c;
  }
  std::vector<long long> s(size, size + dims);
  while (s.size() < 3) s.push_back(1);
  const int n = static_cast<int>(s.size());
  for (int i = D.first_input; i < D.first_input + D.input_count; ++i)
    for (int v = 0; v < kValueCount; ++v)
      if (kHasValue[i * kValueCount + v] && (!values || v >= value_count)) {
        c.error = std::string("kernel '") + kKernel + "' was tuned with the input value '" +
                  kValueNames[v] + "' (context " + kInputs[i].label +
                  "); the input has none. Fix: pass values in kValueNames order.";
        return c;
      }
  int exact = -1;
  if (!same_arch)
    for (int i = D.first_input; i < D.first_input + D.input_count; ++i) {
      bool same = kInputs[i].size_len == n;
      for (int j = 0; same && j < n; ++j) same = kInputs[i].size[j] == s[static_cast<size_t>(j)];
      for (int v = 0; same && v < kValueCount; ++v)
        if (kHasValue[i * kValueCount + v]) same = values[v] == kValues[i * kValueCount + v];
      if (same) exact = i;
    }
  int config = -1;
  if (exact >= 0) {
    c.how = How::kMeasured, config = kInputs[exact].config, c.from = {kInputs[exact].label};
    c.has_measured = true, c.measured_ms = kInputs[exact].best_ms;
  } else if (D.learned && D.tree >= 0) {
    int node = D.tree;
    while (kNodes[node].lo >= 0) {
      const int d = kNodes[node].dim;
      const double x = d < n ? log2_size(s[static_cast<size_t>(d)]) : 0.0;
      node = x <= kNodes[node].split ? kNodes[node].lo : kNodes[node].hi;
    }
    c.how = How::kLearned, config = kNodes[node].config;
    for (int i = D.first_input; i < D.first_input + D.input_count; ++i)
      c.from.push_back(kInputs[i].label);
    if (D.has_loo) c.has_expected = true, c.expected = D.learned_loo;
  } else {
    int best = -1;
    double best_d = 0;
    for (int i = D.first_input; i < D.first_input + D.input_count; ++i) {
      const double d = log_distance(kInputs[i].size, kInputs[i].size_len, s.data(), n);
      if (best < 0 || d < best_d - 1e-12 ||
          (std::abs(d - best_d) <= 1e-12 && work(kInputs[i].size, kInputs[i].size_len) >
                                                 work(kInputs[best].size, kInputs[best].size_len)))
        best = i, best_d = d;
    }
    c.how = How::kNearest, config = kInputs[best].config, c.from = {kInputs[best].label};
    if (D.has_loo) c.has_expected = true, c.expected = D.nearest;
  }
  if (same_arch)
    for (std::string& f : c.from) f += std::string(" on ") + D.name;
  if (config < 0) {
    c.error = std::string("kernel '") + kKernel + "': the table names a configuration it lacks. " +
              "Fix: regenerate this header (`gputune best --header FILE --runtime`).";
    return c;
  }
  c.device = D.name, c.config = kConfigKeys[config];
  for (int p = 0; p < kParamCount; ++p)
    c.params.push_back({kParamNames[p], kParamValues[config * kParamCount + p]});
  c.ok = true;
  return c;
}
)GT";

}  // namespace

std::string runtime_header(const KernelTable& k, const RuntimeHeaderOptions& o) {
  size_t inputs = 0, slots = 3;
  std::set<std::string> value_set;
  for (const DeviceTable& d : k.devices)
    for (const TunedInput& in : d.inputs) {
      ++inputs, slots = std::max(slots, in.size.size());
      for (const auto& [name, v] : in.values) value_set.insert(name);
    }
  if (inputs == 0)
    throw std::invalid_argument("kernel '" + k.name +
                                "' has no tuned context to choose from. Fix: tune it (`gputune "
                                "run`) so that a winner is stored, then write the header again.");
  const std::vector<std::string> value_names(value_set.begin(), value_set.end());
  std::map<std::string, int> config_index;
  for (const auto& [key, params] : k.configs) config_index.emplace(key, config_index.size());
  auto index_of = [&](const std::string& key) {
    auto it = config_index.find(key);
    return it == config_index.end() ? -1 : it->second;
  };
  const std::string ns = runtime_namespace(k.name);
  std::ostringstream out;
  out << "// Tuned configurations of the kernel '" << comment(k.name) << "'"
      << (k.hash.empty() ? "" : " (source " + comment(k.hash) + ")")
      << ", chosen at run time.\n// Generated by `gputune best " << comment(k.name)
      << " --header FILE --runtime`" << (o.origin.empty() ? "" : " from " + comment(o.origin))
      << (o.generated.empty() ? "" : " on " + comment(o.generated))
      << ". Self-contained C++17; no gputune needed.\n"
      << "//\n//   auto c = gputune_tuned::" << ns
      << "::choose(\"NVIDIA H100 80GB HBM3\", \"sm_90\", sizes, dims);\n"
      << "//   if (c.ok) for (auto& p : c.params) ...; else std::cerr << c.error;\n//\n"
      << "// The rules of gputune::select::Table::choose: the device by name (case-insensitive), "
         "else the\n// same-architecture device with the most contexts; a tuned context of "
         "that size on that device\n// (measured); else the device's rule: its decision tree "
         "(learned) or the nearest tuned context\n// in log2 problem size, ties to the larger "
         "input (nearest). Launch geometry is not computed here.\n"
      << "#pragma once\n\n#include <algorithm>\n#include <cmath>\n#include <limits>\n"
         "#include <string>\n#include <vector>\n\n";
  out << "#ifndef GPUTUNE_TUNED_MAX_SLOTS\n#define GPUTUNE_TUNED_MAX_SLOTS 8\n#endif\n";
  if (slots > 8)
    out << "#if GPUTUNE_TUNED_MAX_SLOTS < " << slots << "\n#error \"kernel " << comment(k.name)
        << " has " << slots << " problem sizes: define GPUTUNE_TUNED_MAX_SLOTS " << slots
        << " before including this header\"\n#endif\n";
  out << kCommon << "\nnamespace gputune_tuned {\nnamespace " << ns << " {\n\n";
  out << "inline constexpr const char* kKernel = " << lit(k.name) << ";\n";
  out << "inline constexpr int kDims = " << k.dims() << ";  // problem sizes it was tuned with\n";
  // Parameters and configurations (flat: config * kParamCount + parameter).
  out << "inline constexpr int kParamCount = " << k.parameters.size() << ";\n";
  out << "inline constexpr const char* kParamNames[] = {";
  for (const std::string& p : k.parameters) out << lit(p) << ", ";
  out << "nullptr};\n";
  out << "inline constexpr const char* kConfigKeys[] = {";
  for (const auto& [key, params] : k.configs) out << lit(key) << ", ";
  out << "nullptr};\n";
  out << "inline constexpr const char* kParamValues[] = {\n";
  for (const auto& [key, params] : k.configs) {
    out << "    ";
    for (const std::string& p : k.parameters) {
      if (!params.contains(p))
        throw std::invalid_argument("kernel '" + k.name + "': configuration " + key +
                                    " has no value for parameter '" + p +
                                    "'. Fix: export from runs that tuned the same parameters.");
      out << lit(value_text(params[p])) << ", ";
    }
    out << "// " << comment(key) << "\n";
  }
  out << "    nullptr};\n";
  // Input values (flat: input * kValueCount + value).
  out << "inline constexpr int kValueCount = " << value_names.size() << ";\n";
  out << "inline constexpr const char* kValueNames[] = {";
  for (const std::string& v : value_names) out << lit(v) << ", ";
  out << "nullptr};\n";
  std::ostringstream has, vals, in_rows, dev_rows;
  std::vector<std::string> nodes;  // each device's tree, parents before their children
  std::function<int(const TreeNode&)> emit = [&](const TreeNode& t) -> int {
    const int at = static_cast<int>(nodes.size());
    nodes.emplace_back();
    if (t.leaf()) {
      nodes[static_cast<size_t>(at)] =
          "{" + std::to_string(index_of(t.config)) + ", 0, 0.0, -1, -1},  // " + comment(t.config);
      return at;
    }
    const int lo = emit(*t.lo), hi = emit(*t.hi);
    nodes[static_cast<size_t>(at)] = "{-1, " + std::to_string(t.dim) + ", " + dbl(t.split) + ", " +
                                     std::to_string(lo) + ", " + std::to_string(hi) + "},";
    return at;
  };
  int input_at = 0;
  for (const DeviceTable& d : k.devices) {
    const int tree = d.tree ? emit(*d.tree) : -1;
    const LooFigures none{};
    dev_rows << "    {" << lit(d.name) << ", " << lit(d.arch) << ", " << input_at << ", "
             << d.inputs.size() << ", " << (d.method == How::kLearned ? "true" : "false") << ", "
             << tree << ", " << (d.loo ? "true" : "false") << ", "
             << loo(d.loo ? d.loo->nearest : none) << ", " << loo(d.loo ? d.loo->learned : none)
             << "},\n";
    for (const TunedInput& in : d.inputs) {
      in_rows << "    {" << lit(in.label) << ", " << in.size.size() << ", {";
      for (size_t i = 0; i < in.size.size(); ++i) in_rows << (i ? ", " : "") << in.size[i] << "LL";
      in_rows << "}, " << index_of(in.winner) << ", " << dbl(in.best_ms) << "},  // "
              << comment(d.name) << "\n";
      for (const std::string& v : value_names) {
        auto it = in.values.find(v);
        has << (it == in.values.end() ? "false, " : "true, ");
        vals << (it == in.values.end() ? "0.0" : dbl(it->second)) << ", ";
      }
      ++input_at;
    }
  }
  out << "inline constexpr bool kHasValue[] = {" << has.str() << "false};\n";
  out << "inline constexpr double kValues[] = {" << vals.str() << "0.0};\n\n";
  out << "inline constexpr detail::Node kNodes[] = {\n";
  for (const std::string& row : nodes) out << "    " << row << "\n";
  out << "    {-1, 0, 0.0, -1, -1}};\n";
  out << "inline constexpr detail::Input kInputs[] = {\n" << in_rows.str() << "};\n";
  out << "inline constexpr detail::Device kDevices[] = {\n" << dev_rows.str() << "};\n";
  out << kChoose << "\n}  // namespace " << ns << "\n}  // namespace gputune_tuned\n";
  return out.str();
}

}  // namespace gputune::select
