#include "db/interchange.h"

#include <sys/utsname.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>

#include "variants/hash.h"
#include "variants/job.h"

namespace gputune::db {

using nlohmann::json;

std::string read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!f) throw std::runtime_error(path + ": cannot open");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string why = msg ? msg : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw std::runtime_error(path + ": read error: " + why);
  return out;
}

std::string kernel_tuner_key_text(const json& value) { return json_to_value(value).str(); }

namespace {

Status status_of_error(const std::string& e) {
  if (e == "CompilationFailedConfig") return Status::kCompile;
  if (e == "RuntimeFailedConfig") return Status::kRuntime;
  if (e == "InvalidConfig") return Status::kConstraints;
  return Status::kRuntime;
}

/// A T4 invalidity (or "no time") as a measurement status.
Status status_of_invalidity(const std::string& e) {
  const std::optional<Status> s = Status::parse(e);
  if (s && *s != Status::kCorrect && *s != Status::kCompiled) return *s;
  return Status::kRuntime;
}

/// Field-by-field checks of a measurement file; every error names the file and the field.
struct FileReader {
  const std::string& path;

  [[noreturn]] void bad(const std::string& field, const std::string& problem) const {
    throw std::runtime_error(path + ": field '" + field + "' " + problem);
  }
  const json& object(const json& j, const std::string& field) const {
    if (!j.is_object()) bad(field, std::string("should be an object, not ") + j.type_name());
    return j;
  }
  const json& array(const json& j, const std::string& field) const {
    if (!j.is_array()) bad(field, std::string("should be a list, not ") + j.type_name());
    return j;
  }
  std::string string(const json& j, const std::string& field) const {
    if (!j.is_string()) bad(field, std::string("should be a string, not ") + j.type_name());
    return j.get<std::string>();
  }
  /// A duration in milliseconds: a finite number, not negative.
  double time(const json& j, const std::string& field) const {
    if (!j.is_number()) bad(field, std::string("should be a number, not ") + j.type_name());
    double t = j.get<double>();
    if (!std::isfinite(t) || t < 0) bad(field, "should be a time in ms, not " + j.dump());
    return t;
  }
  std::vector<double> times(const json& j, const std::string& field) const {
    std::vector<double> out;
    for (size_t i = 0; i < array(j, field).size(); ++i)
      out.push_back(time(j[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }
  /// An optional number (GB/s and the like): kept where it is one, ignored where it is not.
  static std::optional<double> number(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number() || !std::isfinite(it->get<double>())) return {};
    return it->get<double>();
  }
  void params(const json& config, const std::string& field) const {
    for (auto it = config.begin(); it != config.end(); ++it)
      if (it->is_object()) bad(field + "." + it.key(), "is an object, not a parameter value");
  }

  RecordedEntry kernel_tuner_entry(const std::string& key, const json& e) const {
    std::string field = "cache." + key;
    object(e, field);
    params(e, field);
    RecordedEntry r;
    r.id = key;
    r.params = e;
    auto t = e.find("time");
    if (t == e.end()) bad(field, "has no 'time'");
    if (t->is_string()) {
      r.failure = t->get<std::string>();
    } else {
      r.time_ms = time(*t, field + ".time");
      if (e.contains("times")) r.samples_ms = times(e["times"], field + ".times");
    }
    r.gbps = number(e, "GB/s"), r.gflops = number(e, "GFLOP/s");
    r.compile_ms = number(e, "compile_time");
    r.benchmark_ms = number(e, "benchmark_time");
    return r;
  }

  RecordedEntry t4_entry(size_t i, const json& e) const {
    std::string field = "results[" + std::to_string(i) + "]";
    object(e, field);
    RecordedEntry r;
    r.id = field;
    if (!e.contains("configuration")) bad(field, "has no 'configuration'");
    r.params = object(e["configuration"], field + ".configuration");
    params(r.params, field + ".configuration");
    std::string inv =
        e.contains("invalidity") ? string(e["invalidity"], field + ".invalidity") : "correct";
    if (e.contains("measurements")) {
      const json& ms = array(e["measurements"], field + ".measurements");
      for (size_t k = 0; k < ms.size(); ++k) {
        std::string mf = field + ".measurements[" + std::to_string(k) + "]";
        object(ms[k], mf);
        if (ms[k].contains("name") && string(ms[k]["name"], mf + ".name") == "time" &&
            ms[k].contains("value"))
          r.time_ms = time(ms[k]["value"], mf + ".value");
      }
    }
    if (e.contains("times")) {
      const json& ts = object(e["times"], field + ".times");
      if (ts.contains("runtimes")) r.samples_ms = times(ts["runtimes"], field + ".times.runtimes");
      r.compile_ms = number(ts, "compilation_time");                // the schema's name
      if (!r.compile_ms) r.compile_ms = number(ts, "compilation");  // what Kernel Tuner writes
      r.benchmark_ms = number(ts, "benchmark");
      if (!r.benchmark_ms && !r.samples_ms.empty())
        r.benchmark_ms = std::accumulate(r.samples_ms.begin(), r.samples_ms.end(), 0.0);
    }
    if (!r.time_ms && !r.samples_ms.empty()) {  // the median of the runtimes
      std::vector<double> rt = r.samples_ms;
      std::sort(rt.begin(), rt.end());
      r.time_ms = rt[rt.size() / 2];
    }
    const bool correct = Status::parse(inv) == Status(Status::kCorrect);
    if (!correct) r.time_ms.reset();
    if (!r.time_ms) r.failure = correct ? "no time" : inv;
    return r;
  }
};

}  // namespace

MeasurementFile read_measurement_file(const std::string& path) {
  json doc;
  try {
    doc = json::parse(read_maybe_gzip(path));
  } catch (const json::exception& e) {  // parse_error, or out_of_range 406 for 1e400
    throw std::runtime_error(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  FileReader in{path};
  if (!doc.is_object() || !(doc.contains("cache") || doc.contains("results")))
    throw std::runtime_error(
        path + ": neither a Kernel Tuner cache file (key 'cache') nor a T4 file (key 'results')");
  MeasurementFile f;
  if (doc.contains("cache")) {
    f.format = MeasurementFile::Format::KernelTuner;
    if (doc.contains("kernel_name")) f.kernel = in.string(doc["kernel_name"], "kernel_name");
    if (doc.contains("device_name")) f.device = in.string(doc["device_name"], "device_name");
    if (doc.contains("tune_params_keys")) {
      const json& keys = in.array(doc["tune_params_keys"], "tune_params_keys");
      for (size_t i = 0; i < keys.size(); ++i)
        f.keys.push_back(in.string(keys[i], "tune_params_keys[" + std::to_string(i) + "]"));
    }
    if (doc.contains("problem_size")) f.problem_size = doc["problem_size"];
    const json& cache = in.object(doc["cache"], "cache");
    f.entries.reserve(cache.size());
    for (auto it = cache.begin(); it != cache.end(); ++it)
      f.entries.push_back(in.kernel_tuner_entry(it.key(), it.value()));
    doc.erase("cache");
  } else {
    f.format = MeasurementFile::Format::T4;
    // A gputune export names its tuning problem (export_t4).
    if (doc.contains("metadata") && doc["metadata"].is_object() &&
        doc["metadata"].contains("gputune")) {
      const json& g = in.object(doc["metadata"]["gputune"], "metadata.gputune");
      if (g.contains("kernel")) f.kernel = in.string(g["kernel"], "metadata.gputune.kernel");
      if (g.contains("device")) f.device = in.string(g["device"], "metadata.gputune.device");
      if (g.contains("context")) f.context = in.string(g["context"], "metadata.gputune.context");
      if (g.contains("problem_size")) f.problem_size = g["problem_size"];
      if (g.contains("parameters")) {
        const json& names = in.array(g["parameters"], "metadata.gputune.parameters");
        for (size_t i = 0; i < names.size(); ++i)
          f.keys.push_back(
              in.string(names[i], "metadata.gputune.parameters[" + std::to_string(i) + "]"));
      }
    }
    const json& results = in.array(doc["results"], "results");
    f.entries.reserve(results.size());
    for (size_t i = 0; i < results.size(); ++i) f.entries.push_back(in.t4_entry(i, results[i]));
    doc.erase("results");
  }
  f.header = std::move(doc);  // what is left: the document without its measurements
  return f;
}

std::vector<std::int64_t> whole_problem_size(const json& problem_size) {
  const json ps = problem_size.is_array()  ? problem_size
                  : problem_size.is_null() ? json::array()
                                           : json::array({problem_size});
  std::vector<std::int64_t> size;
  for (const auto& v : ps)
    if (v.is_number() && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) < 9e18)  // else the cast to int64 is undefined (1e300)
      size.push_back(static_cast<std::int64_t>(v.get<double>()));
  if (ps.empty() || size.size() != ps.size()) return {};
  while (size.size() < 3) size.push_back(1);
  return size;
}

namespace {

/// The parameters, in order: Kernel Tuner's tune_params_keys; a T4 file's first configuration's,
/// ordered as the file says, else as a stored kernel of this name with these parameters, else by
/// name (`sum.parameter_order` says which).
std::vector<std::string> parameter_order(Store& store, const std::string& path,
                                         const MeasurementFile& f, ImportSummary& sum) {
  const bool t4 = f.format == MeasurementFile::Format::T4;
  std::vector<std::string> keys = f.keys;
  if (!t4 && !f.header.contains("tune_params_keys"))
    throw std::runtime_error(path +
                             ": field 'tune_params_keys' is missing: not a Kernel Tuner "
                             "cache file");
  if (t4) {
    if (f.entries.empty())
      throw std::runtime_error(path +
                               ": field 'results' is empty: a T4 file with no measurement "
                               "has nothing to import");
    // A T4 configuration is a JSON object, whose keys have no order: the order is the file's
    // own (a gputune export names it), else that of a kernel of this name already stored with
    // these parameters (its Kernel Tuner cache or its job), else the names' order.
    std::set<std::string> names;
    for (const auto& [k, v] : f.entries.front().params.items()) names.insert(k);
    auto names_each_once = [&](const std::vector<std::string>& order) {
      return order.size() == names.size() &&
             std::set<std::string>(order.begin(), order.end()) == names;
    };
    if (!keys.empty()) {
      if (!names_each_once(keys))
        throw std::runtime_error(path + ": field 'metadata.gputune.parameters' " +
                                 json(keys).dump() + " does not name the parameters of " +
                                 "results[0].configuration " + json(names).dump() +
                                 ". Fix: list each parameter once, or remove the field");
      sum.parameter_order = "the file's order";
    } else {
      for (const std::vector<std::string>& order : store.parameter_orders(sum.kernel))
        if (names_each_once(order)) {
          keys = order;
          sum.parameter_order = "the order of " + sum.kernel + " already in the database";
          break;
        }
      if (keys.empty()) {
        keys.assign(names.begin(), names.end());
        sum.parameter_order = "name order (the file keeps none)";
      }
    }
  }
  return keys;
}

/// The problem size the import's context gets (the file's, else that of the context of the same
/// label the database holds, else 1), and its label in `sum.context`.
json problem_size_and_label(Store& store, const std::string& path, const MeasurementFile& f,
                            const ImportNames& names, ImportSummary& sum) {
  const bool t4 = f.format == MeasurementFile::Format::T4;
  json ps = f.problem_size;
  if (ps.is_null() && !(names.context.empty() && f.context.empty())) {
    // A file without a problem size, put in a context the database holds for this kernel and
    // device: that context's problem size, so the import joins its measurements.
    const std::string& label = names.context.empty() ? f.context : names.context;
    for (const Store::ContextRow& c : store.contexts(sum.kernel))
      if (c.label == label && c.device == sum.device && c.kernel == sum.kernel)
        ps = json::parse(c.problem_size_json, nullptr, false);
    if (ps.is_discarded()) ps = nullptr;
  }
  if (ps.is_null()) ps = json::array({1});
  if (!ps.is_array()) ps = json::array({ps});
  while (ps.size() < 3) ps.push_back(1);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].is_object())
      throw std::runtime_error(path + ": field '" +
                               (t4 ? "metadata.gputune.problem_size" : "problem_size") +
                               "' holds an object");
    sum.context += (i ? "x" : "") + kernel_tuner_key_text(ps[i]);
  }
  // Whole sizes are labelled as a job's context of that ProblemSize is.
  if (const auto whole = whole_problem_size(ps); !whole.empty()) {
    List sizes;
    for (std::int64_t n : whole) sizes.push_back(Value(n));
    sum.context = context_label(sizes);
  }
  if (!f.context.empty()) sum.context = f.context;
  if (!names.context.empty()) sum.context = names.context;
  return ps;
}

}  // namespace

