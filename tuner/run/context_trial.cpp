/** \file tuner/run/context_trial.cpp
 * Owns: one configuration in one context of `gputune run` (ContextRun, tuner/run/context_run.h):
 * its trial (launch, occupancy, prediction), judging it once compiled (rules 1-3, and rule 4
 * through the stream), measuring it (or recording why not), a resumed run's measurements and
 * reference outputs, and storing its row. Must not: decide what is searched or in which order
 * (tune_context.cpp and the strategy do), or print reports (context_report.cpp does). */
#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pruner/rules.h"
#include "tuner/measure/measure.h"
#include "tuner/run/context_run.h"
#include "tuner/run/hang_watch.h"
#include "tuner/run/measurement_row.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

RowKeys ContextRun::keys(Candidate& c) { return {s_.run_id, ctx_id_, s_.variant_id(c)}; }

/// Its trial in this context, with its launch and (once compiled) its occupancy.
Trial& ContextRun::trial(Candidate& c, bool launch) {
  Trial& t = trials_[c.index];
  if (launch && !t.launch && t.geometry_error.empty()) {
    try {
      t.launch = instantiate_launch(s_.job, c.config, ctx_);
    } catch (const JobError& e) {
      t.geometry_error = e.problem;
    }
  }
  if (t.launch && c.usable() && t.occupancy.blocks_per_sm == 0 && t.occupancy.feasible)
    t.occupancy = pruner::compute_occupancy(c.inspected.res, t.launch->geometry.grid,
                                            t.launch->geometry.block,
                                            t.launch->geometry.dynamic_smem, s_.limits);
  if (t.launch && c.usable() && model_ && !t.prediction.ok)
    if (const long pos = plan_ ? plan_->position(c.index) : -1; pos >= 0) {
      t.prediction = pruner::predict(real_features(static_cast<std::size_t>(pos), t),
                                     *s_.rates.rates, s_.calibration);
      t.best_case_ms = best_case_[static_cast<std::size_t>(pos)];
    }
  return t;
}

pruner::ModelFeatures ContextRun::real_features(std::size_t pos, const Trial& t) const {
  return pruner::features_from(model_->run.traffic[pos], t.occupancy,
                               model_->threads_per_block[pos]);
}

/// The binary and launch of a compiled configuration, as rule 3 keys it: equal ones compute
/// and time the same.
std::string ContextRun::binary(const Candidate& c, const Trial& t) {
  const LaunchGeometry& g = t.launch->geometry;
  return c.compiled.cubin_hash + "|" + pruner::launch_key(g.grid, g.block, g.dynamic_smem);
}

bool ContextRun::sets_best(const Trial& t) {
  return t.decision.kept || t.decision.rule == "duplicate";
}

void ContextRun::on_compiled(Candidate& c) {
  check_compiled(s_, c);
  waiting_.erase(c.index);
  judge_ready();
}

/// Judges the proposed configurations that are compiled: as each is ready, or (a strategy
/// without feedback, which measures everything rule 4 keeps) in the order they were proposed,
/// so that which of a group of identical binaries is kept does not depend on which compile
/// finished first.
void ContextRun::judge_ready() {
  const bool ordered = exact_;
  for (auto it = in_order_.begin(); it != in_order_.end();) {
    if (waiting_.count(plan_->index[*it])) {
      if (ordered) break;
      ++it;
      continue;
    }
    const std::size_t pos = *it;
    it = in_order_.erase(it);
    judge(pos);
  }
}

