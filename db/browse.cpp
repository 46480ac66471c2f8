#include "db/browse.h"

#include <algorithm>
#include <map>

namespace gputune::db {

using nlohmann::json;

namespace {

json opt_real(Statement& s, int c) { return s.is_null(c) ? json(nullptr) : json(s.real(c)); }
json opt_int(Statement& s, int c) { return s.is_null(c) ? json(nullptr) : json(s.int64(c)); }

json run_json(const RunRow& r) {
  return {{"id", r.id},
          {"uid", r.uid},
          {"job", r.job_name},
          {"job_file", r.job_file},
          {"status", r.status},
          {"message", r.message},
          {"strategy", r.strategy},
          {"started_at", r.started_at},
          {"finished_at", r.finished_at},
          {"total", r.total},
          {"done", r.done},
          {"budget", r.budget ? json(*r.budget) : json(nullptr)},
          {"seconds_spent", r.seconds_spent ? json(*r.seconds_spent) : json(nullptr)},
          {"naive_fallback", r.naive_fallback},
          {"notes", r.notes}};
}

}  // namespace

json queue_item_json(const QueueItem& q) {
  return {{"id", q.id},
          {"uid", q.uid},
          {"name", q.name},
          {"job_file", q.job_file},
          {"status", q.status},
          {"cancel_requested", q.cancel_requested},
          {"run_id", q.run_id ? json(*q.run_id) : json(nullptr)},
          {"worker", q.worker},
          {"attempts", q.attempts},
          {"message", q.message},
          {"submitted_at", q.submitted_at},
          {"started_at", q.started_at},
          {"finished_at", q.finished_at}};
}

json Browser::devices() {
  Statement s(
      s_.db(),
      "SELECT d.id, d.name, d.cc_major, d.cc_minor, d.sm_count, d.total_mem, d.source, "
      "(SELECT count(*) FROM contexts c WHERE c.device_id=d.id) FROM devices d ORDER BY d.id");
  json out = json::array();
  while (s.step())
    out.push_back(
        {{"id", s.int64(0)},
         {"name", s.text(1)},
         {"compute_capability", std::to_string(s.int64(2)) + "." + std::to_string(s.int64(3))},
         {"sm_count", s.int64(4)},
         {"total_mem", s.int64(5)},
         {"source", s.text(6)},
         {"contexts", s.int64(7)}});
  return out;
}

json Browser::kernels() {
  Statement s(
      s_.db(),
      "SELECT k.id, k.name, k.hash, (SELECT count(*) FROM contexts c WHERE c.kernel_id=k.id), "
      "k.variant_count, "  // kept by triggers (schema migration 12)
      "(SELECT count(*) FROM winners w JOIN contexts c ON c.id=w.context_id WHERE "
      "c.kernel_id=k.id) "
      "FROM kernels k ORDER BY k.name, k.id");
  json out = json::array();
  while (s.step())
    out.push_back({{"id", s.int64(0)},
                   {"name", s.text(1)},
                   {"hash", s.text(2)},
                   {"contexts", s.int64(3)},
                   {"variants", s.int64(4)},
                   {"winners", s.int64(5)}});
  return out;
}

std::optional<json> Browser::kernel(std::int64_t id) {
  Statement k(s_.db(), "SELECT id, name, hash FROM kernels WHERE id=?");
  k.bind(1, id);
  if (!k.step()) return std::nullopt;
  json out = {{"id", k.int64(0)}, {"name", k.text(1)}, {"hash", k.text(2)}};
  Statement s(
      s_.db(),
      "SELECT c.id, c.label, d.id, d.name, c.arch, c.toolkit_version, m.time_ms, v.params, "
      "m.run_id, "
      "(SELECT min(d2.time_ms) FROM measurements d2 INDEXED BY measurements_default "
      " WHERE d2.context_id=c.id AND d2.is_default=1 AND d2.status='correct'), m.gflops, m.gbps, "
      "v.config_key, r.naive_fallback, j.file, j.document "
      "FROM contexts c JOIN devices d ON d.id=c.device_id "
      "LEFT JOIN winners w ON w.context_id=c.id LEFT JOIN measurements m ON m.id=w.measurement_id "
      "LEFT JOIN variants v ON v.id=m.variant_id LEFT JOIN runs r ON r.id=m.run_id "
      "LEFT JOIN jobs j ON j.id=r.job_id WHERE c.kernel_id=? ORDER BY c.label, d.name");
  s.bind(1, id);
  json rows = json::array();
  while (s.step()) {
    json r = {
        {"context_id", s.int64(0)},  {"context", s.text(1)},    {"device_id", s.int64(2)},
        {"device", s.text(3)},       {"arch", s.text(4)},       {"toolkit", s.text(5)},
        {"time_ms", opt_real(s, 6)}, {"run_id", opt_int(s, 8)}, {"default_ms", opt_real(s, 9)},
        {"gflops", opt_real(s, 10)}, {"gbps", opt_real(s, 11)}};
    r["configuration"] = s.is_null(7) ? json(nullptr) : json::parse(s.text(7));
    r["speedup"] = (!s.is_null(6) && !s.is_null(9) && s.real(6) > 0) ? json(s.real(9) / s.real(6))
                                                                     : json(nullptr);
    const std::string fallback = s.is_null(13) ? "" : s.text(13);
    r["naive_fallback"] = fallback.empty() ? json(nullptr) : json(fallback);
    r["source_command"] = nullptr;
    if (source_command_ && fallback.empty() && !s.is_null(12) && !s.is_null(15))
      if (auto cmd = source_command_(s.text(15), s.text(14), s.text(12)))
        r["source_command"] = *cmd;
    rows.push_back(std::move(r));
  }
  out["contexts"] = rows;
  return out;
}

json Browser::runs(int limit, std::int64_t offset) {
  if (limit < 1 || limit > 1000) throw QueryError("limit", "limit must be between 1 and 1000");
  if (offset < 0) throw QueryError("offset", "offset must be >= 0");
  Statement s(s_.db(),
              "SELECT r.id, r.uid, j.name, j.file, r.status, r.message, r.strategy, r.started_at, "
              "coalesce(r.finished_at,''), r.total, r.done, "
              "(SELECT min(b.time_ms) FROM run_bests b WHERE b.run_id=r.id), "
              "r.budget, r.seconds_spent, r.naive_fallback "
              "FROM runs r JOIN jobs j ON j.id=r.job_id ORDER BY r.id DESC LIMIT ? OFFSET ?");
  s.bind(1, limit).bind(2, offset);
  json out = json::array();
  while (s.step()) {
    RunRow r;
    r.id = s.int64(0), r.uid = s.text(1), r.job_name = s.text(2), r.job_file = s.text(3),
    r.status = run_status_of(s.text(4));
    r.message = s.text(5), r.strategy = s.text(6), r.started_at = s.text(7),
    r.finished_at = s.text(8);
    r.total = s.int64(9), r.done = s.int64(10);
    if (!s.is_null(12)) r.budget = s.int64(12);
    if (!s.is_null(13)) r.seconds_spent = s.real(13);
    r.naive_fallback = s.text(14);
    json j = run_json(r);
    j["best_ms"] = opt_real(s, 11);
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<json> Browser::run(std::int64_t id) {
  auto r = s_.run(id);
  if (!r) return std::nullopt;
  json out = run_json(*r);
  Statement c(s_.db(),
              "SELECT status, sum(n) FROM measurement_counts WHERE run_id=? GROUP BY status");
  c.bind(1, id);
  json counts = json::object();
  while (c.step()) counts[c.text(0)] = c.int64(1);
  out["counts"] = counts;
  // What the model's search of a space too large to analyse whole planned (db::RunPlan).
  const auto plan = s_.run_plan(id);
  out["model_search"] = plan && plan->searched ? json(plan->summary) : json(nullptr);
  Statement ctx(
      s_.db(),
      "SELECT c.id, c.label, d.name, (SELECT b.time_ms FROM run_bests b WHERE b.run_id=?1 "
      "AND b.context_id=c.id), k.name, k.id FROM contexts c "
      "JOIN devices d ON d.id=c.device_id JOIN kernels k ON k.id=c.kernel_id "
      "WHERE c.id IN (SELECT DISTINCT context_id FROM measurement_counts WHERE run_id=?1) ORDER BY "
      "c.id");
  ctx.bind(1, id);
  json contexts = json::array();
  while (ctx.step()) {
    contexts.push_back({{"id", ctx.int64(0)},
                        {"label", ctx.text(1)},
                        {"device", ctx.text(2)},
                        {"best_ms", opt_real(ctx, 3)}});
    out["kernel"] = ctx.text(4);
    out["kernel_id"] = ctx.int64(5);
  }
  out["contexts"] = contexts;
  Statement q(s_.db(), "SELECT id FROM queue WHERE run_id=? ORDER BY id DESC LIMIT 1");
  q.bind(1, id);
  if (q.step()) {
    auto item = s_.queue_item(q.int64(0));
    if (item) out["queue"] = queue_item_json(*item);
  }
  return out;
}

json Browser::measurements(const MeasurementQuery& q) {
  static const std::map<std::string, std::string> sortable = {
      {"time_ms", "m.time_ms"},       {"registers", "m.registers"}, {"occupancy", "m.occupancy"},
      {"compile_ms", "m.compile_ms"}, {"status", "m.status"},       {"id", "m.id"}};
  auto col = sortable.find(q.sort);
  if (col == sortable.end())
    throw QueryError("sort", "cannot sort by '" + q.sort +
                                 "' (use time_ms, registers, occupancy, compile_ms, status or id)");
  if (q.limit < 1 || q.limit > 1000) throw QueryError("limit", "limit must be between 1 and 1000");
  if (q.offset < 0) throw QueryError("offset", "offset must be >= 0");
  if (!q.status.empty() && !Status::parse(q.status))
    throw QueryError("status", "unknown status '" + q.status + "'");
  // Only the active filters go into the SQL, so SQLite can pick the index for each combination.
  std::string where = "WHERE m.run_id=?1";
  if (q.context_id) where += " AND m.context_id=?2";
  if (!q.status.empty()) where += " AND m.status=?3";
  if (!q.search.empty()) where += " AND instr(v.config_key, ?4) > 0";
  std::string dir = q.descending ? " DESC" : " ASC";
  std::string order = " ORDER BY " + col->second + dir + " NULLS LAST, m.id" + dir;
  // The page's ids come from the index alone (rows skipped by OFFSET are never built); only the
  // page's rows are then joined and read.
  Statement s(
      s_.db(),
      "SELECT m.id, m.context_id, c.label, v.config_key, v.params, m.status, m.reason, m.time_ms, "
      "m.registers, m.static_smem, m.local_bytes, m.spill_bytes, m.occupancy, m.gflops, m.gbps, "
      "m.compile_ms, m.grid, m.block, m.predicted_ms, m.is_default, m.created_at, "
      "json_array_length(m.samples) "
      "FROM (SELECT m.id FROM measurements m " +
          std::string(q.search.empty() ? "" : "JOIN variants v ON v.id=m.variant_id ") + where +
          order +
          " LIMIT ?5 OFFSET ?6) page JOIN measurements m ON m.id=page.id "
          "JOIN variants v ON v.id=m.variant_id JOIN contexts c ON c.id=m.context_id" +
          order);
  auto bind_filters = [&](Statement& st) {
    st.bind(1, q.run_id);
    if (q.context_id) st.bind(2, q.context_id);
    if (!q.status.empty()) st.bind(3, q.status);
    if (!q.search.empty()) st.bind(4, q.search);
  };
  bind_filters(s);
  s.bind(5, q.limit).bind(6, q.offset);
  json items = json::array();
  while (s.step())
    items.push_back({{"id", s.int64(0)},
                     {"context_id", s.int64(1)},
                     {"context", s.text(2)},
                     {"key", s.text(3)},
                     {"configuration", json::parse(s.text(4))},
                     {"status", s.text(5)},
                     {"reason", s.text(6)},
                     {"time_ms", opt_real(s, 7)},
                     {"registers", opt_int(s, 8)},
                     {"static_smem", opt_int(s, 9)},
                     {"local_bytes", opt_int(s, 10)},
                     {"spill_bytes", opt_int(s, 11)},
                     {"occupancy", opt_real(s, 12)},
                     {"gflops", opt_real(s, 13)},
                     {"gbps", opt_real(s, 14)},
                     {"compile_ms", opt_real(s, 15)},
                     {"grid", s.text(16)},
                     {"block", s.text(17)},
                     {"predicted_ms", opt_real(s, 18)},
                     {"is_default", s.int64(19) != 0},
                     {"created_at", s.text(20)},
                     {"samples", s.int64(21)}});
  // Totals without a search come from the trigger-maintained counts; a search counts rows.
  std::int64_t total = 0;
  if (q.search.empty()) {
    std::string cw = "WHERE run_id=?1";
    if (q.context_id) cw += " AND context_id=?2";
    if (!q.status.empty()) cw += " AND status=?3";
    Statement c(s_.db(), "SELECT coalesce(sum(n),0) FROM measurement_counts " + cw);
    bind_filters(c);
    c.step();
    total = c.int64(0);
  } else {
    Statement c(
        s_.db(),
        "SELECT count(*) FROM measurements m JOIN variants v ON v.id=m.variant_id " + where);
    bind_filters(c);
    c.step();
    total = c.int64(0);
  }
  return {{"total", total},
          {"offset", q.offset},
          {"limit", q.limit},
          {"sort", q.sort},
          {"order", q.descending ? "desc" : "asc"},
          {"items", items}};
}

std::int64_t Browser::run_version(std::int64_t run_id) {
  Statement s(s_.db(), "SELECT coalesce(max(max_id),0) FROM measurement_counts WHERE run_id=?");
  s.bind(1, run_id);
  s.step();
  return s.int64(0);
}

std::int64_t Browser::measurements_version() {
  Statement s(s_.db(), "SELECT coalesce(max(max_id),0) FROM measurement_counts");
  s.step();
  return s.int64(0);
}

json Browser::best_over_time(std::int64_t run_id) {
  Statement s(s_.db(),
              "SELECT m.id, m.created_at, m.time_ms, m.context_id FROM correct_measurements m "
              "WHERE m.run_id=? ORDER BY m.id");
  s.bind(1, run_id);
  json out = json::array();
  std::map<std::int64_t, double> best;  // per context
  std::int64_t n = 0;
  while (s.step()) {
    ++n;
    std::int64_t ctx = s.int64(3);
    double t = s.real(2);
    auto it = best.find(ctx);
    if (it == best.end() || t < it->second) {
      best[ctx] = t;
      out.push_back({{"index", n}, {"at", s.text(1)}, {"context_id", ctx}, {"best_ms", t}});
    }
  }
  return out;
}

json Browser::parameter_effects(std::int64_t run_id, std::int64_t context_id) {
  // At most 20,000 rows are read (a sample of very large runs, taken evenly by id).
  Statement n(s_.db(),
              "SELECT count(*) FROM correct_measurements WHERE run_id=?1 AND (?2=0 OR "
              "context_id=?2)");
  n.bind(1, run_id).bind(2, context_id);
  n.step();
  std::int64_t total = n.int64(0), step = std::max<std::int64_t>(1, total / 20000);
  Statement s(
      s_.db(),
      "SELECT v.params, m.time_ms FROM correct_measurements m JOIN variants v ON "
      "v.id=m.variant_id WHERE m.run_id=?1 AND (?2=0 OR m.context_id=?2) AND m.id % ?3 = 0");
  s.bind(1, run_id).bind(2, context_id).bind(3, step);
  std::map<std::string, std::map<std::string, std::vector<double>>> by;  // param -> value -> times
  std::vector<std::string> order;
  while (s.step()) {
    json p = json::parse(s.text(0));
    double t = s.real(1);
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (!by.count(it.key())) order.push_back(it.key());
      by[it.key()][it.value().dump()].push_back(t);
    }
  }
  json out = json::array();
  for (auto& name : order) {
    json values = json::array();
    for (auto& [value, times] : by[name]) {
      std::sort(times.begin(), times.end());
      values.push_back({{"value", json::parse(value)},
                        {"count", times.size()},
                        {"best_ms", times.front()},
                        {"median_ms", times[times.size() / 2]}});
    }
    std::sort(values.begin(), values.end(),
              [](const json& a, const json& b) { return a["value"] < b["value"]; });
    out.push_back({{"parameter", name}, {"values", values}});
  }
  return {{"sampled_every", step}, {"parameters", out}};
}

json Browser::predicted_vs_measured(std::int64_t run_id) {
  // At most about 2,000 points (taken evenly by id): enough for a scatter plot a browser draws
  // fast.
  Statement n(
      s_.db(),
      "SELECT coalesce(sum(n),0) FROM measurement_counts WHERE run_id=? AND status='correct'");
  n.bind(1, run_id);
  n.step();
  std::int64_t step = std::max<std::int64_t>(1, n.int64(0) / 2000);
  Statement s(
      s_.db(),
      "SELECT m.predicted_ms, m.time_ms, v.config_key FROM correct_measurements m JOIN variants v "
      "ON v.id=m.variant_id WHERE m.run_id=? AND m.predicted_ms IS NOT NULL AND m.id % ? = 0");
  s.bind(1, run_id).bind(2, step);
  json out = json::array();
  while (s.step())
    out.push_back({{"predicted_ms", s.real(0)}, {"time_ms", s.real(1)}, {"key", s.text(2)}});
  return out;
}

json Browser::winners(int limit) {
  if (limit < 1 || limit > 1000) throw QueryError("limit", "limit must be between 1 and 1000");
  Statement s(
      s_.db(),
      "SELECT k.id, k.name, c.id, c.label, d.name, m.time_ms, v.params, w.updated_at, m.run_id "
      "FROM winners w JOIN contexts c ON c.id=w.context_id JOIN kernels k ON k.id=c.kernel_id "
      "JOIN devices d ON d.id=c.device_id JOIN measurements m ON m.id=w.measurement_id "
      "JOIN variants v ON v.id=m.variant_id ORDER BY w.updated_at DESC LIMIT ?");
  s.bind(1, limit);
  json out = json::array();
  while (s.step())
    out.push_back({{"kernel_id", s.int64(0)},
                   {"kernel", s.text(1)},
                   {"context_id", s.int64(2)},
                   {"context", s.text(3)},
                   {"device", s.text(4)},
                   {"time_ms", s.real(5)},
                   {"configuration", json::parse(s.text(6))},
                   {"updated_at", s.text(7)},
                   {"run_id", s.int64(8)}});
  return out;
}

std::optional<json> Browser::context_history(std::int64_t context_id) {
  Statement c(s_.db(),
              "SELECT c.kernel_id, c.device_id, c.label, k.name, d.name FROM contexts c "
              "JOIN kernels k ON k.id=c.kernel_id JOIN devices d ON d.id=c.device_id WHERE c.id=?");
  c.bind(1, context_id);
  if (!c.step()) return std::nullopt;
  const std::string label = c.text(2);
  json out = {
      {"context_id", context_id}, {"context", label}, {"kernel", c.text(3)}, {"device", c.text(4)}};
  // Each run's best in each matching context (run_bests: from the counts table's key and the
  // (run, context, status, time) index).
  Statement s(s_.db(),
              "SELECT b.run_id, r.started_at, r.status, b.time_ms FROM run_bests b "
              "JOIN contexts c ON c.id=b.context_id JOIN runs r ON r.id=b.run_id "
              "WHERE c.kernel_id=? AND c.device_id=? AND c.label=? ORDER BY b.run_id");
  s.bind(1, c.int64(0)).bind(2, c.int64(1)).bind(3, label);
  json points = json::array();
  while (s.step())
    points.push_back({{"run_id", s.int64(0)},
                      {"started_at", s.text(1)},
                      {"best_ms", s.real(3)},
                      {"status", s.text(2)}});
  out["runs"] = points;
  return out;
}

json Browser::queue(int limit) {
  if (limit < 1 || limit > 1000) throw QueryError("limit", "limit must be between 1 and 1000");
  json out = json::array();
  for (auto& q : s_.queue(limit)) out.push_back(queue_item_json(q));
  return out;
}

}  // namespace gputune::db
