#include "tuner/search/methodology.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

namespace gputune::tuner {

namespace methodology_detail {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<long>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<long>(n / 2));
  return (lo + hi) / 2;
}

std::vector<double> linspace(double a, double b, size_t n) {
  std::vector<double> out(n);
  if (n == 1) out[0] = a;
  if (n < 2) return out;
  const double step = (b - a) / static_cast<double>(n - 1);
  for (size_t i = 0; i < n; ++i) out[i] = a + static_cast<double>(i) * step;
  out[n - 1] = b;  // as numpy: the end point exactly
  return out;
}

namespace {
double sign(double v) { return (v > 0) - (v < 0); }
/// scipy's PchipInterpolator._edge_case: the one-sided three-point end slope, shape preserving.
double edge_slope(double h0, double h1, double m0, double m1) {
  double d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1);
  if (sign(d) != sign(m0))
    d = 0;
  else if (sign(m0) != sign(m1) && std::abs(d) > 3 * std::abs(m0))
    d = 3 * m0;
  return d;
}
}  // namespace

std::vector<double> pchip(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& at) {
  const size_t n = x.size();
  std::vector<double> h(n - 1), m(n - 1), d(n);
  for (size_t k = 0; k + 1 < n; ++k) h[k] = x[k + 1] - x[k], m[k] = (y[k + 1] - y[k]) / h[k];
  if (n == 2) {
    d[0] = d[1] = m[0];
  } else {
    // Interior: the weighted harmonic mean of the neighbouring slopes where they agree in sign.
    for (size_t k = 1; k + 1 < n; ++k) {
      if (sign(m[k - 1]) != sign(m[k]) || m[k - 1] == 0 || m[k] == 0) {
        d[k] = 0;
        continue;
      }
      const double w1 = 2 * h[k] + h[k - 1], w2 = h[k] + 2 * h[k - 1];
      d[k] = 1 / ((w1 / m[k - 1] + w2 / m[k]) / (w1 + w2));
    }
    d[0] = edge_slope(h[0], h[1], m[0], m[1]);
    d[n - 1] = edge_slope(h[n - 2], h[n - 3], m[n - 2], m[n - 3]);
  }
  std::vector<double> out;
  out.reserve(at.size());
  for (double v : at) {
    // The interval as scipy's PPoly finds it: the last breakpoint at or below v.
    size_t k = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), v) - x.begin());
    k = k == 0 ? 0 : std::min(k - 1, n - 2);
    const double t = (v - x[k]) / h[k], t2 = t * t, t3 = t2 * t;
    out.push_back((2 * t3 - 3 * t2 + 1) * y[k] + (t3 - 2 * t2 + t) * h[k] * d[k] +
                  (-2 * t3 + 3 * t2) * y[k + 1] + (t3 - t2) * h[k] * d[k + 1]);
  }
  return out;
}

std::vector<double> isotonic_decreasing(const std::vector<double>& x, const std::vector<double>& y,
                                        const std::vector<double>& at) {
  // Sorted by x (then y); equal x's become one point, their mean, weighted by their count.
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return x[a] != x[b] ? x[a] < x[b] : y[a] < y[b]; });
  std::vector<double> ux, uy, w;
  for (size_t i : order) {
    if (!ux.empty() && ux.back() == x[i]) {
      uy.back() += y[i], w.back() += 1;
      continue;
    }
    ux.push_back(x[i]), uy.push_back(y[i]), w.push_back(1);
  }
  for (size_t k = 0; k < uy.size(); ++k) uy[k] /= w[k];
  // Pool adjacent violators, decreasing: blocks of (mean, weight, length), merged while a block
  // is above the one before it.
  struct Block {
    double mean, weight;
    size_t length;
  };
  std::vector<Block> blocks;
  for (size_t k = 0; k < uy.size(); ++k) {
    blocks.push_back({uy[k], w[k], 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean < blocks.back().mean) {
      Block b = blocks.back();
      blocks.pop_back();
      Block& a = blocks.back();
      a.mean = (a.mean * a.weight + b.mean * b.weight) / (a.weight + b.weight);
      a.weight += b.weight, a.length += b.length;
    }
  }
  std::vector<double> fit;
  fit.reserve(uy.size());
  for (const Block& b : blocks) fit.insert(fit.end(), b.length, b.mean);
  // Predictions: linear between the fitted points, clipped to their range of x.
  std::vector<double> out;
  out.reserve(at.size());
  for (double v : at) {
    if (v <= ux.front()) {
      out.push_back(fit.front());
      continue;
    }
    if (v >= ux.back()) {
      out.push_back(fit.back());
      continue;
    }
    const size_t k = static_cast<size_t>(std::upper_bound(ux.begin(), ux.end(), v) - ux.begin());
    const double t = (v - ux[k - 1]) / (ux[k] - ux[k - 1]);
    out.push_back(fit[k - 1] + t * (fit[k] - fit[k - 1]));
  }
  return out;
}