/// A proposed configuration is compiled: rules 1-3 (with the pruner on), its real prediction
/// (which refines the model_guided order), and whether the stream measures it.
void ContextRun::judge(std::size_t pos) {
  Candidate& c = s_.candidate(plan_->index[pos]);
  Trial& t = trial(c);
  if (!c.usable() || !t.launch) {
    store_unlaunchable(c, t);
    stream_->compiled(pos, false, kNaN, false);
    return;
  }
  if (s_.job.pruner.enabled && judged_.insert(c.index).second) apply_rules(c, t);
  if (guide_ && t.prediction.ok) guide_->refine(pos, real_features(pos, t));
  if (!t.decision.kept) {
    db::MeasurementRecord row = measurement_row(keys(c), c, t);
    row.status = db::Status::kConstraints;
    row.reason = "pruned by rule " + t.decision.rule + ": " + t.decision.reason;
    store(c, t, row);
  }
  // The same binary and launch as one measured here: its outcome is known without a launch,
  // and the search learns it (it is no measurement of the budget).
  if (t.decision.rule == "duplicate" && t.decision.duplicate_of >= 0)
    if (auto twin = trials_.find(static_cast<std::size_t>(t.decision.duplicate_of));
        twin != trials_.end() && twin->second.measured) {
      stream_->known(pos, twin->second.time_ms, t.prediction.ok ? t.prediction.ms : kNaN);
      return;
    }
  stream_->compiled(pos, t.decision.kept, t.prediction.ok ? t.prediction.ms : kNaN, sets_best(t));
}

/// Rules 1-3 (pruner::judge_variant) on one compiled configuration, in this context: its
/// launch would fail, it spills beyond the limit, or it is the same binary and launch as one
/// kept before it here.
void ContextRun::apply_rules(Candidate& c, Trial& t) {
  pruner::RuleInput in;
  in.inspected = true;
  in.res = c.inspected.res;
  in.cubin_hash = c.compiled.cubin_hash;
  const LaunchGeometry& g = t.launch->geometry;
  in.grid = g.grid, in.block = g.block, in.dynamic_smem = g.dynamic_smem;
  in.geometry = pruner::launch_key(g.grid, g.block, g.dynamic_smem);
  t.decision =
      pruner::judge_variant(in, static_cast<long>(c.index), s_.limits, s_.rule_options, binaries_);
  if (t.decision.rule == "duplicate")  // named by its configuration, not its space index
    t.decision.reason =
        "same cubin and launch geometry as configuration " +
        s_.candidate(static_cast<std::size_t>(t.decision.duplicate_of)).config.key();
  if (!t.decision.kept) ++removed_[t.decision.rule];
}

/// Measures (or, without a GPU, records) a configuration; its time when correct.
std::optional<double> ContextRun::measure(Candidate& c, Trial& t, const std::string& note) {
  const RowKeys k = keys(c);
  if (s_.already.count({ctx_id_, k.variant_id})) return resumed(c, t);
  db::MeasurementRecord row = measurement_row(k, c, t);
  std::optional<double> result;
  if (!set_unlaunchable(row, c, t)) {
    if (!measurer_) {
      row.status = db::Status::kCompiled;
      row.reason = "not timed: no CUDA device (" + s_.no_device_reason + ")";
      if (!t.occupancy.feasible)
        row.reason += "; predicted launch failure: " + t.occupancy.infeasible_reason;
    } else if (s_.out_of_time || Clock::now() > s_.deadline) {
      s_.out_of_time = true;
      row.status = db::Status::kTimeout;
      row.reason = "not run: the job's time budget was spent";
    } else {
      const bool is_ref = need_reference_ && reference_.empty();
      row.reason = note;  // its role, should the launch hang or lose the context (set_failed)
      Outcome o = launch(c, t, row, is_ref ? nullptr : &reference_, is_ref ? &reference_ : nullptr);
      set_outcome(row, o, t);
      if (o.status == db::Status::kCorrect) {
        result = o.median_ms;
        correct_.emplace_back(o.median_ms, c.index);
        if (!best_ms_ || o.median_ms < *best_ms_) best_ms_ = o.median_ms;
        if (c.is_default) default_ms_ = o.median_ms;
        if (is_ref) {
          row.reason = "reference: later variants are verified against these outputs";
          if (!c.is_default)
            s_.log << "gputune: note: the default configuration is not available; reference "
                      "outputs come from "
                   << c.config.key() << "\n";
        }
      } else {
        if (is_ref) reference_.clear();  // outputs captured before a later failure
        if (!t.occupancy.feasible)
          row.reason +=
              " (the resource model predicted this: " + t.occupancy.infeasible_reason + ")";
      }
    }
  }
  if (row.status.failed()) ++failures_;
  if (!note.empty()) row.reason += (row.reason.empty() ? "" : "; ") + note;
  t.time_ms = result;
  store(c, t, row);
  t.measured = true;
  if (c.usable() && t.launch && !c.compiled.cubin_hash.empty())
    measured_binaries_.insert(binary(c, t));
  if (row.status.timed() && !s_.first_measurement_s)
    s_.first_measurement_s = std::chrono::duration<double>(Clock::now() - s_.started).count();
  if (result && *result <= *best_ms_)  // the fastest so far: the provisional winner
    s_.store->offer_winner(ctx_id_, t.measurement_id, /*provisional=*/true);
  return result;
}