ImportSummary import_measurements(Store& store, const std::string& path, const ImportNames& names) {
  MeasurementFile f = read_measurement_file(path);
  const bool t4 = f.format == MeasurementFile::Format::T4;
  auto missing = [&](const char* key, const char* option) {
    return std::runtime_error(path + (t4 ? std::string(": a T4 file that does not say which ") +
                                               key + " it measured (metadata.gputune." + key +
                                               "). Fix: give --" + option
                                         : std::string(": field '") + key +
                                               "_name' is missing: not a Kernel Tuner "
                                               "cache file, or give --" +
                                               option));
  };
  ImportSummary sum;
  sum.kernel = names.kernel.empty() ? f.kernel : names.kernel;
  sum.device = names.device.empty() ? f.device : names.device;
  if (sum.kernel.empty()) throw missing("kernel", "kernel NAME");
  if (sum.device.empty()) throw missing("device", "device NAME (the GPU it ran on)");
  const std::vector<std::string> keys = parameter_order(store, path, f, sum);
  const json ps = problem_size_and_label(store, path, f, names, sum);

  Transaction t(store.db());
  DeviceRecord dev;
  dev.name = sum.device;
  dev.source = "import";
  std::int64_t device_id = store.upsert_device(dev);
  std::string kernel_hash =
      sha256_hex("kernel-tuner-import|" + sum.kernel + "|" + json(keys).dump());
  std::int64_t kernel_id = store.upsert_kernel(sum.kernel, kernel_hash, "");
  std::int64_t job_id = store.upsert_job(sum.kernel, path, f.header.dump());
  ContextRecord ctx;
  ctx.kernel_id = kernel_id, ctx.device_id = device_id, ctx.label = sum.context;
  ctx.problem_size_json = ps.dump();
  ctx.arch = "";
  std::int64_t context_id = store.upsert_context(ctx);
  sum.run_id = store.begin_run(job_id, "import", static_cast<std::int64_t>(f.entries.size()));

  std::int64_t best_id = 0;
  sum.best_ms = 0;
  for (const RecordedEntry& e : f.entries) {
    nlohmann::ordered_json params = nlohmann::ordered_json::object();  // in the order of keys
    std::string key;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& k = keys[i];
      if (!e.params.contains(k))
        throw std::runtime_error(path + (t4 ? ": " : ": cache entry '") + e.id + (t4 ? "" : "'") +
                                 " lacks parameter '" + k + "'" +
                                 (t4 ? " (the first configuration has it)" : ""));
      params[k] = e.params[k];
      key += (i ? "," : "") + kernel_tuner_key_text(e.params[k]);
    }
    std::int64_t variant_id = store.upsert_variant(kernel_id, key, params.dump());
    MeasurementRecord m;
    m.run_id = sum.run_id, m.context_id = context_id, m.variant_id = variant_id;
    if (e.time_ms) {
      m.status = Status::kCorrect;
      m.time_ms = e.time_ms;
      m.samples_ms = e.samples_ms;
      m.gbps = e.gbps, m.gflops = e.gflops;
      ++sum.correct;
    } else {
      m.status = t4 ? status_of_invalidity(e.failure) : status_of_error(e.failure);
      m.reason = (t4 ? "T4: " : "Kernel Tuner: ") + e.failure;
      ++sum.failed;
    }
    m.compile_ms = e.compile_ms;
    std::int64_t mid = store.add_measurement(m);
    ++sum.measurements;
    if (m.status == Status::kCorrect && (best_id == 0 || *m.time_ms < sum.best_ms))
      best_id = mid, sum.best_ms = *m.time_ms, sum.best_key = key;
  }
  if (best_id) store.offer_winner(context_id, best_id);
  store.update_run_progress(sum.run_id, sum.measurements);
  store.finish_run(sum.run_id, RunStatus::kImported, "imported from " + path);
  t.commit();
  return sum;
}

