#include "pruner/device_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#ifndef GPUTUNE_DEVICES_DIR
#define GPUTUNE_DEVICES_DIR "configs/devices"
#endif
#ifndef GPUTUNE_INSTALLED_DEVICES_DIR
#define GPUTUNE_INSTALLED_DEVICES_DIR "share/gputune/devices"
#endif

namespace gputune::pruner {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

int fp32_lanes_per_sm(int major, int minor) {
  if (major == 7 || (major == 8 && minor == 0)) return 64;
  return 128;
}

int conversion_lanes_per_sm(int major, int /*minor*/) { return major >= 7 ? 16 : 32; }

std::filesystem::path default_devices_dir() {
  if (const char* d = std::getenv("GPUTUNE_DEVICES_DIR"); d && *d) return d;
  // An installed binary: PREFIX/bin/gputune reads PREFIX/share/gputune/devices.
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto installed = exe.parent_path().parent_path() / GPUTUNE_INSTALLED_DEVICES_DIR;
    if (std::filesystem::is_directory(installed, ec)) return installed;
  }
  return GPUTUNE_DEVICES_DIR;
}

DeviceSpec load_device_file(const std::filesystem::path& file) {
  auto fail = [&](const std::string& field, const std::string& what) -> DeviceError {
    return DeviceError(file.string() + (field.empty() ? "" : ": field '" + field + "'") + ": " +
                       what);
  };
  std::ifstream in(file);
  if (!in) throw fail("", "cannot read the device file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range 406 for 1e400
    throw fail("", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw fail("", "expected a JSON object");
  DeviceSpec d;
  d.key = file.stem().string();
  auto str = [&](const char* f) {
    if (!j.contains(f) || !j[f].is_string() || j[f].get<std::string>().empty())
      throw fail(f, "missing or not a non-empty string");
    return j[f].get<std::string>();
  };
  // Each figure must be a positive number within sane bounds, and say where it comes from.
  auto num = [&](const char* f, double lo, double hi) {
    if (!j.contains(f) || !j[f].is_number()) throw fail(f, "missing or not a number");
    double v = j[f].get<double>();
    if (!(v >= lo && v <= hi))
      throw fail(f, "value " + j[f].dump() + " is outside [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
    if (!j.contains("sources") || !j["sources"].contains(f) || !j["sources"][f].is_string())
      throw fail(std::string("sources.") + f, "every figure needs a source");
    d.sources[f] = j["sources"][f].get<std::string>();
    return v;
  };
  d.name = str("name");
  if (j.contains("aliases")) {
    if (!j["aliases"].is_array()) throw fail("aliases", "expected a list of strings");
    for (size_t i = 0; i < j["aliases"].size(); ++i) {
      const auto& a = j["aliases"][i];
      if (!a.is_string() || a.get<std::string>().empty())
        throw fail("aliases[" + std::to_string(i) + "]",
                   "expected a non-empty string, got " + a.dump());
      d.aliases.push_back(a.get<std::string>());
    }
  }
  std::string cc = str("compute_capability");
  int major = 0, minor = 0;
  if (std::sscanf(cc.c_str(), "%d.%d", &major, &minor) != 2)
    throw fail("compute_capability", "expected \"MAJOR.MINOR\"");
  try {
    d.limits = limits_for_arch(major, minor);
  } catch (const std::invalid_argument& e) {
    throw fail("compute_capability", e.what());
  }
  d.limits.sm_count = static_cast<int>(num("sm_count", 1, 1024));
  d.boost_clock_mhz = num("boost_clock_mhz", 100, 5000);
  d.memory_gib = num("memory_gib", 0.5, 4096);
  d.memory_bandwidth_gbs = num("memory_bandwidth_gbs", 10, 100000);
  d.peak_fp32_tflops = num("peak_fp32_tflops", 0.1, 1000);
  d.l2_cache_mib = num("l2_cache_mib", 0.1, 4096);
  double derived =
      d.limits.sm_count * fp32_lanes_per_sm(major, minor) * 2.0 * d.boost_clock_mhz * 1e6 / 1e12;
  if (std::fabs(derived - d.peak_fp32_tflops) > 0.1 * derived)
    throw fail("peak_fp32_tflops", std::to_string(d.peak_fp32_tflops) +
                                       " disagrees with SMs x lanes x 2 x clock = " +
                                       std::to_string(derived) + " TFLOP/s by more than 10%");
  return d;
}

std::vector<DeviceSpec> load_devices(const std::filesystem::path& dir) {
  std::vector<DeviceSpec> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw DeviceError("device folder " + dir.string() + " not found (set GPUTUNE_DEVICES_DIR)");
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(load_device_file(e.path()));
  std::sort(out.begin(), out.end(),
            [](const DeviceSpec& a, const DeviceSpec& b) { return a.key < b.key; });
  return out;
}

DeviceSpec find_device(const std::string& name, const std::filesystem::path& dir) {
  auto all = load_devices(dir);
  // First as written (any case), then with spaces, '-' and '_' ignored: `h100_sxm`, `RTX3090`.
  for (const auto& same : {+[](const std::string& s) { return lower(s); },
                           +[](const std::string& s) {
                             std::string k;
                             for (char c : lower(s))
                               if (c != ' ' && c != '-' && c != '_') k += c;
                             return k;
                           }}) {
    const std::string n = same(name);
    std::vector<const DeviceSpec*> hits;
    for (const auto& d : all) {
      bool hit = same(d.key) == n || same(d.name) == n;
      for (const auto& a : d.aliases) hit |= same(a) == n;
      if (hit) hits.push_back(&d);
    }
    if (hits.size() == 1) return *hits[0];
    if (hits.size() > 1) {
      std::string which;
      for (const auto* d : hits) which += "\n  " + d->key + "  (" + d->name + ")";
      throw DeviceError("device name '" + name +
                        "' fits more than one device file; give one of:" + which);
    }
  }
  std::string known;
  for (auto& d : all) known += "\n  " + d.key + "  (" + d.name + ")";
  throw DeviceError("unknown device '" + name + "'; known devices:" + known);
}

}  // namespace gputune::pruner
