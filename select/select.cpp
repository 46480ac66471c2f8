/** \file select/select.cpp
 * Owns: Table: opening a decision file or a gputune database, and choose(): device match (name,
 * else architecture), exact context match, else the device's fitted rule; the launch geometry
 * from the job's rules (variants/instantiate.h, as the tuner computes it); the memo that makes a
 * repeated lookup cheap. Every failure becomes an Error value here. */
#include "select/select.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include "db/store.h"
#include "variants/instantiate.h"
#include "variants/job.h"

namespace gputune::select {

using nlohmann::json;

const char* to_string(Error::Code code) {
  switch (code) {
    case Error::Code::kUnknownKernel:
      return "unknown kernel";
    case Error::Code::kUnknownDevice:
      return "unknown device";
    case Error::Code::kBadInput:
      return "bad input";
    case Error::Code::kBadFile:
      return "bad file";
    case Error::Code::kWrongVersion:
      return "wrong version";
    case Error::Code::kNotGputune:
      return "not a gputune database";
    case Error::Code::kNoDriver:
      return "no driver";
    case Error::Code::kCompile:
      return "compile";
    case Error::Code::kLaunch:
      return "launch";
  }
  return "?";
}

std::vector<std::string> Choice::defines() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : params) out.push_back("-D" + name + "=" + value);
  return out;
}

std::string Choice::explain() const {
  std::ostringstream out;
  out << kernel << " on " << device << ": " << config << ", ";
  auto list = [&] {
    std::string s;
    for (size_t i = 0; i < from.size(); ++i) s += (i ? ", " : "") + from[i];
    return s;
  };
  char buf[96];
  switch (how) {
    case How::kMeasured:
      out << "measured (context " << list() << ")";
      if (measured_ms) std::snprintf(buf, sizeof buf, ": %.4g ms", *measured_ms), out << buf;
      break;
    case How::kNearest:
      out << "predicted: the winner of the nearest tuned context (" << list() << ")";
      break;
    case How::kLearned:
      out << "predicted: a decision tree fitted on the tuned contexts (" << list() << ")";
      break;
  }
  if (expected && expected->contexts > expected->unknown) {
    std::snprintf(buf, sizeof buf, "; leave-one-out over %d context(s): median %.3fx, worst %.3fx",
                  expected->contexts, expected->median, expected->worst);
    out << buf;
    if (expected->unknown) out << " (" << expected->unknown << " not measured)";
  } else if (how != How::kMeasured) {
    out << "; how close it comes is unknown (fewer than 2 contexts tuned)";
  }
  return out.str();
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string value_text(const nlohmann::ordered_json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

/// What choose() needs of a kernel, prepared once when the table is opened.
struct PreparedKernel {
  const KernelTable* table = nullptr;
  std::optional<Job> job;  ///< the launch rules; none when the job could not be read
  std::string job_error;
  std::shared_ptr<const std::vector<std::string>> names;
};

struct MemoKey {
  std::string kernel, device, arch;
  std::vector<std::int64_t> size;
  std::vector<std::pair<std::string, double>> values;
  bool operator==(const MemoKey&) const = default;
};

struct MemoHash {
  size_t operator()(const MemoKey& k) const noexcept {
    size_t h = std::hash<std::string>()(k.kernel) ^ (std::hash<std::string>()(k.device) << 1);
    h ^= std::hash<std::string>()(k.arch) + 0x9e3779b9 + (h << 6) + (h >> 2);
    for (auto s : k.size) h ^= std::hash<std::int64_t>()(s) + 0x9e3779b9 + (h << 6) + (h >> 2);
    for (const auto& [n, v] : k.values)
      h ^= std::hash<std::string>()(n) ^ (std::hash<double>()(v) << 1);
    return h;
  }
};

}  // namespace

struct Table::Impl {
  DecisionTable data;
  std::map<std::string, PreparedKernel, std::less<>> kernels;
  mutable std::shared_mutex memo_mutex;
  mutable std::unordered_map<MemoKey, Choice, MemoHash> memo;
  static constexpr size_t kMemoLimit = 4096;

  Result<Choice> compute(const PreparedKernel& pk, const Device& device, const Input& input) const;
};

namespace {

Result<Table> failed(Error::Code code, std::string message) {
  return Error{code, std::move(message)};
}

Value number(double v) {
  if (std::floor(v) == v && std::abs(v) < 9e15) return Value(static_cast<std::int64_t>(v));
  return Value(v);
}

}  // namespace

Result<Table> Table::from(DecisionTable table) noexcept {
  try {
    Table t;
    t.impl_ = std::make_shared<Impl>();
    t.impl_->data = std::move(table);
    for (const KernelTable& k : t.impl_->data.kernels) {
      PreparedKernel pk;
      pk.table = &k;
      pk.names = std::make_shared<const std::vector<std::string>>(k.parameters);
      try {
        pk.job = parse_job(json::parse(k.job_document),
                           t.impl_->data.origin + " (the job of kernel " + k.name + ")");
      } catch (const std::exception& e) {
        pk.job_error = e.what();
      }
      t.impl_->kernels.emplace(k.name, std::move(pk));
    }
    return t;
  } catch (const std::exception& e) {
    return failed(Error::Code::kBadFile, e.what());
  }
}

Result<Table> Table::parse(std::string_view text, const std::string& origin) noexcept {
  try {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded())
      return failed(Error::Code::kBadFile,
                    origin +
                        ": not JSON. Fix: give a decision file written by `gputune export "
                        "--decisions`, or a gputune database.");
    if (j.is_object() && j.contains("version") && j["version"] != kDecisionVersion &&
        j.value("format", "") == kDecisionFormat)
      return failed(Error::Code::kWrongVersion,
                    origin + ": a decision file of version " + j["version"].dump() +
                        "; this library reads version " + std::to_string(kDecisionVersion) +
                        ". Fix: export it again with this gputune (`gputune export --decisions`).");
    return from(from_json(j, origin));
  } catch (const std::exception& e) {
    return failed(Error::Code::kBadFile, e.what());
  }
}