/// Runs a configuration on the GPU (Measurer::run, the job's repeats), watched: the daemon is
/// told which variant is in flight, and a launch that never returns stores `row` as timeout
/// (HangWatch). Counts the GPU's time.
Outcome ContextRun::launch(Candidate& c, Trial& t, const db::MeasurementRecord& row,
                           const std::vector<std::vector<unsigned char>>* expected,
                           std::vector<std::vector<unsigned char>>* capture) {
  if (s_.opt.on_measure_start) s_.opt.on_measure_start(ctx_id_, row.variant_id);
  if (s_.hang_watch)
    s_.hang_watch->begin(row, "configuration " + c.config.key() + " in " + ctx_.name);
  const Clock::time_point t0 = Clock::now();
  try {
    Outcome o = measurer_->run(c.compiled, *t.launch, expected, capture, s_.job.measure.repeats);
    s_.gpu_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (s_.hang_watch) s_.hang_watch->end();
    return o;
  } catch (const cuda::ContextLost& e) {
    // Nothing more runs in this process. Watched (`gputune run`): the watch stores the variant
    // and ends the process, and its supervisor goes on in a new one. Unwatched (the daemon's
    // worker, --kernel-timeout 0): stored here; run_job stops the run for a new process.
    if (s_.hang_watch) s_.hang_watch->stop_after_lost_context(e.what(), e.stored_reason());
    db::MeasurementRecord m = row;
    set_failed(m, db::Status::kRuntime, e.stored_reason());
    s_.store->add_measurement(m);
    throw;
  }
}

/// A configuration measured before an interruption: what it measured then counts now.
std::optional<double> ContextRun::resumed(Candidate& c, Trial& t) {
  t.measured = true;
  auto it = resumed_ms_.find(s_.variant_id(c));
  if (it == resumed_ms_.end()) return std::nullopt;
  t.time_ms = it->second;
  t.measurement_id = resumed_mid_[c.variant_id];
  return t.time_ms;
}

/// A resumed context's reference outputs, captured again before anything new is measured (they
/// are not stored): from the configuration that was the reference before the interruption, or,
/// should it not run correctly now, from the fastest correct one (each was verified against
/// it). Otherwise the first configuration measured anew would become the reference unchecked,
/// whatever it computes, and the re-measurements would go unverified. False: Ctrl-C stopped it.
bool ContextRun::capture_resumed_reference() {
  if (!measurer_ || !need_reference_ || !reference_.empty() || correct_.empty()) return true;
  std::vector<std::size_t> order;
  if (resumed_reference_) order.push_back(*resumed_reference_);
  std::vector<std::pair<double, std::size_t>> by_time = correct_;
  std::sort(by_time.begin(), by_time.end());
  for (auto& [ms, index] : by_time)
    if (index != resumed_reference_) order.push_back(index);
  for (std::size_t index : order) {
    Candidate& c = s_.candidate(index);
    if (!wait_compiled(s_, c)) return false;  // Ctrl-C
    Trial& t = trial(c);
    if (!c.usable() || !t.launch) continue;
    Outcome o;
    try {
      o = measurer_->run(c.compiled, *t.launch, nullptr, &reference_, 1);
    } catch (const cuda::ContextLost& e) {
      // Not a measurement (nothing is stored for it), so not the lost-context stop, whose
      // resume goes on without the variant: this one would be tried again.
      throw std::runtime_error("resuming: configuration " + c.config.key() +
                               ", measured correct before the interruption, lost the CUDA "
                               "context when run again for the reference outputs (" +
                               e.what() +
                               "); nothing was stored for it, and `--resume` tries it again "
                               "(is the GPU healthy? nvidia-smi)");
    }
    if (o.status == db::Status::kCorrect) {
      if (index != resumed_reference_)
        s_.log << "gputune: note: resumed: "
               << (resumed_reference_
                       ? "the reference configuration " +
                             s_.candidate(*resumed_reference_).config.key() + " did not run again"
                       : std::string("no reference row is stored"))
               << "; reference outputs come from " << c.config.key()
               << ", measured correct before\n";
      return true;
    }
    reference_.clear();
  }
  s_.log << "gputune: warning: resumed: none of the " << order.size()
         << " configurations measured correct before ran again; the next one measured becomes "
            "the reference\n";
  return true;
}

