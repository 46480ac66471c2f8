#include "tuner/search/search_stream.h"

#include <algorithm>
#include <cmath>

#include "pruner/rules.h"

namespace gputune::tuner {

SearchStream::SearchStream(Strategy& strategy, ModelGuided* guide, Settings settings)
    : strategy_(strategy), guide_(guide), s_(std::move(settings)) {
  s_.look_ahead = std::max<std::size_t>(1, s_.look_ahead);
  if (guide_ && !s_.left_out.empty()) guide_->sample_only(s_.left_out);
  if (s_.margin > 0)
    for (std::size_t i = 0; i < s_.best_case.size(); ++i)
      if (std::isfinite(s_.best_case[i])) by_best_case_.push_back(i);
  std::stable_sort(by_best_case_.begin(), by_best_case_.end(),
                   [&](std::size_t a, std::size_t b) { return s_.best_case[a] > s_.best_case[b]; });
  by_best_case_up_.assign(by_best_case_.rbegin(), by_best_case_.rend());
  cover(s_.best_case.empty() ? 0 : s_.best_case.size() - 1);
}

double SearchStream::lowest_best() {
  while (by_best_case_up_at_ < by_best_case_up_.size() &&
         (resolved_[by_best_case_up_[by_best_case_up_at_]] ||
          given_[by_best_case_up_[by_best_case_up_at_]]))
    ++by_best_case_up_at_;
  double low = best_;
  if (by_best_case_up_at_ < by_best_case_up_.size()) {
    const double next = s_.best_case[by_best_case_up_[by_best_case_up_at_]];
    if (!(next >= low)) low = next;
  }
  return low;
}

void SearchStream::release() {
  if (!s_.exact || deferred_.empty()) return;
  const double low = lowest_best();
  std::vector<std::pair<std::size_t, double>> still;
  for (const auto& [pos, prediction] : deferred_) {
    if (std::isfinite(best_) && pruner::model_rule_drops(prediction, best_, s_.margin)) {
      flying_[pos] = 0;
      drop(pos);  // rule 4 prunes it: the best fell below what it needs
    } else if (!pruner::model_rule_drops(prediction, low, s_.margin)) {
      ready_.push_back(pos);  // rule 4 keeps it whatever is compiled next
      ++in_flight_;
    } else {
      still.emplace_back(pos, prediction);
    }
  }
  deferred_ = std::move(still);
}

void SearchStream::cover(std::size_t pos) {
  if (pos < seen_.size()) return;
  const std::size_t n = std::max(pos + 1, seen_.size() * 2);
  for (auto* v : {&seen_, &given_, &flying_, &dropped_flag_, &resolved_}) v->resize(n, 0);
}

bool SearchStream::seen(std::size_t pos) const { return pos < seen_.size() && seen_[pos]; }

bool SearchStream::beyond(std::size_t pos) const {
  return s_.margin > 0 && pos < s_.best_case.size() && std::isfinite(best_) &&
         pruner::model_rule_drops(s_.best_case[pos], best_, s_.margin);
}

void SearchStream::drop(std::size_t pos) {
  cover(pos);
  resolved_[pos] = 1;
  if (!dropped_flag_[pos]) dropped_.push_back(pos);
  dropped_flag_[pos] = 1;
}

void SearchStream::add_measured(std::size_t pos, std::optional<double> ms) {
  cover(pos);
  seen_[pos] = given_[pos] = 1;
  ++measured_, ++proposed_;
  strategy_.report(pos, ms);
}

void SearchStream::offer_best(double prediction) {
  if (std::isfinite(prediction) && prediction > 0 && !(prediction >= best_)) {
    best_ = prediction;
    apply_best();
  }
  release();
}

void SearchStream::apply_best() {
  if (s_.margin <= 0 || !std::isfinite(best_)) return;
  std::vector<std::size_t> hold, exclude;
  for (; by_best_case_at_ < by_best_case_.size(); ++by_best_case_at_) {
    const std::size_t pos = by_best_case_[by_best_case_at_];
    if (!pruner::model_rule_drops(s_.best_case[pos], best_, s_.margin)) break;
    // Measured, or dropped already; one compiling is judged by its real prediction when it is
    // back. Other strategies skip the rest when they propose it (beyond()).
    if (!guide_ || given_[pos] || dropped_flag_[pos] || flying_[pos]) continue;
    if (seen_[pos]) continue;  // proposed and judged already (measured, or not usable)
    (pos < s_.left_out.size() && s_.left_out[pos] ? exclude : hold).push_back(pos);
  }
  if (!guide_) return;
  guide_->hold_back(hold, s_.margin);
  guide_->exclude(exclude);
  for (std::size_t pos : hold) drop(pos);
  for (std::size_t pos : exclude) drop(pos), left_out_excluded_.push_back(pos);
}

std::optional<std::size_t> SearchStream::next_to_compile() {
  while (!stopped_ && in_flight_ < s_.look_ahead && measured_ + in_flight_ < s_.budget) {
    const std::optional<std::size_t> next = strategy_.next();
    if (!next) {
      dry_ = true;
      release();
      return std::nullopt;
    }
    const std::size_t pos = *next;
    cover(pos);
    if (given_[pos]) continue;      // measured before the stream (the default)
    const bool again = seen_[pos];  // readmitted after rule 4 held it back
    seen_[pos] = 1;
    if (!again) ++proposed_;
    if (!guide_ && beyond(pos)) {  // rule 4 from the best case: never compiled
      drop(pos);
      release();
      continue;
    }
    flying_[pos] = 1;
    ++in_flight_;
    compiling_.push_back(pos);
    return pos;
  }
  return std::nullopt;
}

bool SearchStream::compiled(std::size_t pos, bool usable, double prediction, bool sets_best) {
  cover(pos);
  std::erase(compiling_, pos);
  if (flying_[pos]) flying_[pos] = 0, --in_flight_;
  resolved_[pos] = 1;
  if (sets_best) offer_best(prediction);
  if (!usable) {
    // Decided without a launch (it did not compile, or rules 1-3 pruned it): the strategy learns
    // that it failed; the budget is for measurements.
    dry_ = false;
    strategy_.report(pos, std::nullopt);
    release();
    return false;
  }
  // Rule 4 on the real prediction, once: a configuration a refit readmitted is not judged again
  // by the calibration it started with.
  if (s_.margin > 0 && !dropped_flag_[pos] && (!guide_ || guide_->judged_by_model(pos)) &&
      std::isfinite(prediction) && std::isfinite(best_) &&
      pruner::model_rule_drops(prediction, best_, s_.margin)) {
    if (guide_) {
      if (pos < s_.left_out.size() && s_.left_out[pos]) {
        guide_->exclude({pos});
        left_out_excluded_.push_back(pos);
      } else {
        guide_->hold_back(std::vector<std::size_t>{pos}, s_.margin);
      }
    }
    drop(pos);
    return false;
  }
  // model_guided measures in the order of real predictions: one that an open variant's best
  // case may still beat goes back, compiled (not counted: it is measured when its turn comes).
  if (guide_ && parked_ < s_.budget && !guide_->confirm(pos)) {
    ++parked_;
    return false;
  }
  flying_[pos] = 1;  // ready: still in flight until measured
  if (s_.exact && s_.margin > 0 && std::isfinite(prediction)) {
    // Measured once rule 4 surely keeps it; until then outside the look-ahead, so that what
    // settles the best is compiled meanwhile.
    deferred_.emplace_back(pos, prediction);
    release();
    return true;
  }
  ++in_flight_;
  ready_.push_back(pos);
  return true;
}

void SearchStream::known(std::size_t pos, std::optional<double> ms, double prediction) {
  cover(pos);
  std::erase(compiling_, pos);
  if (flying_[pos]) flying_[pos] = 0, --in_flight_;
  resolved_[pos] = 1;
  offer_best(prediction);
  dry_ = false;
  strategy_.report(pos, ms);
}

std::optional<std::size_t> SearchStream::next_to_measure() {
  if (stopped_ || ready_.empty()) return std::nullopt;
  // model_guided: of what is ready, the one it orders first, and not before one it orders
  // before that is compiled (compiles finish in any order on many workers, the quickest to
  // compile first; the search's order is the point, and a compile takes a fraction of a second).
  // Others: in the order they became ready.
  auto at = ready_.begin();
  if (guide_) {
    for (auto it = ready_.begin(); it != ready_.end(); ++it)
      if (guide_->measure_order(*it) < guide_->measure_order(*at)) at = it;
    for (std::size_t c : compiling_)
      if (guide_->measure_order(c) < guide_->measure_order(*at)) return std::nullopt;
  }
  const std::size_t pos = *at;
  ready_.erase(at);
  return pos;
}

void SearchStream::measured(std::size_t pos, std::optional<double> ms) {
  cover(pos);
  if (flying_[pos]) flying_[pos] = 0, --in_flight_;
  ++measured_;
  dry_ = false;  // the outcome may give the strategy more to propose
  strategy_.report(pos, ms);
}

void SearchStream::stop() { stopped_ = true; }

bool SearchStream::done() const {
  if (stopped_) return true;
  if (in_flight_ > 0 || !ready_.empty() || !deferred_.empty()) return false;
  return measured_ >= s_.budget || dry_;
}

std::vector<std::size_t> simulate_stream(
    SearchStream& stream, const std::function<CompileVerdict(std::size_t)>& compile,
    const std::function<std::optional<double>(std::size_t)>& measure,
    const std::function<bool()>& enough) {
  std::deque<std::size_t> compiling;
  std::vector<std::size_t> order;
  while (!stream.done()) {
    while (auto pos = stream.next_to_compile()) compiling.push_back(*pos);
    if (auto pos = stream.next_to_measure()) {
      const std::optional<double> ms = measure(*pos);
      order.push_back(*pos);
      stream.measured(*pos, ms);
      if (enough && enough()) break;
      continue;
    }
    if (compiling.empty()) break;  // done() said otherwise only for what is in flight: none is
    const std::size_t pos = compiling.front();
    compiling.pop_front();
    const CompileVerdict v = compile(pos);
    stream.compiled(pos, v.usable, v.prediction, v.sets_best);
  }
  return order;
}

std::vector<TimedMeasurement> simulate_timed_stream(
    SearchStream& stream, const std::function<CompileVerdict(std::size_t)>& compile,
    const std::function<std::optional<double>(std::size_t)>& measure,
    const std::function<double(std::size_t)>& compile_s,
    const std::function<double(std::size_t)>& benchmark_s, std::size_t workers, double start_s,
    const std::function<bool(double)>& enough, const std::function<void(std::size_t)>& asked) {
  workers = std::max<std::size_t>(1, workers);
  std::deque<std::size_t> waiting;                        // asked for, no worker yet
  std::vector<std::pair<double, std::size_t>> compiling;  // (ends, position), per busy worker
  std::optional<std::pair<double, std::size_t>> gpu;      // the measurement running
  std::vector<TimedMeasurement> out;
  double now = start_s;
  for (;;) {
    while (auto pos = stream.next_to_compile()) {
      waiting.push_back(*pos);
      if (asked) asked(*pos);
    }
    while (compiling.size() < workers && !waiting.empty()) {
      compiling.emplace_back(now + std::max(0.0, compile_s(waiting.front())), waiting.front());
      waiting.pop_front();
    }
    if (!gpu)
      if (auto pos = stream.next_to_measure()) {
        gpu.emplace(now + std::max(0.0, benchmark_s(*pos)), *pos);
        continue;
      }
    if (!gpu && compiling.empty()) break;  // nothing in flight: the stream is done or dry
    // The next event: a measurement ends (first, at a tie: its outcome is reported before what
    // compiled at the same instant is ready), or a compile does.
    auto first = std::min_element(compiling.begin(), compiling.end());
    if (gpu && (first == compiling.end() || gpu->first <= first->first)) {
      now = gpu->first;
      const std::size_t pos = gpu->second;
      gpu.reset();
      const std::optional<double> ms = measure(pos);
      out.push_back({pos, now});
      stream.measured(pos, ms);
      if ((enough && enough(now)) || stream.done()) break;
      continue;
    }
    now = first->first;
    const std::size_t pos = first->second;
    compiling.erase(first);
    const CompileVerdict v = compile(pos);
    stream.compiled(pos, v.usable, v.prediction, v.sets_best);
  }
  return out;
}

}  // namespace gputune::tuner
