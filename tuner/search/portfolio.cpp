#include "tuner/search/portfolio.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace gputune::tuner {

namespace {
constexpr double kLog2 = 0.6931471805599453;
/// The standard normal density and distribution.
double phi(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
}  // namespace

const char* Portfolio::search_name(int arm) {
  switch (arm) {
    case kSurrogate:
      return "surrogate";
    case kLocal:
      return "local";
    case kRandom:
      return "random";
    case kModel:
      return "model";
    case kRecombine:
      return "recombination";

    default:
      return "none";
  }
}

Portfolio::Portfolio(const std::vector<Config>& configs, std::uint64_t seed, Options options)
    : o_(options),
      rng_(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL +
           options.salt * 0xd1b54a32d192ed03ULL),
      uses_(kArms, 0) {
  const std::size_t n = configs.size();
  state_.assign(n, 0);
  by_.assign(n, -1);
  if (n == 0 || !configs[0].names) return;
  // Each parameter's values, ranked in numeric order where all are numbers (so that a neighbour
  // is the next block size, not the next value written), else in order of first appearance.
  const std::size_t all = configs[0].names->size();
  std::vector<std::uint32_t> source;
  std::vector<std::vector<std::uint32_t>> rank_of(all);
  for (std::size_t p = 0; p < all; ++p) {
    std::map<std::string, std::uint32_t> seen;
    std::vector<std::pair<std::string, double>> values;  // text, number (NaN: not one)
    bool numeric = true;
    rank_of[p].resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Value& v = configs[i].values[p];
      auto [it, fresh] = seen.emplace(v.str(), static_cast<std::uint32_t>(values.size()));
      if (fresh) {
        numeric = numeric && v.is_number();
        values.emplace_back(it->first, v.is_number() ? v.as_double() : NAN);
      }
      rank_of[p][i] = it->second;
    }
    if (values.size() < 2) continue;
    std::vector<std::uint32_t> order(values.size());
    std::iota(order.begin(), order.end(), 0u);
    if (numeric)
      std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return values[a].second < values[b].second;
      });
    std::vector<std::uint32_t> rank(values.size());
    for (std::uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
    for (auto& k : rank_of[p]) k = rank[k];
    ranks_.push_back(static_cast<std::uint32_t>(values.size()));
    source.push_back(static_cast<std::uint32_t>(p));
  }
  const std::size_t P = params();
  x_.resize(n * P);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t q = 0; q < P; ++q) x_[i * P + q] = rank_of[source[q]][i];
  seen_.resize(P);
  frequency_.resize(P);
  for (std::size_t q = 0; q < P; ++q) {
    seen_[q].assign(ranks_[q], 0);
    frequency_[q].assign(ranks_[q], 0);
    for (std::size_t i = 0; i < n; ++i) ++frequency_[q][x_[i * P + q]];
  }
  at_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) at_.emplace(hash(row(i)), static_cast<std::uint32_t>(i));
  open_.resize(n);
  std::iota(open_.begin(), open_.end(), std::size_t{0});
  open_at_ = open_;
  if (o_.initial == 0) o_.initial = std::clamp<std::size_t>(2 * P, 8, 24);
}

std::uint64_t Portfolio::hash(const std::uint32_t* r) const {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t q = 0; q < params(); ++q) h = (h ^ r[q]) * 0x100000001b3ULL;
  return h;
}

long Portfolio::find(const std::vector<std::uint32_t>& r) const {
  auto [lo, hi] = at_.equal_range(hash(r.data()));
  for (auto it = lo; it != hi; ++it)
    if (std::equal(r.begin(), r.end(), row(it->second))) return it->second;
  return -1;
}

void Portfolio::close(std::size_t i) {
  if (state_[i] != 0) return;
  const std::size_t at = open_at_[i], last = open_.back();
  open_[at] = last, open_at_[last] = at;
  open_.pop_back();
}

void Portfolio::exclude(const std::vector<std::size_t>& which) {
  for (std::size_t i : which)
    if (i < state_.size() && state_[i] == 0) close(i), state_[i] = 3;
}

void Portfolio::set_predictions(const std::vector<double>& predicted_ms) {
  predicted_.assign(state_.size(), NAN);
  std::vector<std::size_t> with;
  for (std::size_t i = 0; i < predicted_ms.size() && i < state_.size(); ++i)
    if (predicted_ms[i] > 0 && std::isfinite(predicted_ms[i]))
      predicted_[i] = std::log(predicted_ms[i]), with.push_back(i);
  // The model's order, and its prediction as a feature: the rank of the prediction among 32
  // quantiles (one more rank for none), so that trees split on "predicted among the fastest".
  std::stable_sort(with.begin(), with.end(),
                   [&](std::size_t a, std::size_t b) { return predicted_[a] < predicted_[b]; });
  model_order_ = with;
  model_at_ = 0;
  predicted_ranks_ = with.empty() ? 0 : 33;
  predicted_rank_.assign(state_.size(), 32);
  for (std::size_t k = 0; k < with.size(); ++k)
    predicted_rank_[with[k]] = static_cast<std::uint32_t>(32 * k / with.size());
  forest_.reset();
  fitted_at_ = 0;
}

