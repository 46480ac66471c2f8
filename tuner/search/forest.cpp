#include "tuner/search/forest.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gputune::tuner {

Forest::Forest(std::vector<std::uint32_t> ranks, Options options)
    : ranks_(std::move(ranks)), o_(options) {
  const std::uint32_t most = ranks_.empty() ? 1 : *std::max_element(ranks_.begin(), ranks_.end());
  count_.assign(most, 0);
  sum_.assign(most, 0);
  order_.resize(ranks_.size());
  std::iota(order_.begin(), order_.end(), std::size_t{0});
}

void Forest::fit(const std::vector<std::uint32_t>& x, const std::vector<double>& y,
                 std::mt19937_64& rng) {
  nodes_.clear();
  const std::size_t n = y.size();
  if (n == 0 || ranks_.empty()) return;
  const std::size_t draws =
      std::max<std::size_t>(1, static_cast<std::size_t>(o_.bootstrap * static_cast<double>(n)));
  nodes_.resize(o_.trees);
  std::vector<std::uint32_t> rows(draws);
  for (auto& tree : nodes_) {
    for (auto& r : rows) r = static_cast<std::uint32_t>(rng() % n);
    tree.reserve(2 * draws);
    tree.emplace_back();
    grow(tree, x, y, rows, 0, draws, rng);
  }
}

std::uint32_t Forest::grow(std::vector<Node>& tree, const std::vector<std::uint32_t>& x,
                           const std::vector<double>& y, std::vector<std::uint32_t>& rows,
                           std::size_t begin, std::size_t end, std::mt19937_64& rng) {
  // The node to fill is the last one added (the caller added it).
  const auto self = static_cast<std::uint32_t>(tree.size() - 1);
  const std::size_t P = ranks_.size(), n = end - begin;
  double total = 0, total_sq = 0;
  for (std::size_t k = begin; k < end; ++k)
    total += y[rows[k]], total_sq += y[rows[k]] * y[rows[k]];
  tree[self].value = total / static_cast<double>(n);
  const double sse = total_sq - total * total / static_cast<double>(n);
  if (n < 2 * o_.min_leaf || !(sse > 1e-12)) return self;
  // The features tried: a random subset (a partial shuffle).
  const std::size_t tried = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::ceil(o_.features_tried * static_cast<double>(P))), 1, P);
  for (std::size_t k = 0; k < tried; ++k)
    std::swap(order_[k], order_[k + static_cast<std::size_t>(rng() % (P - k))]);
  double best_gain = 1e-12 * sse;
  std::int32_t best_feature = -1;
  std::uint32_t best_threshold = 0;
  for (std::size_t t = 0; t < tried; ++t) {
    const std::size_t p = order_[t];
    const std::uint32_t R = ranks_[p];
    if (R < 2) continue;
    std::fill(count_.begin(), count_.begin() + R, 0.0);
    std::fill(sum_.begin(), sum_.begin() + R, 0.0);
    for (std::size_t k = begin; k < end; ++k) {
      const std::uint32_t v = x[rows[k] * P + p];
      count_[v] += 1, sum_[v] += y[rows[k]];
    }
    // Left: ranks <= r. SSE reduction = sumL^2/nL + sumR^2/nR - total^2/n.
    double nl = 0, sl = 0;
    for (std::uint32_t r = 0; r + 1 < R; ++r) {
      nl += count_[r], sl += sum_[r];
      const double nr = static_cast<double>(n) - nl;
      if (count_[r] == 0 || nl < static_cast<double>(o_.min_leaf) ||
          nr < static_cast<double>(o_.min_leaf))
        continue;
      const double sr = total - sl;
      const double gain = sl * sl / nl + sr * sr / nr - total * total / static_cast<double>(n);
      if (gain > best_gain)
        best_gain = gain, best_feature = static_cast<std::int32_t>(p), best_threshold = r;
    }
  }
  if (best_feature < 0) return self;
  // Partition the rows: rank <= threshold first.
  const auto p = static_cast<std::size_t>(best_feature);
  auto mid =
      std::partition(rows.begin() + static_cast<long>(begin), rows.begin() + static_cast<long>(end),
                     [&](std::uint32_t r) { return x[r * P + p] <= best_threshold; });
  const std::size_t split = static_cast<std::size_t>(mid - rows.begin());
  tree[self].feature = best_feature;
  tree[self].threshold = best_threshold;
  tree.emplace_back();
  const std::uint32_t left = grow(tree, x, y, rows, begin, split, rng);
  tree.emplace_back();
  const std::uint32_t right = grow(tree, x, y, rows, split, end, rng);
  tree[self].left = left, tree[self].right = right;
  return self;
}

double Forest::predict_tree(std::size_t t, const std::uint32_t* row) const {
  const auto& tree = nodes_[t];
  std::uint32_t k = 0;
  while (tree[k].feature >= 0)
    k = row[tree[k].feature] <= tree[k].threshold ? tree[k].left : tree[k].right;
  return tree[k].value;
}

Forest::Prediction Forest::predict(const std::uint32_t* row) const {
  Prediction out;
  if (nodes_.empty()) return out;
  double sum = 0, sq = 0;
  for (const auto& tree : nodes_) {
    std::uint32_t k = 0;
    while (tree[k].feature >= 0)
      k = row[tree[k].feature] <= tree[k].threshold ? tree[k].left : tree[k].right;
    sum += tree[k].value, sq += tree[k].value * tree[k].value;
  }
  const double t = static_cast<double>(nodes_.size());
  out.mean = sum / t;
  out.spread = std::sqrt(std::max(0.0, sq / t - out.mean * out.mean));
  return out;
}

}  // namespace gputune::tuner
