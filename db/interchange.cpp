#include "db/interchange.h"

#include <sys/utsname.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

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

namespace {

/// Kernel Tuner keys configurations by Python's str() of each value.
std::string kt_key_text(const json& v) { return json_to_value(v).str(); }

std::string status_of_error(const std::string& e) {
  if (e == "CompilationFailedConfig") return "compile";
  if (e == "RuntimeFailedConfig") return "runtime";
  if (e == "InvalidConfig") return "constraints";
  return "runtime";
}

}  // namespace

ImportSummary import_kernel_tuner_cache(Store& store, const std::string& path) {
  std::string text = read_maybe_gzip(path);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  auto need = [&](const char* key) -> const json& {
    if (!doc.contains(key))
      throw std::runtime_error(path + ": field '" + key +
                               "' is missing: not a Kernel Tuner cache file");
    return doc[key];
  };
  ImportSummary sum;
  sum.kernel = need("kernel_name").get<std::string>();
  sum.device = need("device_name").get<std::string>();
  const json& keys = need("tune_params_keys");
  const json& cache = need("cache");
  if (!cache.is_object()) throw std::runtime_error(path + ": field 'cache' is not an object");
  json ps = doc.value("problem_size", json::array({1}));
  if (!ps.is_array()) ps = json::array({ps});
  while (ps.size() < 3) ps.push_back(1);
  for (size_t i = 0; i < ps.size(); ++i) sum.context += (i ? "x" : "") + kt_key_text(ps[i]);

  Transaction t(store.db());
  DeviceRecord dev;
  dev.name = sum.device;
  dev.source = "import";
  std::int64_t device_id = store.upsert_device(dev);
  std::string kernel_hash = sha256_hex("kernel-tuner-import|" + sum.kernel + "|" + keys.dump());
  std::int64_t kernel_id = store.upsert_kernel(sum.kernel, kernel_hash, "");
  json header = doc;
  header.erase("cache");
  std::int64_t job_id = store.upsert_job(sum.kernel, path, header.dump());
  ContextRecord ctx;
  ctx.kernel_id = kernel_id, ctx.device_id = device_id, ctx.label = sum.context;
  ctx.problem_size_json = ps.dump();
  ctx.arch = "";
  std::int64_t context_id = store.upsert_context(ctx);
  sum.run_id = store.begin_run(job_id, "import", static_cast<std::int64_t>(cache.size()));

  std::int64_t best_id = 0;
  sum.best_ms = 0;
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    const json& e = it.value();
    json params = json::object();
    std::string key;
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string k = keys[i].get<std::string>();
      if (!e.contains(k))
        throw std::runtime_error(path + ": cache entry '" + it.key() + "' lacks parameter '" + k +
                                 "'");
      params[k] = e[k];
      key += (i ? "," : "") + kt_key_text(e[k]);
    }
    std::int64_t variant_id = store.upsert_variant(kernel_id, key, params.dump());
    MeasurementRecord m;
    m.run_id = sum.run_id, m.context_id = context_id, m.variant_id = variant_id;
    if (!e.contains("time"))
      throw std::runtime_error(path + ": cache entry '" + it.key() + "' has no 'time'");
    if (e["time"].is_number()) {
      m.status = "correct";
      m.time_ms = e["time"].get<double>();
      if (e.contains("times") && e["times"].is_array())
        for (auto& x : e["times"]) m.samples_ms.push_back(x.get<double>());
      if (e.contains("GB/s") && e["GB/s"].is_number()) m.gbps = e["GB/s"].get<double>();
      if (e.contains("GFLOP/s") && e["GFLOP/s"].is_number()) m.gflops = e["GFLOP/s"].get<double>();
      ++sum.correct;
    } else {
      std::string err = e["time"].is_string() ? e["time"].get<std::string>() : e["time"].dump();
      m.status = status_of_error(err);
      m.reason = "Kernel Tuner: " + err;
      ++sum.failed;
    }
    if (e.contains("compile_time") && e["compile_time"].is_number())
      m.compile_ms = e["compile_time"].get<double>();
    std::int64_t mid = store.add_measurement(m);
    ++sum.measurements;
    if (m.status == "correct" && (best_id == 0 || *m.time_ms < sum.best_ms))
      best_id = mid, sum.best_ms = *m.time_ms, sum.best_key = key;
  }
  if (best_id) store.offer_winner(context_id, best_id);
  store.update_run_progress(sum.run_id, sum.measurements);
  store.finish_run(sum.run_id, "imported", "imported from " + path);
  t.commit();
  return sum;
}

std::string export_t4(Store& store, std::int64_t run_id) {
  json results = json::array();
  for (auto& m : store.measurements(run_id)) {
    if (m.status == "compiled") continue;  // compiled and inspected, never timed: not a T4 result
    json r;
    r["timestamp"] = m.created_at;
    r["configuration"] = json::parse(m.params_json);
    json times = {{"runtimes", m.samples_ms}};
    if (m.compile_ms) times["compilation_time"] = *m.compile_ms;
    r["times"] = times;
    bool ok = m.status == "correct";
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
    devices.push_back(
        {{"name", d.name},
         {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
         {"multiprocessors", d.sm_count},
         {"total_memory_bytes", d.total_mem},
         {"source", d.source}});
  struct utsname u {};
  std::string os =
      uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown";
  json doc = {{"schema_version", "1.0.0"},
              {"metadata",
               {{"timeunit", "milliseconds"},
                {"generator", "gputune"},
                {"hardware", {{"operating_system", os}, {"hardware_description", json::array()}}},
                {"environment",
                 {{"device_query", {{"devices", devices}}}, {"requirements", json::array()}}}}},
              {"results", results}};
  return doc.dump(1);
}

}  // namespace gputune::db