void Portfolio::features(std::size_t i, std::uint32_t* out) const {
  std::copy(row(i), row(i) + params(), out);
  if (predicted_ranks_) out[params()] = predicted_rank_[i];
}

std::optional<std::size_t> Portfolio::next() {
  if (open_.empty()) return std::nullopt;
  ++proposals_;
  std::size_t valid = 0;
  for (auto& [i, y] : measured_) valid += !std::isnan(y);
  int arm = kRandom;
  // With the model, its order starts (its first proposals are the point of having one).
  if (predicted_ranks_ && (o_.arms & (1u << kModel)) && proposals_ <= 2)
    arm = kModel;
  else if (proposals_ > o_.initial && valid >= 2)
    arm = choose_arm();
  std::optional<std::size_t> pick;
  if (arm == kRandom && proposals_ <= o_.initial && o_.covering_start) pick = propose_covering();
  switch (pick ? -1 : arm) {
    case kSurrogate:
      pick = propose_surrogate();
      break;
    case kLocal:
      pick = propose_local();
      break;
    case kModel:
      pick = propose_model();
      break;
    case kRecombine:
      pick = propose_recombined();
      break;

    default:
      break;
  }
  if (!pick && arm == kRecombine) arm = kLocal, pick = propose_local();
  if (!pick && arm == kLocal && (o_.arms & (1u << kSurrogate)))
    arm = kSurrogate, pick = propose_surrogate();
  if (!pick) arm = kRandom, pick = propose_random();
  if (!pick) return std::nullopt;
  by_[*pick] = arm;
  ++uses_[static_cast<std::size_t>(arm)];
  cover(*pick);
  close(*pick);
  state_[*pick] = 1;
  return pick;
}

int Portfolio::choose_arm() {
  const PortfolioSettings::Shares& sh = o_.shares;
  const bool model = predicted_ranks_ && (o_.arms & (1u << kModel));
  std::uniform_real_distribution<double> u(0, 1);
  if (model && u(rng_) < sh.model) return kModel;
  const std::pair<int, double> arms[] = {{kSurrogate, sh.surrogate},
                                         {kLocal, sh.local},
                                         {kRandom, sh.random},
                                         {kRecombine, sh.recombination}};
  double total = 0;
  for (auto& [arm, share] : arms)
    if (o_.arms & (1u << arm)) total += std::max(0.0, share);
  if (!(total > 0)) return model ? kModel : kRandom;
  double x = u(rng_) * total;
  for (auto& [arm, share] : arms) {
    if (!(o_.arms & (1u << arm))) continue;
    if (x < std::max(0.0, share)) return arm;
    x -= std::max(0.0, share);
  }
  return kRandom;
}

std::optional<std::size_t> Portfolio::propose_random() {
  if (open_.empty()) return std::nullopt;
  // Draws until one is allowed; where the filter allows few, the allowed ones are listed.
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::size_t i = open_[static_cast<std::size_t>(rng_() % open_.size())];
    if (allowed(i)) return i;
  }
  std::vector<std::size_t> ok;
  for (std::size_t i : open_)
    if (allowed(i)) ok.push_back(i);
  if (ok.empty()) return std::nullopt;
  return ok[static_cast<std::size_t>(rng_() % ok.size())];
}

void Portfolio::taken(std::size_t i) {
  if (i >= state_.size() || state_[i] != 0) return;
  close(i);
  state_[i] = 1;
}

std::optional<std::size_t> Portfolio::propose_model() {
  while (model_at_ < model_order_.size() && state_[model_order_[model_at_]] != 0) ++model_at_;
  for (std::size_t k = model_at_; k < model_order_.size(); ++k)
    if (allowed(model_order_[k])) return model_order_[k];
  return std::nullopt;
}