std::vector<double> isotonic_decreasing_bagged(const std::vector<double>& x,
                                               const std::vector<double>& y,
                                               const std::vector<double>& at, size_t estimators,
                                               unsigned long long seed) {
  const size_t n = x.size();
  estimators = std::max<size_t>(estimators, 1);
  // sklearn's _get_n_samples_bootstrap: round(n x max_samples), at least one.
  const auto draws = std::max<size_t>(
      1, static_cast<size_t>(
             std::llround(static_cast<double>(n) / std::sqrt(static_cast<double>(estimators)))));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> mean(at.size(), 0.0), bx(draws), by(draws);
  for (size_t e = 0; e < estimators; ++e) {
    for (size_t d = 0; d < draws; ++d) {
      const size_t i = pick(rng);
      bx[d] = x[i], by[d] = y[i];
    }
    const std::vector<double> fit = isotonic_decreasing(bx, by, at);
    for (size_t k = 0; k < at.size(); ++k) mean[k] += fit[k];
  }
  for (double& v : mean) v /= static_cast<double>(estimators);
  return mean;
}

}  // namespace methodology_detail

namespace md = methodology_detail;

namespace {
/// numpy.round then int: half to even (the default rounding mode).
long round_even(double v) { return static_cast<long>(std::nearbyint(v)); }
}  // namespace

Methodology::Methodology(std::vector<ScoredConfig> space, size_t resolution)
    : space_(std::move(space)), resolution_(std::max<size_t>(resolution, 2)) {
  std::vector<double> valid_cost, invalid_cost, cost;
  for (const ScoredConfig& c : space_) {
    cost.push_back(c.cost_s());
    if (c.time_ms) {
      dist_.push_back(*c.time_ms);
      valid_cost.push_back(c.cost_s());
    } else {
      invalid_cost.push_back(c.cost_s());
    }
  }
  if (dist_.size() < 2)
    throw std::invalid_argument("the score needs at least two configurations with a time, and " +
                                std::to_string(dist_.size()) + " has one");
  std::sort(dist_.begin(), dist_.end());
  median_ = md::median(dist_);
  seconds_median_ = md::median(cost);
  // The package's "mean_per_feval": a valid draw's mean cost plus the chance of an invalid one
  // times an invalid draw's mean cost.
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  seconds_per_draw_ = mean(valid_cost);
  if (!invalid_cost.empty())
    seconds_per_draw_ += static_cast<double>(invalid_cost.size()) /
                         static_cast<double>(space_.size()) * mean(invalid_cost);
  if (!(seconds_per_draw_ > 0))
    throw std::invalid_argument(
        "the score over time needs what each configuration cost (compile and benchmark time), "
        "and the measurements give none");
  Cutoff start = cutoff(0.01), end = cutoff(0.95);
  // The package widens a range shorter than two measurements (it takes the optimum's time for
  // cutoff(1.0)'s measurements there, a slip; the measurements are meant, as here).
  if (end.fevals - std::min(end.fevals, start.fevals) < 2) {
    const size_t all = cutoff(1.0).fevals;
    if (start.fevals == 0) {
      end.fevals = std::min(all, end.fevals + 2);
    } else {
      end.fevals = std::min(all, end.fevals + 1);
      start.fevals -= 1;
    }
  }
  if (end.fevals <= start.fevals)
    throw std::invalid_argument(
        "random search is expected to find a time within 5% of the way from the optimum to the "
        "median at once: there is no range of budgets to score over");
  fevals_start_ = start.fevals, fevals_end_ = end.fevals;
  time_start_ = static_cast<double>(fevals_start_) * seconds_median_;
  time_end_ = static_cast<double>(fevals_end_) * seconds_median_;
  time_range_ = md::linspace(time_start_, time_end_, resolution_);
}

