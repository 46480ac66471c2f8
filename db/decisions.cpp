/** \file db/decisions.cpp
 * Owns: the queries behind tuned_kernels (db/decisions.h). */
#include "db/decisions.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "db/sqlite.h"

namespace gputune::db {

namespace {

struct ContextDetails {
  std::string problem_size_json, values_json, arch, device;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
};

ContextDetails context_details(Database& db, std::int64_t context_id) {
  Statement s(db,
              "SELECT c.problem_size, c.input_values, c.arch, d.name, d.cc_major, d.cc_minor, "
              "d.sm_count FROM contexts c JOIN devices d ON d.id=c.device_id WHERE c.id=?");
  s.bind(1, context_id);
  ContextDetails out;
  if (s.step()) {
    out.problem_size_json = s.text(0), out.values_json = s.text(1), out.arch = s.text(2);
    out.device = s.text(3);
    out.cc_major = static_cast<int>(s.int64(4)), out.cc_minor = static_cast<int>(s.int64(5));
    out.sm_count = static_cast<int>(s.int64(6));
  }
  return out;
}

std::string kernel_source(Database& db, const std::string& hash) {
  Statement s(db, "SELECT coalesce(source,'') FROM kernels WHERE hash=?");
  s.bind(1, hash);
  return s.step() ? s.text(0) : "";
}

/// Fastest correct time per configuration in a context, and each configuration's parameters.
void times_in(Database& db, std::int64_t context_id, std::map<std::string, double>& times,
              std::map<std::string, std::string>& params) {
  Statement s(db,
              "SELECT v.config_key, v.params, min(m.time_ms) FROM correct_measurements m "
              "JOIN variants v ON v.id=m.variant_id WHERE m.context_id=? GROUP BY v.id");
  s.bind(1, context_id);
  while (s.step()) {
    const std::string key = s.text(0);
    const double t = s.real(2);
    auto [it, fresh] = times.emplace(key, t);
    if (!fresh) it->second = std::min(it->second, t);
    params.emplace(key, s.text(1));
  }
}

/// A context's winner: its row in `winners`, else (a run stopped before naming one) its fastest
/// correct measurement, marked provisional.
struct ContextWinner {
  std::int64_t context_id = 0, measurement_id = 0, run_id = 0;
  std::string kernel, hash, device, label, config_key, params_json;
  double time_ms = 0;
  bool provisional = false;
};

std::vector<ContextWinner> context_winners(Database& db, const std::string& kernel) {
  Statement s(db,
              "SELECT c.id, k.name, k.hash, d.name, c.label, m.id, m.run_id, m.time_ms, "
              "v.config_key, v.params, coalesce(w.provisional, 1) "
              "FROM contexts c JOIN kernels k ON k.id=c.kernel_id JOIN devices d ON "
              "d.id=c.device_id LEFT JOIN winners w ON w.context_id=c.id "
              "JOIN measurements m ON m.id=coalesce(w.measurement_id, (SELECT f.id FROM "
              "correct_measurements f WHERE f.context_id=c.id ORDER BY f.time_ms, f.id LIMIT 1)) "
              "JOIN variants v ON v.id=m.variant_id "
              "WHERE ?1='' OR k.name=?1 OR k.hash LIKE ?1 || '%' ORDER BY c.id");
  s.bind(1, kernel);
  std::vector<ContextWinner> out;
  while (s.step()) {
    ContextWinner w;
    w.context_id = s.int64(0), w.kernel = s.text(1), w.hash = s.text(2), w.device = s.text(3);
    w.label = s.text(4), w.measurement_id = s.int64(5), w.run_id = s.int64(6);
    w.time_ms = s.real(7), w.config_key = s.text(8), w.params_json = s.text(9);
    w.provisional = s.int64(10) != 0;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

std::vector<TunedKernel> tuned_kernels(Store& store, const std::string& kernel) {
  const std::vector<ContextWinner> all = context_winners(store.db(), kernel);
  // Per kernel name: the newest source version is the one whose winner was stored last.
  std::map<std::string, const ContextWinner*> newest;
  for (const ContextWinner& w : all) {
    const ContextWinner*& slot = newest[w.kernel];
    if (!slot || slot->measurement_id < w.measurement_id) slot = &w;
  }
  std::vector<TunedKernel> out;
  for (const auto& [name, top] : newest) {
    TunedKernel k;
    k.name = name, k.hash = top->hash;
    k.source = kernel_source(store.db(), k.hash);
    k.job_document = store.run_job_document(top->run_id);
    const auto order = nlohmann::ordered_json::parse(top->params_json, nullptr, false);
    if (order.is_object())
      for (const auto& [param, value] : order.items()) k.parameters.push_back(param);
    // The latest winner per device and label.
    std::map<std::string, std::map<std::string, const ContextWinner*>> by_device;
    for (const ContextWinner& w : all) {
      if (w.kernel != name) continue;
      if (w.hash != k.hash) {
        ++k.older_contexts;
        continue;
      }
      const ContextWinner*& slot = by_device[w.device][w.label];
      if (!slot || slot->measurement_id < w.measurement_id) slot = &w;
    }
    for (const auto& [device, contexts] : by_device) {
      TunedDevice d;
      d.name = device;
      for (const auto& [label, w] : contexts) {
        const ContextDetails c = context_details(store.db(), w->context_id);
        d.arch = c.arch, d.cc_major = c.cc_major, d.cc_minor = c.cc_minor;
        d.sm_count = c.sm_count;
        TunedContext t;
        t.id = w->context_id, t.label = label;
        t.problem_size_json = c.problem_size_json, t.values_json = c.values_json;
        t.winner_key = w->config_key, t.best_ms = w->time_ms, t.run_id = w->run_id;
        t.provisional = w->provisional;
        times_in(store.db(), w->context_id, t.times_ms, k.params_json);
        k.params_json.emplace(w->config_key, w->params_json);
        t.times_ms.emplace(w->config_key, w->time_ms);
        d.contexts.push_back(std::move(t));
      }
      k.devices.push_back(std::move(d));
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace gputune::db