Result<Table> Table::open(const std::string& path) noexcept {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return failed(Error::Code::kBadFile,
                    path +
                        ": cannot be read. Fix: give the path of a decision file (`gputune "
                        "export --decisions`) or of a gputune database.");
    if (db::is_sqlite_file(path)) {
      try {
        db::Store store(path);
        DecisionTable t = table_from_store(store);
        t.origin = path;
        return from(std::move(t));
      } catch (const std::exception& e) {
        return failed(
            Error::Code::kNotGputune,
            path + ": " + e.what() + " Fix: give a database gputune wrote, or a decision file.");
      }
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse(text.str(), path);
  } catch (const std::exception& e) {
    return failed(Error::Code::kBadFile, path + ": " + e.what());
  }
}

std::vector<std::string> Table::kernels() const {
  std::vector<std::string> out;
  if (impl_)
    for (const auto& [name, k] : impl_->kernels) out.push_back(name);
  return out;
}

const DecisionTable& Table::data() const { return impl_->data; }

const KernelTable* Table::kernel(std::string_view name) const {
  if (!impl_) return nullptr;
  auto it = impl_->kernels.find(name);
  return it == impl_->kernels.end() ? nullptr : it->second.table;
}

Result<Choice> Table::Impl::compute(const PreparedKernel& pk, const Device& device,
                                    const Input& input) const {
  const KernelTable& k = *pk.table;
  // The device: by name, else the architecture's device with the most contexts.
  const DeviceTable* dev = nullptr;
  bool same_arch = false;
  for (const DeviceTable& d : k.devices)
    if (lower(d.name) == lower(device.name)) dev = &d;
  if (!dev && !device.arch.empty())
    for (const DeviceTable& d : k.devices)
      if (d.arch == device.arch && (!dev || d.inputs.size() > dev->inputs.size()))
        dev = &d, same_arch = true;
  if (!dev || dev->inputs.empty()) {
    std::string known;
    for (const DeviceTable& d : k.devices)
      known += (known.empty() ? "" : ", ") + d.name + " (" + d.arch + ")";
    return Error{
        Error::Code::kUnknownDevice,
        "kernel '" + k.name + "' was not tuned on '" + device.name + "'" +
            (device.arch.empty() ? std::string() : " nor on any " + device.arch + " device") +
            "; it was tuned on: " + (known.empty() ? "no device" : known) +
            ". Fix: tune it there (`gputune run`), or give one of those devices."};
  }
  // The input: as many problem sizes as the contexts have.
  const int dims = k.dims();
  int given = 0;
  for (size_t i = 0; i < input.problem_size.size(); ++i)
    if (input.problem_size[i] < 1)
      return Error{Error::Code::kBadInput,
                   "problem size " + std::to_string(i) + " of kernel '" + k.name + "' is " +
                       std::to_string(input.problem_size[i]) + ". Fix: sizes are positive."};
  given = static_cast<int>(input.problem_size.size());
  if (given < dims)
    return Error{Error::Code::kBadInput,
                 "kernel '" + k.name + "' was tuned for " + std::to_string(dims) +
                     " problem size(s) (e.g. " + dev->inputs.front().label + "); the input gives " +
                     std::to_string(given) + ". Fix: give Input.problem_size all " +
                     std::to_string(dims) + "."};
  std::vector<std::int64_t> size = input.problem_size;
  while (size.size() < 3) size.push_back(1);
  for (const TunedInput& in : dev->inputs)
    for (const auto& [name, v] : in.values)
      if (!input.values.count(name))
        return Error{Error::Code::kBadInput,
                     "kernel '" + k.name + "' was tuned with the input value '" + name +
                         "' (context " + in.label +
                         "); the input has none. Fix: set Input.values[\"" + name + "\"]."};

  Choice c;
  c.kernel = k.name, c.device = dev->name;
  const TunedInput* exact = nullptr;
  if (!same_arch)
    for (const TunedInput& in : dev->inputs) {
      bool same = in.size == size;
      for (const auto& [name, v] : in.values) same = same && input.values.at(name) == v;
      if (same) exact = &in;
    }
  if (exact) {
    c.how = How::kMeasured, c.config = exact->winner, c.from = {exact->label};
    c.measured_ms = exact->best_ms;
  } else if (dev->method == How::kLearned && dev->tree) {
    c.how = How::kLearned, c.config = dev->tree->decide(log_size(size));
    for (const TunedInput& in : dev->inputs) c.from.push_back(in.label);
    if (dev->loo) c.expected = dev->loo->learned;
  } else {
    const int n = nearest_input(dev->inputs, size);
    c.how = How::kNearest, c.config = dev->inputs[static_cast<size_t>(n)].winner;
    c.from = {dev->inputs[static_cast<size_t>(n)].label};
    if (dev->loo) c.expected = dev->loo->nearest;
  }
  if (same_arch)
    for (std::string& f : c.from) f += " on " + dev->name;
  const auto& params = k.configs.at(c.config);
  Config config;
  config.names = pk.names;
  for (const auto& [name, v] : params.items()) {
    c.params.emplace_back(name, value_text(v));
    config.values.push_back(json_to_value(json::parse(v.dump())));
  }
  if (!pk.job)
    return Error{Error::Code::kBadFile,
                 "the launch rules of kernel '" + k.name + "' cannot be read: " + pk.job_error};
  ContextSpec ctx;
  ctx.name = "input";
  for (auto s : size) ctx.problem_size.emplace_back(s);
  for (const auto& [name, v] : input.values) ctx.values.emplace_back(name, number(v));
  try {
    const LaunchGeometry g = launch_geometry(*pk.job, config, ctx);
    c.grid = g.grid, c.block = g.block, c.dynamic_smem = g.dynamic_smem;
  } catch (const std::exception& e) {
    return Error{Error::Code::kBadInput,
                 "the launch geometry of kernel '" + k.name + "' for this input: " + e.what()};
  }
  return c;
}