/// What this run measured in this context before it was interrupted (a resume), by stage: the
/// search's measurements, correct or failed, count against its budget as they did then; the
/// regret sample's are counted by the sample when its walk reaches them (so that it draws the
/// same configurations and times no more than it wants); the re-measurements by name_winner.
void ContextRun::load_resumed() {
  if (s_.already.empty()) return;
  for (auto& m : s_.store->measurements(s_.run_id, ctx_id_)) {
    if (m.reason.rfind("re-measurement", 0) == 0) {
      remeasured_[m.variant_id] = {
          m.id, m.status == db::Status::kCorrect ? m.time_ms : std::optional<double>()};
      continue;
    }
    const bool correct = m.status == db::Status::kCorrect && m.time_ms;
    // Timed and failed (not "not run": the time budget stored what it cut as timeout).
    const bool failed = m.status.timed() && !correct && m.reason.rfind("not run", 0) != 0;
    if (!correct && !failed) continue;
    const long i = s_.space.find(m.config_key);
    if (i < 0) continue;
    Candidate& c = s_.candidate(static_cast<std::size_t>(i));
    c.variant_id = m.variant_id;
    Trial& t = trials_[c.index];
    t.measurement_id = m.id;
    const bool sample = m.reason.find("regret sample (") != std::string::npos;
    if (sample) resumed_samples_.insert(c.index);
    t.measured = !sample;
    if (failed) {
      ++failures_;
      continue;
    }
    if (m.reason.rfind("reference", 0) == 0) resumed_reference_ = c.index;
    resumed_ms_[m.variant_id] = *m.time_ms;
    resumed_mid_[m.variant_id] = m.id;
    correct_.emplace_back(*m.time_ms, c.index);
    t.time_ms = m.time_ms;
    if (!best_ms_ || *m.time_ms < *best_ms_) best_ms_ = m.time_ms;
    if (c.is_default) default_ms_ = m.time_ms;
  }
}

void ContextRun::store_unlaunchable(Candidate& c, Trial& t) {
  if (t.measured || stored_.count(c.index) || s_.already.count({ctx_id_, s_.variant_id(c)})) return;
  db::MeasurementRecord row = measurement_row(keys(c), c, t);
  if (!set_unlaunchable(row, c, t)) return;
  ++failures_;
  store(c, t, row);
}

void ContextRun::store(Candidate& c, Trial& t, db::MeasurementRecord& row) {
  // A pair this run stored before it was interrupted is not stored twice.
  if (s_.already.count({ctx_id_, row.variant_id})) return;
  t.measurement_id = s_.store->add_measurement(row);
  stored_.insert(c.index);
  ++s_.done_total;
  if (s_.done_total % 64 == 0)
    s_.store->update_run_progress(s_.run_id, s_.done_total, s_.seconds_spent());
}

}  // namespace gputune::tuner
