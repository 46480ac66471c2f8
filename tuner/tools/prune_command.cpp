#include "tuner/tools/prune_command.h"

#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cuda/driver.h"
#include "db/store.h"
#include "pruner/device_spec.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/measure/arguments.h"
#include "tuner/measure/device_info.h"
#include "tuner/model/compile_screen.h"
#include "tuner/model/predict.h"
#include "tuner/model/space_search.h"
#include "tuner/run/measurement_row.h"
#include "tuner/run/pipeline.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

namespace {

/// One `gputune prune`, in the steps prune_job takes in order: each fills what the next reads.
struct PruneJob {
  PruneJob(const Job& j, const PruneRunOptions& opt) : job(j), o(opt) {}

  void describe_device();
  void choose_context();
  void open_database();
  void choose_configs();
  void compile_and_rule();
  void rank_by_model();
  void fill_rows();
  void store_decisions();

  const Job& job;
  const PruneRunOptions& o;
  PruneReport rep;
  std::string source;
  Space space;
  // The device.
  pruner::DeviceLimits limits;
  db::DeviceRecord dr;
  Rates rates;
  std::vector<std::string> spec_names;  // --device: the file's name, key and aliases
  const ContextSpec* ctx = nullptr;
  // The database.
  std::unique_ptr<db::Store> store;
  std::int64_t device_id = 0;
  pruner::Calibration calibration;
  pruner::PruneOptions po;
  // Per configuration ruled on.
  std::vector<Config> configs;
  CompileReport cr;
  ScreenResult screen;
  std::vector<pruner::RuleInput> inputs;
  pruner::PruneResult pr;
  ModelRun model;
};

/// The device: a described one, the one present, or the job's architecture.
void PruneJob::describe_device() {
  if (!o.device.empty()) {
    pruner::DeviceSpec spec = pruner::find_device(o.device);
    spec_names = spec.aliases;
    spec_names.push_back(spec.name);
    spec_names.push_back(spec.key);
    rates = rates_for_spec(spec);
    limits = spec.limits;
    rep.device = spec.name;
    dr.name = spec.name, dr.source = "target";
    dr.total_mem = static_cast<std::int64_t>(spec.memory_gib * (1 << 30));
  } else if (cuda::Driver::instance().available()) {
    DeviceInfo info = job_device(job);
    rates = rates_for_driver(info);
    limits = info.limits;
    rep.device = info.name;
    dr.name = info.name, dr.source = "driver", dr.total_mem = info.total_mem;
  } else {
    std::string arch = job.target_arch.empty() ? "sm_90" : job.target_arch;
    limits = pruner::limits_for_arch(arch);
    rep.device = "target " + arch;
    dr.name = rep.device, dr.source = "target";
    rates.source = "no rates for a bare architecture: pass --device NAME (gputune devices)";
  }
  rep.rates_source = o.model ? rates.source : "";
  dr.cc_major = limits.cc_major, dr.cc_minor = limits.cc_minor, dr.sm_count = limits.sm_count;
  rep.arch = limits.arch();
}

/// The context predicted for: --context, or the job's first.
void PruneJob::choose_context() {
  ctx = &job.contexts.front();
  if (!o.context.empty()) {
    ctx = nullptr;
    std::string known;
    for (auto& c : job.contexts) {
      if (c.name == o.context) ctx = &c;
      known += " " + c.name;
    }
    if (!ctx)
      throw JobError(job.file.string(), "GPUTune.Contexts", "no context '" + o.context + "'",
                     "use one of:" + known);
  }
  rep.context = ctx->name;
}

/// The database: where decisions are stored and the device's calibration comes from; the
/// rules' settings.
void PruneJob::open_database() {
  if (o.store) {
    rep.db_path = !o.db_path.empty()      ? o.db_path
                  : !job.database.empty() ? (job.file.parent_path() / job.database).string()
                                          : db::default_database_path();
    store = std::make_unique<db::Store>(rep.db_path);
    device_id = store->upsert_device(dr);
    if (!o.device.empty()) {
      // A described GPU: what runs on that GPU fitted (their device records carry the driver's
      // name, one of the file's aliases), moved to the file's rates.
      if (auto c = store->latest_calibration_named(spec_names, limits.cc_major, limits.cc_minor,
                                                   limits.sm_count)) {
        calibration = pruner::Calibration::from_json(c->params_json);
        rep.calibration_device = c->device_name;
        if (rates.rates) calibration = pruner::rebased(calibration, *rates.rates);
      }
    } else if (auto c = store->latest_calibration(device_id)) {
      calibration = pruner::Calibration::from_json(*c);
    }
  }
  rep.calibration_samples = calibration.samples;
  rep.margin = o.model_margin.value_or(job.pruner.model_margin);
  po.max_spill_bytes = o.max_spill_bytes.value_or(job.pruner.max_spill_bytes);
}

/// The configurations to rule on: the whole space, or what the model's search of a space too
/// large to compile whole looked at.
void PruneJob::choose_configs() {
  const std::uint64_t analyses = o.model_analyses.value_or(job.model_analyses);
  if (o.model && space.size() > analyses) {
    ModelSearchOptions mo;
    mo.limit = static_cast<std::size_t>(analyses);
    mo.threads = o.threads, mo.progress = o.progress;
    const ModelSearch found = search_by_model(job, source, space, {ctx}, limits, rates, calibration,
                                              cache_for(o.cache_dir), mo);
    rep.model_search = found.summary(space.size(), mo.limit);
    for (size_t i : found.chosen) configs.push_back(space.config(i));
    rep.searched = found.chosen;
    rep.space = std::make_shared<const Space>(space);
  } else {
    for (size_t i = 0; i < space.size(); ++i) configs.push_back(space.config(i));
  }
}

/// Compile: everything, or (--screen) only what rule 4 could keep; then rules 1-3.
void PruneJob::compile_and_rule() {
  if (o.screen && o.model && rates.rates) {
    ScreenOptions so;
    so.margin = rep.margin, so.rules = po, so.threads = o.threads, so.progress = o.progress;
    so.batch = o.screen_batch;
    so.keep_cubins = false;  // prune loads nothing
    screen = compile_screened(job, source, configs, {ctx}, limits, rates, calibration, rep.arch,
                              cache_for(o.cache_dir), so);
    cr = std::move(screen.compile);
    rep.screened = screen.count;
  } else {
    cr = compile_and_inspect(job, source, configs, rep.arch, cache_for(o.cache_dir),
                             o.threads ? o.threads : job.compile_threads, o.progress, {},
                             /*keep_cubins=*/false);
  }
  rep.compile_failed = cr.failed;
  check_arguments_against_cubins(job, configs, cr);
  inputs = rule_inputs(job, configs, *ctx, cr);
  pr = pruner::apply_rules(inputs, limits, po);
}

/// Rule 4: the model ranking.
void PruneJob::rank_by_model() {
  std::vector<bool> usable(configs.size());
  std::vector<pruner::Occupancy> occ(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    usable[i] = inputs[i].inspected;
    occ[i] = pr.decisions[i].occupancy;
  }
  model = run_model(job, source, configs, *ctx,
                    model_arguments(make_arguments(job, *ctx, ArgumentContents::SizesOnly)), usable,
                    occ, rates, calibration, o.threads ? o.threads : job.compile_threads,
                    o.progress, TrafficCache{cache_for(o.cache_dir).dir()});
  rep.analyses_cached = model.analyses_cached;
  rep.predicted = model.predicted;
  rep.not_analysed = model.not_analysed;
  rep.first_analysis_error = model.first_error;
  rep.features = model.features;
  rep.rates = rates.rates;
  rep.calibration = calibration;
  std::size_t removed = pruner::apply_model_rule(pr.decisions, model.predictions, rep.margin);
  pr.counts.push_back({"model", removed + mark_screened(pr.decisions, screen)});
  pr.kept -= removed;
}

/// The report's rows: per configuration, what the rules decided and the model predicted.
void PruneJob::fill_rows() {
  rep.counts = pr.counts;
  rep.kept = pr.kept;
  for (size_t i = 0; i < configs.size(); ++i) {
    PruneRow row;
    row.config = configs[i];
    row.compiled = cr.inspected[i].ok;
    row.decision = pr.decisions[i];
    row.registers = cr.inspected[i].res.registers;
    const auto& res = cr.inspected[i].res;
    row.spill_bytes = res.spill_stores >= 0 ? res.spill_stores + res.spill_loads : 0;
    if (o.model && model.predictions[i].ok) {
      row.predicted_ms = model.predictions[i].ms;
      row.bound = model.predictions[i].bound;
    }
    if (!inputs[i].geometry.empty()) {
      const pruner::Occupancy best = pruner::compute_occupancy(
          pruner::Resources{}, inputs[i].block[0] * inputs[i].block[1] * inputs[i].block[2],
          inputs[i].dynamic_smem, limits);
      if (best.feasible) row.best_case_blocks = best.blocks_per_sm;
    }
    rep.rows.push_back(std::move(row));
  }
}

/// The decisions, stored as a run of their own: one row per configuration, as `run` builds it.
void PruneJob::store_decisions() {
  db::Store& st = *store;
  db::Transaction t(st.db());
  auto job_id = st.upsert_job(job.name, std::filesystem::absolute(job.file).string(), job.document);
  auto kernel_id = st.upsert_kernel(job.kernel_name, kernel_hash(job, source), source);
  rep.run_id = st.begin_run(job_id, "prune", static_cast<std::int64_t>(configs.size()));
  db::ContextRecord c;
  c.kernel_id = kernel_id, c.device_id = device_id, c.label = ctx->name;
  c.problem_size_json = value_to_json(Value(ctx->problem_size)).dump();
  c.arch = rep.arch, c.toolkit_version = "", c.nvrtc_version = cuda::nvrtc_version();
  auto ctx_id = st.upsert_context(c);
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& row = rep.rows[i];
    // The row as `run` builds it (tuner/run/measurement_row.h), with what prune decided.
    Candidate c;
    c.config = configs[i];
    const bool screened = rep.screened && screen.screened[i];
    c.state = screened ? Candidate::Compile::kNot : Candidate::Compile::kDone;
    c.compiled.compile_ms = cr.compiled[i].compile_ms;
    c.compiled.cubin_hash = cr.compiled[i].cubin_hash;
    c.compiled.ok = cr.compiled[i].ok;
    c.inspected = cr.inspected[i];
    Trial tr;
    tr.occupancy = row.decision.occupancy;
    if (o.model && model.predictions[i].ok) tr.prediction = model.predictions[i];
    db::MeasurementRecord m = measurement_row(
        {rep.run_id, ctx_id, st.upsert_variant(kernel_id, configs[i].key(), configs[i].json())}, c,
        tr);
    if (row.compiled) m.occupancy = row.decision.occupancy.occupancy;
    if (screened) {
      m.status = db::Status::kConstraints,
      m.reason = "pruned by rule model: " + row.decision.reason;
    } else if (!row.compiled) {
      m.status = db::Status::kCompile, m.reason = cr.inspected[i].reason,
      m.log = cr.compiled[i].log;
    } else {
      m.status = row.decision.kept ? db::Status::kCompiled : db::Status::kConstraints;
      m.reason = row.decision.kept
                     ? "kept by the pruner"
                     : "pruned by rule " + row.decision.rule + ": " + row.decision.reason;
    }
    st.add_measurement(m);
  }
  if (rep.space) {  // what `show` and the dashboard print as the run's plan
    db::RunPlan plan;
    plan.searched = true, plan.summary = rep.model_search;
    for (const Config& c : configs) plan.chosen.push_back(c.key());
    st.save_run_plan(rep.run_id, plan);
  }
  st.update_run_progress(rep.run_id, static_cast<std::int64_t>(configs.size()));
  st.finish_run(rep.run_id, db::RunStatus::kDone,
                "pruned for " + rep.device + ": kept " + std::to_string(rep.kept) + " of " +
                    std::to_string(configs.size()) +
                    (rep.space ? " the model's search chose of the space's " +
                                     std::to_string(rep.space->size())
                               : std::string()));
  t.commit();
}

}  // namespace

