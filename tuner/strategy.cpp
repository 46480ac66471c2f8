#include "tuner/strategy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace gputune::tuner {

namespace {

class Ordered : public Strategy {
 public:
  Ordered(std::vector<size_t> order, std::string name)
      : order_(std::move(order)), name_(std::move(name)) {}
  std::optional<size_t> next() override {
    if (pos_ >= order_.size()) return std::nullopt;
    return order_[pos_++];
  }
  std::string name() const override { return name_; }

 private:
  std::vector<size_t> order_;
  size_t pos_ = 0;
  std::string name_;
};

}  // namespace

std::unique_ptr<Strategy> make_brute_force(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  return std::make_unique<Ordered>(std::move(order), "brute_force");
}

std::unique_ptr<Strategy> make_random(size_t n, std::uint64_t seed) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed);
  // Fisher-Yates with our own index draw: std::shuffle's output differs between standard libraries.
  for (size_t i = n; i > 1; --i) {
    size_t j = static_cast<size_t>(rng() % i);
    std::swap(order[i - 1], order[j]);
  }
  return std::make_unique<Ordered>(std::move(order), "random");
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, size_t n, std::uint64_t seed) {
  if (name == "brute_force") return make_brute_force(n);
  if (name == "random") return make_random(n, seed);
  throw std::invalid_argument("unknown strategy '" + name +
                              "' (known: brute_force, random; model_guided needs the model's "
                              "features and is built by the pipeline)");
}

ModelGuided::ModelGuided(std::vector<pruner::ModelFeatures> features, pruner::DeviceRates rates,
                         pruner::Calibration start, std::vector<bool> excluded)
    : features_(std::move(features)), rates_(rates), calibration_(start) {
  state_.assign(features_.size(), 0);
  for (size_t i = 0; i < excluded.size() && i < state_.size(); ++i)
    if (excluded[i]) state_[i] = 2;
  predicted_.assign(features_.size(), -1);
  for (size_t i = 0; i < features_.size(); ++i) {
    auto p = pruner::predict(features_[i], rates_, calibration_);
    if (p.ok) predicted_[i] = p.ms;
  }
}

std::optional<double> ModelGuided::predicted_ms(size_t i) const {
  if (i >= predicted_.size() || predicted_[i] < 0) return std::nullopt;
  return predicted_[i];
}

std::pair<double, double> ModelGuided::best_and_ratio() const {
  // The best measured time, and the model's most optimistic error so far (min measured/predicted),
  // never less than 25%.
  double best = -1, ratio = 0.8;
  for (auto& [i, ms] : measured_) {
    if (best < 0 || ms < best) best = ms;
    if (predicted_[i] > 0) ratio = std::min(ratio, ms / predicted_[i]);
  }
  return {best, ratio};
}

bool ModelGuided::can_stop() const {
  // Trust the model only once it has ranked what was measured well (Spearman >= 0.5 over >= 6).
  std::vector<double> p, m;
  for (auto& [i, ms] : measured_)
    if (predicted_[i] > 0) p.push_back(predicted_[i]), m.push_back(ms);
  if (p.size() < 6 || !(pruner::spearman(p, m) >= 0.5)) return false;
  auto [best, ratio] = best_and_ratio();
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0 && predicted_[i] > 0 && predicted_[i] * ratio < best) return false;
  return true;
}

std::optional<size_t> ModelGuided::next() {
  std::optional<size_t> pick;
  bool any_predicted_open = false;
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0 && predicted_[i] > 0) {
      any_predicted_open = true;
      if (!pick || predicted_[i] < predicted_[*pick]) pick = i;
    }
  if (any_predicted_open && stop_reason_.empty() && can_stop()) {
    auto [best, ratio] = best_and_ratio();
    double fastest = predicted_[*pick];  // the open variant with the lowest prediction
    std::ostringstream r;
    r.precision(4);
    r << "the best measured time " << best << " ms cannot be beaten: the fastest remaining "
      << "prediction is " << fastest << " ms, and even " << 1 / ratio
      << "x faster (the model's most optimistic error so far, at least 1.25x) it would not win";
    stop_reason_ = r.str();
  }
  if (!stop_reason_.empty()) pick.reset();
  if (!pick)  // unpredicted variants: not judged by the model, so never cut
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i] == 0 && predicted_[i] < 0) {
        pick = i;
        break;
      }
  if (pick) state_[*pick] = 1;
  return pick;
}

void ModelGuided::report(size_t index, std::optional<double> ms) {
  if (!ms || !(*ms > 0) || index >= state_.size()) return;
  measured_.emplace_back(index, *ms);
  if (measured_.size() >= next_refit_) {
    refit();
    next_refit_ *= 2;
  }
}

void ModelGuided::refit() {
  std::vector<pruner::ModelFeatures> f;
  std::vector<double> m;
  for (auto& [i, ms] : measured_)
    if (features_[i].ok) f.push_back(features_[i]), m.push_back(ms);
  pruner::Calibration c = pruner::calibrate(f, m, rates_, calibration_);
  if (c.samples == 0) return;
  calibration_ = c;
  for (size_t i = 0; i < features_.size(); ++i) {
    auto p = pruner::predict(features_[i], rates_, calibration_);
    predicted_[i] = p.ok ? p.ms : -1;
  }
}

std::vector<size_t> ModelGuided::unvisited() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0) out.push_back(i);
  return out;
}

size_t budget_configurations(const Budget& b, size_t n) {
  size_t limit = n;
  if (b.max_configurations) limit = std::min<size_t>(limit, *b.max_configurations);
  if (b.fraction)
    limit = std::min<size_t>(limit,
                             static_cast<size_t>(std::ceil(*b.fraction * static_cast<double>(n))));
  return limit;
}

std::vector<size_t> plan(Strategy& s, size_t limit) {
  std::vector<size_t> out;
  while (out.size() < limit) {
    auto i = s.next();
    if (!i) break;
    out.push_back(*i);
  }
  return out;
}

}  // namespace gputune::tuner
