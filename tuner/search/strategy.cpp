// The plain strategies (brute force, a list, random) and the budget helpers
// (tuner/search/strategy.h). ParameterEffects: parameter_effects.cpp; ModelGuided:
// model_guided.cpp.
#include "tuner/search/strategy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
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

std::unique_ptr<Strategy> make_list(std::vector<size_t> order) {
  return std::make_unique<Ordered>(std::move(order), "list");
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
