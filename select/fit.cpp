/** \file select/fit.cpp
 * Owns: choosing for an input that was not tuned, from those that were: the nearest in log2
 * problem size, a small decision tree over the log2 sizes (greedy splits at midpoints between
 * tuned sizes, each leaf the candidate with the smallest sum of slowdowns), the largest input's
 * winner (the baseline), and the leave-one-out test that decides between nearest and the tree. */
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "select/decision_table.h"

namespace gputune::select {

const char* to_string(How how) {
  switch (how) {
    case How::kMeasured:
      return "measured";
    case How::kNearest:
      return "nearest";
    case How::kLearned:
      return "learned";
  }
  return "?";
}

TreeNode::TreeNode(const TreeNode& o) : config(o.config), dim(o.dim), split(o.split) {
  if (o.lo) lo = std::make_unique<TreeNode>(*o.lo);
  if (o.hi) hi = std::make_unique<TreeNode>(*o.hi);
}

TreeNode& TreeNode::operator=(const TreeNode& o) {
  if (this != &o) *this = TreeNode(o);
  return *this;
}

const std::string& TreeNode::decide(const std::vector<double>& log_size) const {
  const TreeNode* n = this;
  while (!n->leaf()) {
    const auto d = static_cast<size_t>(n->dim);
    const double x = d < log_size.size() ? log_size[d] : 0.0;
    n = x <= n->split ? n->lo.get() : n->hi.get();
  }
  return n->config;
}

int TreeNode::depth() const { return leaf() ? 0 : 1 + std::max(lo->depth(), hi->depth()); }

int KernelTable::dims() const {
  int dims = 1;
  for (const DeviceTable& d : devices)
    for (const TunedInput& in : d.inputs)
      for (size_t i = 0; i < in.size.size(); ++i)
        if (in.size[i] != 1) dims = std::max(dims, static_cast<int>(i) + 1);
  return dims;
}

std::vector<double> log_size(const std::vector<std::int64_t>& size) {
  std::vector<double> out(std::max<size_t>(size.size(), 3), 0.0);
  for (size_t i = 0; i < size.size(); ++i)
    out[i] = std::log2(static_cast<double>(std::max<std::int64_t>(size[i], 1)));
  return out;
}

double log_distance(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  const auto la = log_size(a), lb = log_size(b);
  double sum = 0;
  for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    const double d = (i < la.size() ? la[i] : 0) - (i < lb.size() ? lb[i] : 0);
    sum += d * d;
  }
  return sum;
}

namespace {

double work(const TunedInput& in) {
  double w = 1;
  for (auto s : in.size) w *= static_cast<double>(std::max<std::int64_t>(s, 1));
  return w;
}

/// Slowdown of configuration `c` in input `in` (kUnmeasuredPenalty when never measured there).
double slowdown(const TunedInput& in, const std::string& c) {
  auto it = in.times_ms.find(c);
  if (it == in.times_ms.end() || in.best_ms <= 0) return kUnmeasuredPenalty;
  return it->second / in.best_ms;
}

/// The candidate with the smallest sum of slowdowns over `members`, ties to the smallest key.
std::pair<std::string, double> best_leaf(const std::vector<const TunedInput*>& members,
                                         const std::set<std::string>& candidates) {
  std::string best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const std::string& c : candidates) {
    double cost = 0;
    for (const TunedInput* in : members) cost += slowdown(*in, c);
    if (cost < best_cost - 1e-12) best = c, best_cost = cost;
  }
  return {best, best_cost};
}

TreeNode grow(const std::vector<const TunedInput*>& members, const std::set<std::string>& cands,
              int depth_left) {
  TreeNode node;
  auto [leaf_config, leaf_cost] = best_leaf(members, cands);
  node.config = leaf_config;
  if (depth_left == 0 || members.size() < 2 || leaf_cost <= static_cast<double>(members.size()))
    return node;  // one configuration is the best everywhere here: nothing to split
  double best_cost = leaf_cost;
  int best_dim = -1;
  double best_split = 0;
  for (int d = 0; d < 3; ++d) {
    std::set<double> xs;
    for (const TunedInput* in : members) xs.insert(log_size(in->size)[static_cast<size_t>(d)]);
    for (auto it = xs.begin(); std::next(it) != xs.end(); ++it) {
      const double split = (*it + *std::next(it)) / 2;
      std::vector<const TunedInput*> lo, hi;
      for (const TunedInput* in : members)
        (log_size(in->size)[static_cast<size_t>(d)] <= split ? lo : hi).push_back(in);
      const double cost = best_leaf(lo, cands).second + best_leaf(hi, cands).second;
      if (cost < best_cost - 1e-9) best_cost = cost, best_dim = d, best_split = split;
    }
  }
  if (best_dim < 0) return node;
  std::vector<const TunedInput*> lo, hi;
  for (const TunedInput* in : members)
    (log_size(in->size)[static_cast<size_t>(best_dim)] <= best_split ? lo : hi).push_back(in);
  node.config.clear();
  node.dim = best_dim, node.split = best_split;
  node.lo = std::make_unique<TreeNode>(grow(lo, cands, depth_left - 1));
  node.hi = std::make_unique<TreeNode>(grow(hi, cands, depth_left - 1));
  if (node.lo->leaf() && node.hi->leaf() && node.lo->config == node.hi->config) {
    TreeNode merged;
    merged.config = node.lo->config;
    return merged;
  }
  return node;
}