namespace {

/// One tuning problem of an export: a kernel in a context (label) on a device, and its rows.
struct T4Problem {
  std::string kernel, context, device;
  json problem_size;
  std::set<std::int64_t> runs;
  std::vector<const MeasurementRow*> rows;  // the store's order: fastest correct first
};

/// "run 3" or "the database"; what an export error says it looked at.
std::string export_scope(std::int64_t run_id) {
  return run_id ? "run " + std::to_string(run_id) : std::string("the database");
}

/// The tuning problems listed one per line, each with the options that export it alone.
std::string list_problems(const std::vector<const T4Problem*>& problems) {
  std::set<std::string> kernels;  // --kernel is needed where several kernels are listed
  for (const T4Problem* p : problems) kernels.insert(p->kernel);
  std::string out;
  for (const T4Problem* pp : problems) {
    const T4Problem& p = *pp;
    std::string runs;
    for (std::int64_t r : p.runs) runs += (runs.empty() ? "" : ", ") + std::to_string(r);
    out += "\n  --context " + p.context + (kernels.size() > 1 ? " --kernel " + p.kernel : "") +
           ": " + p.kernel + " on " + p.device + ", problem size " + p.problem_size.dump() + ", " +
           std::to_string(p.rows.size()) + " result" + (p.rows.size() == 1 ? "" : "s") + " (run" +
           (p.runs.size() == 1 ? " " : "s ") + runs + ")";
  }
  return out;
}

}  // namespace