std::optional<std::size_t> Portfolio::propose_local() {
  if (elites_.empty() || params() == 0) return std::nullopt;
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t P = params();
  std::vector<std::uint32_t> r(P);
  // A random move from an elite: the fastest half the time, the next a quarter, ...; one
  // parameter (most often) or more, each to an adjacent value (most often) or any value.
  auto move = [&](std::size_t most) -> std::optional<std::size_t> {
    std::size_t e = 0;
    while (e + 1 < elites_.size() && u(rng_) < 0.5) ++e;
    std::copy(row(elites_[e].second), row(elites_[e].second) + P, r.begin());
    std::size_t moves = 1;
    while (moves < most && u(rng_) < 0.3) ++moves;
    for (std::size_t m = 0; m < moves; ++m) {
      const std::size_t q = static_cast<std::size_t>(rng_() % P);
      const std::uint32_t R = ranks_[q];
      if (u(rng_) < 0.6) {
        const bool up = (rng_() & 1) ? r[q] + 1 < R : r[q] == 0;  // the other way at an end
        r[q] = up ? r[q] + 1 : r[q] - 1;
      } else {
        r[q] = static_cast<std::uint32_t>(rng_() % R);
      }
    }
    const long k = find(r);
    if (k >= 0 && allowed(static_cast<std::size_t>(k))) return static_cast<std::size_t>(k);
    return std::nullopt;
  };
  for (int attempt = 0; attempt < 48; ++attempt)
    if (auto k = move(2); k && (attempt >= 32 || !likely_fails(*k))) return k;
  // Every single move from each elite, fastest first: what is left next to the best.
  for (auto& [t, i] : elites_) {
    for (std::size_t q = 0; q < P; ++q) {
      std::copy(row(i), row(i) + P, r.begin());
      for (std::uint32_t v = 0; v < ranks_[q]; ++v) {
        r[q] = v;
        const long k = find(r);
        if (k >= 0 && allowed(static_cast<std::size_t>(k))) return static_cast<std::size_t>(k);
      }
    }
  }
  // The neighbourhood is measured: further moves (valid combinations often differ in several
  // parameters at once, as a tile that must divide a block).
  for (int attempt = 0; attempt < 256; ++attempt)
    if (auto k = move(P)) return k;
  return std::nullopt;
}

void Portfolio::cover(std::size_t i) {
  for (std::size_t q = 0; q < params(); ++q) ++seen_[q][row(i)[q]];
}

std::optional<std::size_t> Portfolio::propose_covering() {
  if (open_.empty()) return std::nullopt;
  std::optional<std::size_t> best;
  double best_score = -1;
  for (int k = 0; k < 256; ++k) {
    const std::size_t i = open_[static_cast<std::size_t>(rng_() % open_.size())];
    if (!allowed(i)) continue;
    // A value the constraints leave rare (in fewer than half of its share of the space) is
    // left to chance: covering it would spend the start on the space's corners.
    double score = 0;
    for (std::size_t q = 0; q < params(); ++q) {
      const std::uint32_t r = row(i)[q], c = seen_[q][r];
      if (2 * frequency_[q][r] * ranks_[q] < state_.size()) continue;
      score += (c == 0 ? 1.0 : 0.0) + 0.5 / (1.0 + c);
    }
    if (score > best_score) best_score = score, best = i;
  }
  return best;
}

std::optional<std::size_t> Portfolio::propose_recombined() {
  // Each parameter's value from one of the fastest few (as a genetic search's crossover, or the
  // grey wolves' leaders), now and then one moved to an adjacent value.
  const std::size_t parents = std::min<std::size_t>(4, elites_.size());
  if (parents < 2 || params() == 0) return std::nullopt;
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t P = params();
  std::vector<std::uint32_t> r(P);
  for (int attempt = 0; attempt < 64; ++attempt) {
    for (std::size_t q = 0; q < P; ++q)
      r[q] = row(elites_[static_cast<std::size_t>(rng_() % parents)].second)[q];
    if (u(rng_) < 0.3) {
      const std::size_t q = static_cast<std::size_t>(rng_() % P);
      const bool up = (rng_() & 1) ? r[q] + 1 < ranks_[q] : r[q] == 0;
      r[q] = up ? r[q] + 1 : r[q] - 1;
    }
    const long k = find(r);
    if (k >= 0 && allowed(static_cast<std::size_t>(k)) &&
        (attempt >= 48 || !likely_fails(static_cast<std::size_t>(k))))
      return static_cast<std::size_t>(k);
  }
  return std::nullopt;
}

bool Portfolio::likely_fails(std::size_t i) const {
  if (!forest_ || !forest_->fitted() || !std::isfinite(fail_line_)) return false;
  std::vector<std::uint32_t> f(params() + (predicted_ranks_ ? 1 : 0));
  features(i, f.data());
  return forest_->predict(f.data()).mean > fail_line_;
}

