/** \file tuner/run/context_report.cpp
 * Owns: what one context of `gputune run` (ContextRun, tuner/run/context_run.h) prints and learns
 * around its search: the model's work's messages, the plan stored with the run, the model's and
 * the search's reports, compiling the whole plan (--no-screen), what earlier measurements teach
 * model_guided, and the best rows of the run's report.
 * Must not: measure or judge a configuration (context_trial.cpp does). */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tuner/common/progress.h"
#include "tuner/run/context_run.h"
#include "tuner/search/portfolio.h"
#include "tuner/search/strategy.h"

namespace gputune::tuner {

namespace {

/// How many of the newest verified times (with a prediction, for the predicted variants) a
/// search learns from before it starts.
constexpr int kPastMeasurements = 5000;

/// What earlier contexts and runs measured of kernel `kernel` on the device: the prior of a
/// model-guided search (ParameterEffects::from_past). `residuals`: the times with a prediction,
/// as log(measured / predicted), for the predicted variants; otherwise every verified time as
/// log(time), for the variants without a prediction (from_past centres each search on its mean).
/// `imported` (when given) counts those from imported Kernel Tuner caches of a device of the same
/// name (times only: an import has no predictions).
std::vector<ParameterEffects::Past> past_measurements(db::Store& store, std::int64_t device_id,
                                                      const std::string& kernel,
                                                      std::int64_t run_id, std::int64_t ctx_id,
                                                      bool residuals,
                                                      std::size_t* imported = nullptr) {
  std::vector<ParameterEffects::Past> out;
  for (const auto& row :
       residuals ? store.predicted_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)
                 : store.verified_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)) {
    auto params = nlohmann::json::parse(row.params_json, nullptr, false);
    if (!params.is_object()) continue;
    if (imported && row.imported) ++*imported;
    ParameterEffects::Past m;
    m.search = std::to_string(row.run_id) + "/" + std::to_string(row.context_id);
    for (const auto& [name, value] : params.items()) m.values[name] = json_to_value(value).str();
    m.log_residual = std::log(residuals ? row.time_ms / row.predicted_ms : row.time_ms);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

void ContextRun::say_messages() {
  for (const std::string& line : work_.take_messages()) s_.log << line << "\n";
}

/// The plan, stored with the run once it is known (model_guided: `run --resume` goes on with
/// it), and what it plans in every context.
void ContextRun::store_plan() {
  s_.rep.planned = plan_->index.size();
  s_.rep.model_search = plan_->summary;
  s_.store->set_run_total(s_.run_id,
                          static_cast<std::int64_t>(plan_->index.size() * s_.job.contexts.size()));
  if (!s_.guided) return;
  db::RunPlan rp;
  rp.searched = plan_->searched;
  rp.summary = plan_->summary;
  if (plan_->searched)
    for (std::size_t pos = 0; pos < plan_->index.size(); ++pos)
      (plan_->left_out[pos] ? rp.left_out : rp.chosen)
          .push_back(s_.space.config(plan_->index[pos]).key());
  s_.store->save_run_plan(s_.run_id, rp);
}

void ContextRun::report_model() {
  const ModelRun& m = model_->run;
  std::size_t predicted = 0;
  for (double b : model_->best_case) predicted += std::isfinite(b);
  s_.log << "gputune: model: " << predicted << " of " << model_->best_case.size()
         << " variants predicted (from their source: the best case at any occupancy their "
            "launch allows, refined once compiled; "
         << m.analyses_cached << " analyses from the cache); rates from " << s_.rates.source
         << "; calibration "
         << (s_.calibration.samples
                 ? "fitted on " + std::to_string(s_.calibration.samples) + " measurements"
                 : std::string("default"))
         << "\n";
  if (m.not_analysed)
    s_.log << "gputune: model: " << m.not_analysed
           << " variants not analysed (judged by the resource rules only): " << m.first_error
           << "\n";
}

/// --no-screen: every planned configuration is compiled first, so rule 4 and the search judge
/// each by its real prediction from the start (slower: the reference the stream is checked
/// against).
void ContextRun::compile_whole_plan() {
  if (k_ > 0) return;  // the candidates serve every context
  Stage st(s_.log, "compile");
  Progress prog("compile", plan_->index.size(), s_.opt.progress);
  std::vector<Candidate*> all;
  for (std::size_t i : plan_->index) {
    Candidate& c = s_.candidate(i);
    if (c.state == Candidate::Compile::kNot) s_.pool->submit(c);
    all.push_back(&c);
  }
  std::size_t done = 0;
  for (Candidate* c : all) {
    if (!wait_compiled(s_, *c)) return;
    prog.update(++done, 0, std::nullopt);
  }
  prog.finish();
}

/// model_guided starts from what earlier contexts of this run and earlier runs of the kernel on
/// this device learned about its parameters, until its own measurements take over.
void ContextRun::learn_from_the_past() {
  if (!measurer_) return;
  auto past =
      past_measurements(*s_.store, s_.device_id, s_.job.kernel_name, s_.run_id, ctx_id_, true);
  if (!past.empty()) {
    auto before = ParameterEffects::from_past(past);
    guide_->set_prior(before.learned());
    std::string taught = before.summary(4);
    s_.log << "gputune: " << s_.job.strategy << ": starts from what " << past.size()
           << " earlier measurements of kernel '" << s_.job.kernel_name
           << "' on this device taught ("
           << (guide_->effects() ? guide_->effects()->prior_values() : 0)
           << " parameter values of this space; "
           << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
  }
  std::size_t imported = 0;
  if (guide_->explorer())
    if (auto times = past_measurements(*s_.store, s_.device_id, s_.job.kernel_name, s_.run_id,
                                       ctx_id_, false, &imported);
        !times.empty()) {
      auto before = ParameterEffects::from_past(times);
      guide_->set_unpredicted_prior(before.learned());
      if (guide_->unpredicted_prior_values() == 0) return;  // no variant without a prediction
      std::string taught = before.summary(4);
      s_.log << "gputune: " << s_.job.strategy << ": variants without a prediction start from what "
             << times.size() << " earlier measured times of kernel '" << s_.job.kernel_name
             << "' on this device"
             << (imported ? " (" + std::to_string(imported) +
                                " of them from imported Kernel Tuner caches)"
                          : std::string())
             << " taught (" << guide_->unpredicted_prior_values()
             << " parameter values of this space; "
             << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
    }
}

/// What the search did and learned, for the log.
void ContextRun::report_search() {
  if (s_.job.pruner.enabled) {
    s_.log << "gputune: pruner: resources " << removed_["resources"] << " spills "
           << removed_["spills"] << " duplicate " << removed_["duplicate"] << " model "
           << stream_->dropped_by_model().size() << " (removed per rule";
    std::size_t never = 0;
    for (std::size_t pos : stream_->dropped_by_model())
      if (!s_.candidates.count(plan_->index[pos]) ||
          s_.candidates.at(plan_->index[pos]).state == Candidate::Compile::kNot) {
        ++never;
        s_.screened.insert(plan_->index[pos]);
      }
    if (s_.opt.screen && never > 0)
      s_.log << "; rule 4 judged " << never
             << " of them from their source alone and never compiled them";
    s_.log << ")\n";
  }
  if (!guide_) return;
  if (stream_->parked() > 0)
    s_.log << "gputune: " << s_.job.strategy << ": " << stream_->parked()
           << " times a compiled variant waited, its real prediction behind the best case of "
              "one not compiled yet, which was compiled first (it is measured in the order of "
              "real predictions)\n";
  if (!guide_->stop_reason().empty())
    s_.log << "gputune: " << s_.job.strategy << " stopped after " << steps_ << " of "
           << plan_->index.size() << " variants: " << guide_->stop_reason() << "\n";
  const std::size_t held = stream_->dropped_by_model().size() - stream_->left_out_excluded().size();
  if (held > 0) {
    s_.log << "gputune: " << s_.job.strategy << ": refits on this run's measurements readmitted "
           << guide_->readmitted().size() << " of the " << held
           << " variants the model rule held back (" << readmitted_measured_
           << " of them measured by the search)\n";
  }
  if (guide_->effects() && guide_->effects()->samples() > 0) {
    std::string misses = guide_->effects()->summary(6);
    s_.log << "gputune: " << s_.job.strategy
           << ": what the model misses per parameter value (measured / "
              "predicted against the average, learned from "
           << guide_->effects()->samples() << " measurements and used to order the rest): "
           << (misses.empty() ? "no value off by 5% or more" : misses);
    if (guide_->effects()->prior_values() > 0)
      s_.log << "; what earlier searches taught kept " << std::fixed << std::setprecision(2)
             << guide_->effects()->prior_trust() << std::defaultfloat
             << " of its weight (1: borne out here, 0: not)";
    s_.log << "\n";
  }
  if (const Portfolio* p = guide_->explorer();
      p && (guide_->explored() > 0 || guide_->unpredicted_measured() > 0)) {
    const auto& uses = p->proposals_by_search();
    s_.log << "gputune: " << s_.job.strategy << ": ";
    if (guide_->unpredicted_measured() > 0)
      s_.log << guide_->unpredicted_measured() << " variants without a prediction were measured; ";
    s_.log << "the portfolio search proposed " << guide_->explored()
           << " of the variants measured by this process (" << uses[0] << " by its surrogate, "
           << uses[1] << " near the fastest, " << uses[2] << " at random"
           << (uses[3] ? ", " + std::to_string(uses[3]) + " in the order earlier runs taught"
                       : std::string())
           << ")\n";
  }
}

std::size_t ContextRun::guided_total() const {
  return s_.guided ? std::min(budget_, plan_->index.size()) : plan_->index.size();
}

BestRow ContextRun::best_row(std::size_t index, double ms, bool provisional) {
  Candidate& c = s_.candidate(index);
  Trial& t = trial(c);
  BestRow b;
  b.context = ctx_.name, b.config_key = c.config.key(), b.params_json = c.config.json();
  b.time_ms = ms;
  if (t.launch && t.launch->flops) b.gflops = *t.launch->flops / (ms * 1e-3) / 1e9;
  if (t.launch && t.launch->bytes) b.gbps = *t.launch->bytes / (ms * 1e-3) / 1e9;
  b.registers = c.inspected.res.registers;
  b.occupancy = t.occupancy.occupancy;
  b.default_ms = default_ms_;
  b.provisional = provisional;
  return b;
}

}  // namespace gputune::tuner