Methodology::Cutoff Methodology::cutoff(double p) const {
  const double opt = dist_.front();
  const double target = opt + (median_ - opt) * (1 - p);
  const size_t n = dist_.size();
  // From the worst time down, the first at or below the target.
  size_t i = 0;
  while (i < n && !(dist_[n - 1 - i] <= target)) ++i;
  if (p != 1.0 && dist_[n - 1 - i] == opt) {
    if (i == 0) throw std::invalid_argument("every valid time is the optimum: nothing to score");
    i -= 1;
  }
  const double f = std::ceil(static_cast<double>(i) / static_cast<double>(n + 1 - i));
  return {target, static_cast<size_t>(f)};
}

double Methodology::random_best(size_t k) const {
  const size_t n = dist_.size();
  const double at =
      static_cast<double>(k) * static_cast<double>(n + 1) / static_cast<double>(k + 1);
  const size_t from_worst = std::min<size_t>(n - 1, static_cast<size_t>(round_even(at)));
  return dist_[n - 1 - from_worst];
}

size_t Methodology::measurements_needed() const {
  return static_cast<size_t>(std::ceil(static_cast<double>(fevals_end_) * 1.1));
}

double Methodology::seconds_needed() const { return time_end_ * 1.1; }

std::vector<double> Methodology::random_over_time() const {
  std::vector<double> fevals, draws;
  for (double t : time_range_) {
    const double k = static_cast<double>(round_even(std::max(t / seconds_per_draw_, 1.0)));
    fevals.push_back(k);
    draws.push_back(random_best(static_cast<size_t>(k)));
  }
  // The package smooths the steps with PCHIP through each draw count's first point, sampled at
  // evenly spaced draw counts over the same span.
  std::vector<double> x, y;
  for (size_t i = 0; i < fevals.size(); ++i)
    if (i == 0 || fevals[i] > fevals[i - 1]) x.push_back(fevals[i]), y.push_back(draws[i]);
  if (fevals.size() <= 2 || x.size() < 2) return draws;
  return md::pchip(x, y, md::linspace(fevals.front(), fevals.back(), fevals.size()));
}

double Methodology::rank(double ms) const {
  return static_cast<double>(std::lower_bound(dist_.begin(), dist_.end(), ms) - dist_.begin());
}

namespace {
/// Each seed's best rank so far per measurement (NaN until it measured a valid time).
std::vector<std::vector<double>> best_ranks(const std::vector<Trajectory>& seeds,
                                            const std::vector<ScoredConfig>& space,
                                            const std::function<double(double)>& rank) {
  std::vector<std::vector<double>> out;
  for (const Trajectory& s : seeds) {
    std::vector<double> r;
    double best = std::numeric_limits<double>::quiet_NaN();
    for (auto& [i, clock] : s.evaluations) {
      if (i < space.size() && space[i].time_ms) {
        const double k = rank(*space[i].time_ms);
        if (std::isnan(best) || k < best) best = k;
      }
      r.push_back(best);
    }
    out.push_back(std::move(r));
  }
  return out;
}
}  // namespace

double Methodology::over_measurements(const std::vector<Trajectory>& seeds) const {
  const auto ranks = best_ranks(seeds, space_, [&](double ms) { return rank(ms); });
  const double opt = dist_.front();
  double sum = 0;
  size_t points = 0;
  for (size_t f = fevals_start_; f <= fevals_end_; ++f) {
    std::vector<double> at;
    for (const auto& r : ranks) {
      if (r.empty() || f == 0) continue;
      // A seed that ended before f (a search that stopped) keeps its best.
      const double v = r[std::min(f, r.size()) - 1];
      if (!std::isnan(v)) at.push_back(v);
    }
    // No seed has a valid time yet: the worst time (the package has no value there).
    const double curve = at.empty() ? dist_.back()
                                    : dist_[std::clamp<long>(round_even(md::median(at)), 0,
                                                             static_cast<long>(dist_.size()) - 1)];
    const double random = random_best(std::max<size_t>(f, 1));
    if (opt == random) return std::numeric_limits<double>::quiet_NaN();
    sum += (curve - random) / (opt - random);
    ++points;
  }
  return sum / static_cast<double>(points);
}