void Portfolio::refit() {
  const std::size_t F = params() + (predicted_ranks_ ? 1 : 0);
  std::vector<std::uint32_t> ranks = ranks_;
  if (predicted_ranks_) ranks.push_back(predicted_ranks_);
  if (!forest_) forest_.emplace(ranks, o_.forest);
  std::vector<std::uint32_t> x;
  std::vector<double> y;
  double worst = -INFINITY;
  for (auto& [i, t] : measured_)
    if (!std::isnan(t)) worst = std::max(worst, t);
  if (!std::isfinite(worst)) return;
  std::vector<std::uint32_t> f(F);
  bool failed = false;
  for (auto& [i, t] : measured_) {
    features(i, f.data());
    x.insert(x.end(), f.begin(), f.end());
    y.push_back(std::isnan(t) ? worst + kLog2 : t);  // a failure: slower than the slowest
    failed = failed || std::isnan(t);
  }
  // Where the forest predicts above halfway from the slowest time to a failure's, it expects a
  // failure: the local and recombining searches pass such configurations over.
  fail_line_ = failed ? worst + kLog2 / 2 : INFINITY;
  forest_->fit(x, y, rng_);
  fitted_at_ = measured_.size();
  // The pool: every open configuration, or a random sample of them with the neighbours of the
  // fastest (where the improvement is likely).
  std::vector<std::size_t> pool;
  if (open_.size() <= o_.pool) {
    for (std::size_t i : open_)
      if (allowed(i)) pool.push_back(i);
  } else {
    for (std::size_t k = 0; k < o_.pool; ++k)
      if (const std::size_t i = open_[static_cast<std::size_t>(rng_() % open_.size())]; allowed(i))
        pool.push_back(i);
    std::vector<std::uint32_t> r(params());
    for (auto& [t, i] : elites_)
      for (std::size_t q = 0; q < params(); ++q) {
        std::copy(row(i), row(i) + params(), r.begin());
        for (std::uint32_t v = 0; v < ranks_[q]; ++v) {
          r[q] = v;
          const long k = find(r);
          if (k >= 0 && allowed(static_cast<std::size_t>(k)))
            pool.push_back(static_cast<std::size_t>(k));
        }
      }
    std::sort(pool.begin(), pool.end());
    pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  }
  pool_ = pool;
  const double best = *std::min_element(y.begin(), y.end());
  std::vector<std::pair<double, std::size_t>> scored;
  scored.reserve(pool.size());
  for (std::size_t i : pool) {
    features(i, f.data());
    const Forest::Prediction p = forest_->predict(f.data());
    const double s = std::max(p.spread, 1e-9), z = (best - p.mean) / s;
    const double ei = (best - p.mean) * Phi(z) + s * phi(z);
    scored.emplace_back(-ei, i);
  }
  std::sort(scored.begin(), scored.end());
  ranked_.clear();
  for (auto& [e, i] : scored) ranked_.push_back(i);
  ranked_at_ = 0;
}

std::optional<std::size_t> Portfolio::propose_surrogate() {
  const std::size_t grow = std::max<std::size_t>(
      1, static_cast<std::size_t>(o_.refit_growth * static_cast<double>(fitted_at_)));
  if (!forest_ || !forest_->fitted() || measured_.size() >= fitted_at_ + grow) refit();
  if (o_.acquisition == 1 && forest_ && forest_->fitted()) {
    const std::size_t t = static_cast<std::size_t>(rng_() % forest_->trees());
    std::vector<std::uint32_t> f(params() + (predicted_ranks_ ? 1 : 0));
    double low = INFINITY;
    std::size_t pick = 0, ties = 0;
    for (std::size_t i : pool_) {
      if (!allowed(i)) continue;
      features(i, f.data());
      const double v = forest_->predict_tree(t, f.data());
      if (v < low) {
        low = v, pick = i, ties = 1;
      } else if (v == low && rng_() % ++ties == 0) {
        pick = i;  // one of the tied, uniformly
      }
    }
    if (ties) return pick;
  }
  for (int pass = 0; pass < 2; ++pass) {
    while (ranked_at_ < ranked_.size() && state_[ranked_[ranked_at_]] != 0) ++ranked_at_;
    for (std::size_t k = ranked_at_; k < ranked_.size(); ++k)
      if (allowed(ranked_[k])) return ranked_[k];
    if (pass == 0) refit();
  }
  return std::nullopt;
}

void Portfolio::report(std::size_t index, std::optional<double> ms) {
  if (index >= state_.size() || state_[index] == 2) return;
  if (state_[index] == 0 || state_[index] == 3) cover(index);  // proposed ones are covered
  close(index);
  state_[index] = 2;
  const bool ok = ms && *ms > 0;
  const double y = ok ? std::log(*ms) : NAN;
  measured_.emplace_back(index, y);
  if (ok) {
    elites_.emplace_back(y, index);
    std::sort(elites_.begin(), elites_.end());
    if (elites_.size() > o_.elites) elites_.pop_back();
  }
}

}  // namespace gputune::tuner
