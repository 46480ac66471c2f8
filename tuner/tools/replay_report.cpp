// print_replay_report (tuner/tools/replay.h): the report `gputune replay` prints, from the scores
// replay.cpp computes. Apart from the scoring so that each file reads as one thing.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

#include "tuner/tools/replay.h"

namespace gputune::tuner {

namespace {

/// Where the measurements came from, the space, the optimum and the default.
void print_recording(const ReplayReport& r, std::ostream& out) {
  if (!r.source.empty()) out << "measurements: " << r.source << "\n";
  out << "space " << r.space_size << " configurations; the measurements hold " << r.recorded
      << ", of which " << r.matched << " match the space (" << r.failed << " failed)\n";
  out << "optimum " << r.optimum_ms << " ms at " << r.optimum_key << "\n";
  if (!r.default_key.empty()) {
    out << "default " << r.default_key << ": ";
    if (r.default_ms)
      out << *r.default_ms << " ms (" << *r.default_ms / r.optimum_ms << "x the optimum)";
    else
      out << "failed";
    out << "; every strategy measures it first, as `run` does\n";
  }
}

/// Per strategy: measurements to each tolerance (median, p90) and, when scored, the
/// methodology's scores.
void print_strategy_table(const ReplayReport& r, std::ostream& out) {
  // Columns: measurements needed to get within each tolerance of the optimum.
  std::vector<std::string> head;
  for (double f : r.within) {
    std::ostringstream to;
    if (f == 1)
      to << "to optimum";
    else
      to << "to " << 100 * (f - 1) << "%";
    head.push_back(to.str() + " (median)");
    head.push_back(to.str() + " (p90)");
  }
  const bool scored = std::any_of(r.strategies.begin(), r.strategies.end(), [](const auto& s) {
    return !std::isnan(s.score_measurements) || !std::isnan(s.score_time) || !s.score_note.empty();
  });
  if (scored) {
    head.push_back("score (measurements)");
    head.push_back("score (time)");
  }
  // Each cell as wide as its heading and two spaces, the last one unpadded.
  auto row = [&](const std::string& name, const std::string& seeds,
                 const std::vector<std::string>& cells) {
    std::ostringstream line;
    line << std::left << std::setw(14) << name << std::setw(8) << seeds;
    for (size_t c = 0; c < cells.size(); ++c)
      line << std::setw(c + 1 < cells.size() ? static_cast<int>(head[c].size()) + 2 : 0)
           << cells[c];
    out << line.str() << "\n";
  };
  row("strategy", "seeds", head);
  for (auto& s : r.strategies) {
    std::vector<std::string> cells;
    for (size_t t = 0; t < s.median_to.size(); ++t)
      for (double v : {s.median_to[t], s.p90_to[t]}) {
        std::ostringstream c;
        if (std::isnan(v))
          c << "stopped";  // model_guided's stop rule ended it before it got there
        else
          c << v;
        cells.push_back(c.str());
      }
    if (scored)
      for (double v : {s.score_measurements, s.score_time}) {
        std::ostringstream c;
        if (std::isnan(v))
          c << "-";
        else
          c << std::fixed << std::setprecision(3) << v;
        cells.push_back(c.str());
      }
    row(s.strategy, std::to_string(s.seeds), cells);
  }
}

/// model_guided streamed with the model: what it predicted, removed, compiled and where it ended.
void print_model_stream(const ReplayReport& r, std::ostream& out) {
  out << "model_guided with the model for " << r.predicted_device << ", context "
      << r.predicted_context << ": " << r.model_predicted << " of the " << r.space_size
      << " configurations predicted from their source; of what it compiled, removed per rule:";
  for (auto& [rule, n] : r.removed_by_rule) out << " " << rule << " " << n;
  out << "\nmodel: Spearman " << std::setprecision(3) << r.spearman << " over "
      << r.predicted_and_measured
      << " configurations compiled by the search (real predictions against recorded times)\n";
  if (r.guided_stopped_after)
    out << "model_guided: stopped after " << r.guided_stopped_after << " measurements";
  else
    out << "model_guided: ran";
  out << " with the best within " << std::setprecision(1) << 100 * (r.guided_best_ratio - 1)
      << "% of the optimum, having compiled " << r.guided_compiled << " of the " << r.space_size
      << " configurations (all seeds)\n";
}

/// The pruner over the whole space by margin (--prune-report), and how that meets the target.
void print_margin_sweep(const ReplayReport& r, std::ostream& out) {
  out << "pruner by margin (rule 4 drops what is predicted slower than margin x the best "
         "prediction; regret: best kept / optimum):\n";
  out << "  margin  kept      pruned  regret\n";
  const ReplayReport::MarginPoint* target = nullptr;  // the smallest margin within 10%
  for (const auto& p : r.margin_sweep) {
    out << "  " << std::left << std::setw(8) << std::setprecision(2) << p.margin << std::setw(10)
        << p.kept << std::right << std::setw(5) << std::setprecision(1) << 100 * p.fraction_pruned
        << "%  " << std::left << std::setprecision(3) << p.regret
        << (p.margin == r.job_margin ? "  (the job's margin)" : "") << "\n";
    if (!target && p.regret <= kTargetRegret) target = &p;
  }
  out << std::setprecision(1) << "pruning target (>= " << 100 * kTargetPruned
      << "% pruned, one kept within " << 100 * (kTargetRegret - 1) << "% of the optimum): ";
  if (const auto& a = r.at_target_pruned)
    out << (a->regret <= kTargetRegret ? "met" : "not met") << " at margin " << std::setprecision(4)
        << a->margin << ", which keeps the most that still prunes " << std::setprecision(1)
        << 100 * kTargetPruned << "% or more (" << 100 * a->fraction_pruned << "% pruned, "
        << a->kept << " kept, regret " << std::setprecision(3) << a->regret << ")";
  else
    out << "not met: no margin prunes " << 100 * kTargetPruned << "% or more (the tightest prunes "
        << 100 * r.tightest_pruned << "%)";
  out << "; the smallest swept margin that keeps one within " << std::setprecision(1)
      << 100 * (kTargetRegret - 1) << "%: ";
  if (!target)
    out << "none\n";
  else
    out << std::setprecision(2) << target->margin << " (" << std::setprecision(1)
        << 100 * target->fraction_pruned << "% pruned, regret " << std::setprecision(3)
        << target->regret << ")\n";
}

}  // namespace

void print_replay_report(const ReplayReport& r, std::ostream& out) {
  print_recording(r, out);
  print_strategy_table(r, out);
  if (!r.score_range.empty()) {
    out << "score: the methodology's performance score (0: as random search, 1: the optimum at "
           "once), averaged "
        << r.score_range << "; time simulated as `run` streams the search with "
        << r.compile_workers << " compile workers and a look-ahead of " << r.look_ahead << "\n";
    for (const auto& s : r.strategies)
      if (!s.score_note.empty()) out << "score: " << s.strategy << ": " << s.score_note << "\n";
  }
  if (r.trajectories_written)
    out << "trajectories: " << r.trajectories_written - 1
        << " seeds written (bench/score_trajectories.py scores them with the published package)\n";
  if (r.pruner_scored)
    out << "pruner: for " << r.predicted_device << ", context " << r.predicted_context << ": kept "
        << r.kept << " (" << std::fixed << std::setprecision(1) << 100 * r.fraction_pruned
        << "% pruned), regret " << std::setprecision(3) << r.regret
        << ", recorded launch failures predicted " << r.failures_predicted << " of "
        << r.failures_recorded << ", valid variants rejected for resources " << r.valid_rejected
        << "\n";
  if (r.model_streamed) print_model_stream(r, out);
  if (r.pruner_scored) {
    out << "pruner: removed per rule:";
    for (auto& [rule, n] : r.removed_by_rule) out << " " << rule << " " << n;
    out << "\n";
    out << "model: Spearman " << std::setprecision(3) << r.spearman << " over "
        << r.predicted_and_measured << " configurations with a prediction and a recorded time\n";
    if (!r.margin_sweep.empty()) print_margin_sweep(r, out);
    if (r.guided_stopped_after)
      out << "model_guided: stopped after " << r.guided_stopped_after
          << " measurements with the best within " << std::setprecision(1)
          << 100 * (r.guided_best_ratio - 1) << "% of the optimum, having compiled "
          << r.guided_compiled << " of the " << r.space_size << " configurations\n";
  }
  if (r.look_ahead) {
    out << "model_guided scored as `run` streams it: a look-ahead of " << r.look_ahead
        << " compiles (--look-ahead)\n";
  }
  if (!r.guided_note.empty()) out << r.guided_note << "\n";
  out << r.pruner_note << "\n";
}

}  // namespace gputune::tuner