LooFigures figures(const std::vector<double>& known, int contexts) {
  LooFigures f;
  f.contexts = contexts;
  f.unknown = contexts - static_cast<int>(known.size());
  if (known.empty()) return f;
  std::vector<double> v = known;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  f.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  f.worst = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  f.mean = sum / static_cast<double>(n);
  return f;
}

}  // namespace

int nearest_input(const std::vector<TunedInput>& inputs, const std::vector<std::int64_t>& size,
                  int skip) {
  int best = -1;
  double best_d = 0;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    if (i == skip) continue;
    const double d = log_distance(inputs[static_cast<size_t>(i)].size, size);
    if (best < 0 || d < best_d - 1e-12 ||
        (std::abs(d - best_d) <= 1e-12 &&
         work(inputs[static_cast<size_t>(i)]) > work(inputs[static_cast<size_t>(best)])))
      best = i, best_d = d;
  }
  return best;
}

int largest_input(const std::vector<TunedInput>& inputs, int skip) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i)
    if (i != skip && (best < 0 || work(inputs[static_cast<size_t>(i)]) >
                                      work(inputs[static_cast<size_t>(best)])))
      best = i;
  return best;
}

std::optional<TreeNode> fit_tree(const std::vector<TunedInput>& inputs, int skip, int max_depth) {
  std::vector<const TunedInput*> members;
  std::set<std::string> cands;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    if (i == skip) continue;
    const TunedInput& in = inputs[static_cast<size_t>(i)];
    members.push_back(&in);
    for (const auto& [c, t] : in.times_ms) cands.insert(c);
    cands.insert(in.winner);
  }
  if (members.empty()) return std::nullopt;
  return grow(members, cands, max_depth);
}

std::string choose_without(const DeviceTable& d, How how, int i) {
  const TunedInput& hidden = d.inputs[static_cast<size_t>(i)];
  switch (how) {
    case How::kMeasured:
      return hidden.winner;
    case How::kNearest: {
      const int n = nearest_input(d.inputs, hidden.size, i);
      return n < 0 ? "" : d.inputs[static_cast<size_t>(n)].winner;
    }
    case How::kLearned: {
      const auto tree = fit_tree(d.inputs, i);
      return tree ? tree->decide(log_size(hidden.size)) : "";
    }
  }
  return "";
}

std::vector<LooRow> leave_one_out_rows(const DeviceTable& d) {
  std::vector<LooRow> rows;
  if (d.inputs.size() < 2) return rows;
  auto ratio = [&](int i, const std::string& c) -> std::optional<double> {
    const TunedInput& in = d.inputs[static_cast<size_t>(i)];
    auto it = in.times_ms.find(c);
    if (c.empty() || it == in.times_ms.end() || in.best_ms <= 0) return std::nullopt;
    return it->second / in.best_ms;
  };
  for (int i = 0; i < static_cast<int>(d.inputs.size()); ++i) {
    LooRow r;
    r.label = d.inputs[static_cast<size_t>(i)].label;
    r.nearest = choose_without(d, How::kNearest, i);
    r.learned = choose_without(d, How::kLearned, i);
    const int l = largest_input(d.inputs, i);
    r.largest = l < 0 ? "" : d.inputs[static_cast<size_t>(l)].winner;
    r.nearest_ratio = ratio(i, r.nearest), r.learned_ratio = ratio(i, r.learned);
    r.largest_ratio = ratio(i, r.largest);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::optional<LooReport> leave_one_out(const DeviceTable& d) {
  const auto rows = leave_one_out_rows(d);
  if (rows.empty()) return std::nullopt;
  std::vector<double> nearest, learned, largest;
  for (const LooRow& r : rows) {
    if (r.nearest_ratio) nearest.push_back(*r.nearest_ratio);
    if (r.learned_ratio) learned.push_back(*r.learned_ratio);
    if (r.largest_ratio) largest.push_back(*r.largest_ratio);
  }
  const int n = static_cast<int>(rows.size());
  return LooReport{figures(nearest, n), figures(learned, n), figures(largest, n)};
}

void fit(DeviceTable& d) {
  d.tree.reset();
  d.method = How::kNearest;
  d.loo = leave_one_out(d);
  if (d.inputs.size() < 3) return;  // a tree over two inputs is nearest with another boundary
  d.tree = fit_tree(d.inputs);
  if (!d.loo) return;
  const LooFigures& near = d.loo->nearest;
  const LooFigures& tree = d.loo->learned;
  // The tree must know at least as many answers and do better on average, no worse at worst.
  if (tree.unknown <= near.unknown && tree.contexts - tree.unknown > 0 &&
      tree.mean < near.mean - 1e-9 && tree.worst <= near.worst + 1e-9)
    d.method = How::kLearned;
}

}  // namespace gputune::select