PruneReport prune_job(const Job& job, const PruneRunOptions& o) {
  PruneJob p(job, o);
  p.source = load_kernel_source(job);
  p.space = build_space(job);
  if (p.space.empty())
    throw JobError(job.file.string(), "ConfigurationSpace.Conditions", p.space.explain_empty(),
                   "relax the conditions or widen the parameter values");
  p.rep.space_size = p.space.size();
  p.describe_device();
  p.choose_context();
  p.open_database();
  p.choose_configs();
  p.compile_and_rule();
  if (o.model) p.rank_by_model();
  p.fill_rows();
  if (p.store) p.store_decisions();
  return std::move(p.rep);
}

void print_prune_report(const PruneReport& r, std::ostream& out, bool json) {
  if (json) {
    for (const auto& row : r.rows) {
      nlohmann::json j = {
          {"parameters", nlohmann::json::parse(row.config.json())},
          {"kept", row.decision.kept},
          {"rule",
           row.decision.rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(row.decision.rule)},
          {"reason", row.decision.reason},
          {"predicted_ms",
           row.predicted_ms ? nlohmann::json(*row.predicted_ms) : nlohmann::json(nullptr)},
          {"bound", row.bound.empty() ? nlohmann::json(nullptr) : nlohmann::json(row.bound)},
          {"registers", row.compiled ? nlohmann::json(row.registers) : nlohmann::json(nullptr)},
          {"occupancy", row.compiled ? nlohmann::json(row.decision.occupancy.occupancy)
                                     : nlohmann::json(nullptr)},
          {"spill_bytes",
           row.compiled ? nlohmann::json(row.spill_bytes) : nlohmann::json(nullptr)}};
      if (row.decision.duplicate_of >= 0)
        j["duplicate_of"] = r.rows[static_cast<size_t>(row.decision.duplicate_of)].config.key();
      out << j.dump() << "\n";
    }
    // What the model's search left out: never analysed in full, so removed by the search.
    if (r.space)
      for (size_t i = 0, k = 0; i < r.space->size(); ++i) {
        if (k < r.searched.size() && r.searched[k] == i) {
          ++k;
          continue;
        }
        const nlohmann::json j = {
            {"parameters", nlohmann::json::parse(r.space->config(i).json())},
            {"kept", false},
            {"rule", "search"},
            {"reason",
             "left out by the model's search of the space (GPUTune.Search.ModelAnalyses)"},
            {"predicted_ms", nullptr},
            {"bound", nullptr},
            {"registers", nullptr},
            {"occupancy", nullptr},
            {"spill_bytes", nullptr}};
        out << j.dump() << "\n";
      }
    return;
  }
  out << "pruned for " << r.device << " (" << r.arch << "), context " << r.context << ": "
      << r.space_size << " configurations, " << r.compile_failed << " failed to compile";
  if (r.screened)
    out << ", " << r.screened
        << " not compiled (rule 4 judged them from their source at their best occupancy)";
  out << "\n";
  if (!r.model_search.empty()) out << "  model search: " << r.model_search << "\n";
  for (auto& c : r.counts)
    out << "  rule " << std::left << std::setw(10) << c.rule << " removed " << c.removed << "\n";
  if (r.space)
    out << "  rule " << std::left << std::setw(10) << "search"
        << " removed " << r.space->size() - r.searched.size()
        << " (left out by the model search above: never analysed in full)\n";
  out << "  kept " << r.kept << " of " << r.space_size << " (" << std::fixed << std::setprecision(1)
      << 100.0 * static_cast<double>(r.kept) /
             static_cast<double>(std::max<size_t>(1, r.space_size))
      << "%)\n";
  if (r.rates_source.empty())
    out << "  model: off (--no-model): resource, spill and duplicate rules only\n";
  else if (!r.rates)
    out << "  model: off: " << r.rates_source << "\n";
  else
    out << "  model: " << r.predicted << " variants predicted ("
        << (r.analyses_cached ? std::to_string(r.analyses_cached) + " analyses from the cache"
                              : std::string("none from the analysis cache"))
        << "), rates from " << r.rates_source << "; calibration "
        << (r.calibration_samples
                ? "fitted on " + std::to_string(r.calibration_samples) + " measurements" +
                      (r.calibration_device.empty()
                           ? std::string()
                           : " on " + r.calibration_device + " (moved to these rates)")
                : std::string("default constants (no measurements yet)"))
        << "; margin " << std::setprecision(2) << r.margin << "\n";
  if (r.not_analysed)
    out << "  model: " << r.not_analysed
        << " variants could not be analysed and are judged by the resource rules only; first: "
        << r.first_analysis_error << "\n";
  std::vector<const PruneRow*> ranked;
  for (const auto& row : r.rows)
    if (row.decision.kept && row.predicted_ms) ranked.push_back(&row);
  std::sort(ranked.begin(), ranked.end(), [](const PruneRow* a, const PruneRow* b) {
    return *a->predicted_ms < *b->predicted_ms;
  });
  if (!ranked.empty()) {
    out << "  best predicted (of " << ranked.size() << " ranked):\n";
    for (size_t k = 0; k < std::min<size_t>(10, ranked.size()); ++k)
      out << "    " << std::right << std::setw(2) << k + 1 << ". " << std::setprecision(4)
          << std::setw(10) << *ranked[k]->predicted_ms << " ms  " << std::left << std::setw(6)
          << ranked[k]->bound << "  " << ranked[k]->config.json() << "\n";
  }
  if (r.run_id) out << "stored as run " << r.run_id << " in " << r.db_path << "\n";
}

}  // namespace gputune::tuner