std::string export_t4(Store& store, std::int64_t run_id, const std::string& context,
                      const std::string& kernel) {
  // The timed measurements by tuning problem (each context read once).
  std::map<std::int64_t, T4Problem*> of_context;
  std::map<std::tuple<std::string, std::string, std::string>, T4Problem> problems;
  const std::vector<MeasurementRow> rows = store.measurements(run_id);
  for (const MeasurementRow& m : rows) {
    if (m.status == Status::kCompiled)
      continue;  // compiled and inspected, never timed: not a T4 result
    T4Problem*& p = of_context[m.context_id];
    if (!p) {
      T4Problem q;
      if (const auto c = store.context(m.context_id)) {
        q.kernel = c->kernel, q.context = c->label, q.device = c->device;
        q.problem_size = json::parse(c->problem_size_json, nullptr, false);
        if (q.problem_size.is_discarded()) q.problem_size = c->problem_size_json;
      }
      p = &problems.try_emplace({q.kernel, q.context, q.device}, std::move(q)).first->second;
    }
    p->runs.insert(m.run_id);
    p->rows.push_back(&m);
  }
  std::vector<const T4Problem*> all;
  for (const auto& [key, p] : problems) all.push_back(&p);
  std::vector<const T4Problem*> chosen;
  for (const T4Problem* p : all)
    if ((context.empty() || p->context == context) && (kernel.empty() || p->kernel == kernel))
      chosen.push_back(p);
  if (chosen.empty() && (!context.empty() || !kernel.empty()))
    throw std::invalid_argument(
        "no timed measurement of " + export_scope(run_id) + " matches" +
        (context.empty() ? "" : " --context " + context) +
        (kernel.empty() ? "" : " --kernel " + kernel) +
        (all.empty() ? std::string(" (it holds none)")
                     : "; what it holds, with the options that export each:" + list_problems(all)));
  if (chosen.size() > 1) {
    std::set<std::pair<std::string, std::string>> named;  // (kernel, label): devices aside
    for (const T4Problem* p : chosen) named.emplace(p->kernel, p->context);
    throw std::invalid_argument(
        export_scope(run_id) + " measured " + std::to_string(chosen.size()) +
        " tuning problems, and a T4 file holds one (their configurations would mix): " +
        (named.size() < chosen.size()
             ? "pick one with the options below, and with --run N where the same problem was "
               "measured on several devices:"
             : "pick one with the options below:") +
        list_problems(chosen));
  }
  // Ordered: a configuration lists its parameters in the job's order, as the store keeps them.
  using ordered = nlohmann::ordered_json;
  ordered results = ordered::array();
  std::vector<std::string> parameters;  // the names, in that order
  for (const MeasurementRow* mp :
       chosen.empty() ? std::vector<const MeasurementRow*>{} : chosen.front()->rows) {
    const MeasurementRow& m = *mp;
    ordered r;
    r["timestamp"] = m.created_at;
    r["configuration"] = ordered::parse(m.params_json);
    if (parameters.empty())
      for (const auto& [name, value] : r["configuration"].items()) parameters.push_back(name);
    json times = {{"runtimes", m.samples_ms}};
    if (m.compile_ms) times["compilation_time"] = *m.compile_ms;
    r["times"] = times;
    bool ok = m.status == Status::kCorrect;
    r["invalidity"] = m.status;
    r["correctness"] = ok ? 1 : 0;
    json meas = json::array();
    if (m.time_ms) meas.push_back({{"name", "time"}, {"value", *m.time_ms}, {"unit", "ms"}});
    if (m.gflops) meas.push_back({{"name", "GFLOP/s"}, {"value", *m.gflops}, {"unit", "GFLOP/s"}});
    if (m.gbps) meas.push_back({{"name", "GB/s"}, {"value", *m.gbps}, {"unit", "GB/s"}});
    if (m.registers) meas.push_back({{"name", "registers"}, {"value", *m.registers}, {"unit", ""}});
    if (!m.reason.empty()) meas.push_back({{"name", "reason"}, {"value", m.reason}, {"unit", ""}});
    r["measurements"] = meas;
    r["objectives"] = json::array({"time"});
    results.push_back(std::move(r));
  }
  json devices = json::array();
  for (auto& d : store.devices(run_id))
    if (chosen.empty() || d.name == chosen.front()->device)
      devices.push_back(
          {{"name", d.name},
           {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
           {"multiprocessors", d.sm_count},
           {"total_memory_bytes", d.total_mem},
           {"source", d.source}});
  struct utsname u {};
  std::string os =
      uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown";
  json problem = json::object();  // which tuning problem this is (none: nothing was timed)
  if (!chosen.empty()) {
    const T4Problem& p = *chosen.front();
    problem = {{"kernel", p.kernel},
               {"context", p.context},
               {"device", p.device},
               {"problem_size", p.problem_size},
               {"parameters", parameters},
               {"runs", json(std::vector<std::int64_t>(p.runs.begin(), p.runs.end()))}};
  }
  ordered doc = {
      {"schema_version", "1.0.0"},
      {"metadata",
       {{"timeunit", "milliseconds"},
        {"generator", "gputune"},
        {"gputune", problem},
        {"hardware", {{"operating_system", os}, {"hardware_description", json::array()}}},
        {"environment",
         {{"device_query", {{"devices", devices}}}, {"requirements", json::array()}}}}},
      {"results", results}};
  return doc.dump(1);
}

}  // namespace gputune::db