Result<Choice> Table::choose(std::string_view kernel, const Device& device,
                             const Input& input) const noexcept {
  try {
    if (!impl_) return Error{Error::Code::kBadFile, "the table was never opened"};
    auto it = impl_->kernels.find(kernel);
    if (it == impl_->kernels.end()) {
      std::string known;
      for (const auto& [name, k] : impl_->kernels) known += (known.empty() ? "" : ", ") + name;
      return Error{Error::Code::kUnknownKernel,
                   "no kernel '" + std::string(kernel) + "' in " + impl_->data.origin +
                       "; it has: " + (known.empty() ? "none" : known) +
                       ". Fix: tune it and export again, or name one of those."};
    }
    MemoKey key{std::string(kernel),
                device.name,
                device.arch,
                input.problem_size,
                {input.values.begin(), input.values.end()}};
    {
      std::shared_lock lock(impl_->memo_mutex);
      auto m = impl_->memo.find(key);
      if (m != impl_->memo.end()) return m->second;
    }
    Result<Choice> r = impl_->compute(it->second, device, input);
    if (r.ok()) {
      std::unique_lock lock(impl_->memo_mutex);
      if (impl_->memo.size() >= Impl::kMemoLimit) impl_->memo.clear();
      impl_->memo.emplace(std::move(key), r.value());
    }
    return r;
  } catch (const std::exception& e) {
    return Error{Error::Code::kBadInput,
                 std::string("choosing for kernel '") + std::string(kernel) + "': " + e.what()};
  }
}

}  // namespace gputune::select