double Methodology::over_time(const std::vector<Trajectory>& seeds, std::string& note) const {
  const auto ranks = best_ranks(seeds, space_, [&](double ms) { return rank(ms); });
  size_t rows = 0;  // measurements at which some seed has a valid time
  for (size_t j = 0;; ++j) {
    bool any = false, within = false;
    for (const auto& r : ranks)
      if (j < r.size()) within = true, any = any || !std::isnan(r[j]);
    if (!within) break;
    rows += any;
  }
  if (rows == 0) {
    note = "no seed measured a valid time";
    return std::numeric_limits<double>::quiet_NaN();
  }
  // The package's window around the range (wider when there are few points per seed).
  const double margin =
      0.1 + 0.25 * (static_cast<double>(seeds.size()) / static_cast<double>(rows * seeds.size()));
  const double lo = time_range_.front() * (1 - margin), hi = time_range_.back() * (1 + margin);
  std::vector<double> x, y, highest;
  for (size_t s = 0; s < seeds.size(); ++s) {
    size_t inside = 0;
    double last = -INFINITY;
    for (size_t j = 0; j < ranks[s].size(); ++j) {
      if (std::isnan(ranks[s][j])) continue;
      const double t = seeds[s].evaluations[j].second;
      last = std::max(last, t);
      if (t < lo || t > hi) continue;
      x.push_back(t), y.push_back(ranks[s][j]);
      ++inside;
    }
    if (inside < 2) {
      note =
          "a seed has fewer than two measurements within the time range (the package "
          "refuses such a run): run the searches longer";
      return std::numeric_limits<double>::quiet_NaN();
    }
    highest.push_back(last);
  }
  // The package's bagging: one estimator per seed, at least three.
  std::vector<double> fit = md::isotonic_decreasing_bagged(
      x, y, time_range_, std::max<size_t>(seeds.size(), 3), 0x5eedULL);
  std::vector<double> curve;
  for (double v : fit)
    curve.push_back(dist_[std::clamp<long>(round_even(v), 0, static_cast<long>(dist_.size()) - 1)]);
  // Where most seeds had ended the curve stays at its value (the package's real stopping point:
  // the first seed's end after the median end).
  std::sort(highest.begin(), highest.end());
  const double med = md::median(highest);
  auto after = std::upper_bound(highest.begin(), highest.end(), med);
  if (after != highest.end() && *after < time_range_.back()) {
    if (*after <= time_range_.front()) {
      note = "most seeds ended before the time range";
      return std::numeric_limits<double>::quiet_NaN();
    }
    const size_t from = static_cast<size_t>(
        std::upper_bound(time_range_.begin(), time_range_.end(), *after) - time_range_.begin());
    for (size_t i = from; i < curve.size(); ++i) curve[i] = curve[from];
  }
  const std::vector<double> random = random_over_time();
  const double opt = dist_.front();
  double sum = 0;
  for (size_t i = 0; i < curve.size(); ++i) {
    if (opt == random[i]) {
      note = "random search reaches the optimum within the range";
      return std::numeric_limits<double>::quiet_NaN();
    }
    sum += (curve[i] - random[i]) / (opt - random[i]);
  }
  return sum / static_cast<double>(curve.size());
}

MethodologyScore Methodology::score(const std::vector<Trajectory>& seeds) const {
  MethodologyScore s;
  if (seeds.empty()) {
    s.over_measurements = s.over_time = std::numeric_limits<double>::quiet_NaN();
    s.note = "no seeds";
    return s;
  }
  s.over_measurements = over_measurements(seeds);
  s.over_time = over_time(seeds, s.note);
  return s;
}

}  // namespace gputune::tuner
