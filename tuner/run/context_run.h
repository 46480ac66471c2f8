/** \file tuner/run/context_run.h
 * Owns: ContextRun, one context of `gputune run` (tune_context, tuner/run/run_stages.h): the class
 * declared once, its member functions defined by purpose, as Halide splits its simplifier:
 *   tune_context.cpp     the stages, top-down (measure_default ... name_winner)
 *   context_trial.cpp    one configuration: its trial, judging it (rules 1-4), measuring and
 *                        storing it
 *   context_report.cpp   what is printed and learnt around the search: messages, the plan, the
 *                        model's and the search's reports, the past a search starts from, best rows
 * Internal to those three files: nothing else includes it (the rest of tuner/ calls tune_context).
 * Must not: be included outside those files, or define a member function here (each goes to the
 * file of its purpose). */
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tuner/measure/measure.h"
#include "tuner/run/measurement_row.h"
#include "tuner/run/model_work.h"
#include "tuner/run/run_stages.h"
#include "tuner/search/search_stream.h"
#include "tuner/search/strategy.h"

namespace gputune::tuner {

class ContextRun {
 public:
  ContextRun(RunState& s, ModelWork& work, std::size_t k)
      : s_(s), work_(work), k_(k), ctx_(s.job.contexts[k]) {}

  void run();

 private:
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  // --- Stages (tune_context.cpp) ---------------------------------------------------------
  bool measure_default();
  bool start_search();
  bool compile_resumed();
  void search();
  void not_run_for_time();
  void regret_sample();
  void store_dropped();
  void learn();
  void name_winner();
  void stopped();

  // --- One configuration (context_trial.cpp) --------------------------------------------
  RowKeys keys(Candidate& c);
  Trial& trial(Candidate& c, bool launch = true);
  pruner::ModelFeatures real_features(std::size_t pos, const Trial& t) const;
  static std::string binary(const Candidate& c, const Trial& t);
  static bool sets_best(const Trial& t);
  void on_compiled(Candidate& c);
  void judge_ready();
  void judge(std::size_t pos);
  void apply_rules(Candidate& c, Trial& t);
  std::optional<double> measure(Candidate& c, Trial& t, const std::string& note);
  Outcome launch(Candidate& c, Trial& t, const db::MeasurementRecord& row,
                 const std::vector<std::vector<unsigned char>>* expected,
                 std::vector<std::vector<unsigned char>>* capture);
  std::optional<double> resumed(Candidate& c, Trial& t);
  void load_resumed();
  bool capture_resumed_reference();
  void store_unlaunchable(Candidate& c, Trial& t);
  void store(Candidate& c, Trial& t, db::MeasurementRecord& row);

  // --- Around the search (context_report.cpp) ---------------------------------------------
  void say_messages();
  void store_plan();
  void report_model();
  void compile_whole_plan();
  void learn_from_the_past();
  void report_search();
  std::size_t guided_total() const;
  BestRow best_row(std::size_t index, double ms, bool provisional);

  RunState& s_;
  ModelWork& work_;
  const std::size_t k_;
  const ContextSpec& ctx_;
  std::int64_t ctx_id_ = 0;
  std::unique_ptr<Measurer> measurer_;
  bool need_reference_ = false;
  std::vector<std::vector<unsigned char>> reference_;
  const Plan* plan_ = nullptr;
  const ContextModel* model_ = nullptr;
  std::vector<double> best_case_;  // per plan position, with the current calibration (NaN: none)
  std::unique_ptr<Strategy> strategy_;
  ModelGuided* guide_ = nullptr;
  std::optional<SearchStream> stream_;
  std::size_t budget_ = std::numeric_limits<std::size_t>::max();
  std::unordered_map<std::size_t, Trial> trials_;  // by space index
  std::unordered_set<std::size_t> waiting_;        // space indices the stream waits for
  std::list<std::size_t> in_order_;  // positions proposed and not judged yet, in proposal order
  std::unordered_set<std::size_t> stored_;             // space indices with a row here
  std::unordered_set<std::size_t> judged_;             // space indices rules 1-3 judged
  std::unordered_map<std::string, long> binaries_;     // cubin + launch -> first kept (space index)
  std::unordered_set<std::string> measured_binaries_;  // cubin + launch measured here
  std::map<std::string, std::size_t> removed_;         // per rule 1-3
  std::map<std::int64_t, double> resumed_ms_;          // by variant id
  std::map<std::int64_t, std::int64_t> resumed_mid_;
  std::optional<std::size_t> resumed_reference_;     // space index of the stored reference row
  std::unordered_set<std::size_t> resumed_samples_;  // space indices the regret sample timed
  /// Re-measurements this run stored here before it was interrupted (by variant id): a resume
  /// counts them instead of measuring them again.
  struct Remeasured {
    std::int64_t measurement_id = 0;
    std::optional<double> time_ms;  ///< none: it failed
  };
  std::map<std::int64_t, Remeasured> remeasured_;
  std::vector<std::pair<double, std::size_t>> correct_;  // (first-pass median, space index)
  std::optional<double> best_ms_, default_ms_;
  std::size_t failures_ = 0, steps_ = 0;
  std::size_t readmitted_measured_ = 0;  // readmitted variants the search measured
  bool exact_ = false;  // rule 4 exactly as over the whole plan (search_stream.h), judged in order
};

}  // namespace gputune::tuner
