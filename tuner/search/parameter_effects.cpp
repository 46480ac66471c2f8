// ParameterEffects (tuner/search/strategy.h): an additive model of log(time) over parameter values,
// the learned effects ModelGuided orders unpredicted variants by and the priors a run starts from.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "tuner/search/strategy.h"

namespace gputune::tuner {

namespace {

constexpr double kRidge = 1.0;  // ParameterEffects' penalty, in measurements
// The value of a parameter that a past measurement does not have (another version of the job).
constexpr const char* kUnset = "\x01unset";
// Pseudo-measurements at full trust in a prior (ParameterEffects::prior_trust).
constexpr double kPriorTrustWeight = 8.0;

}  // namespace

ParameterEffects::ParameterEffects(const std::vector<Config>& configs) {
  if (configs.empty() || !configs[0].names) return;
  index(*configs[0].names, configs.size(), [&](size_t i, size_t p) {
    return p < configs[i].values.size() ? configs[i].values[p].str() : std::string();
  });
}

void ParameterEffects::index(const std::vector<std::string>& all, size_t n,
                             const std::function<std::string(size_t, size_t)>& value_of) {
  // Each parameter's distinct values, in order of first appearance; one with a single value has
  // no effect to learn.
  // One pass: every configuration's value index for every parameter.
  const size_t all_params = all.size();
  std::vector<std::map<std::string, std::uint32_t>> index(all_params);
  std::vector<std::vector<std::string>> values(all_params);
  std::vector<std::uint32_t> of_all(n * all_params, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t p = 0; p < all_params; ++p) {
      std::string v = value_of(i, p);
      auto [it, added] = index[p].emplace(v, static_cast<std::uint32_t>(values[p].size()));
      if (added) values[p].push_back(std::move(v));
      of_all[i * all_params + p] = it->second;
    }
  std::vector<size_t> source;  // the position in a Config of each parameter kept
  for (size_t p = 0; p < all_params; ++p)
    if (values[p].size() > 1) {
      names_.push_back(all[p]);
      source.push_back(p);
      values_.push_back(std::move(values[p]));
    }
  of_.resize(n * params());
  for (size_t i = 0; i < n; ++i)
    for (size_t q = 0; q < params(); ++q)
      of_[i * params() + q] = of_all[i * all_params + source[q]];
  for (auto& v : values_) {
    beta_.emplace_back(v.size(), 0.0);
    count_.emplace_back(v.size(), 0);
    prior_.emplace_back(v.size(), 0.0);
    has_prior_.emplace_back(v.size(), 0);
    tried_.emplace_back(v.size(), 0);
  }
}

ParameterEffects ParameterEffects::from_past(const std::vector<Past>& past) {
  ParameterEffects e;
  std::vector<std::string> names;
  {
    std::set<std::string> seen;
    for (const Past& m : past)
      for (const auto& [name, value] : m.values)
        if (seen.insert(name).second) names.push_back(name);
  }
  // A parameter a measurement lacks (another version of the job) is a value of its own.
  e.index(names, past.size(), [&](size_t i, size_t p) {
    auto it = past[i].values.find(names[p]);
    return it == past[i].values.end() ? std::string(kUnset) : it->second;
  });
  std::map<std::string, std::pair<double, int>> mean;  // per search: sum, count
  for (const Past& m : past)
    if (std::isfinite(m.log_residual)) {
      auto& [sum, k] = mean[m.search];
      sum += m.log_residual, ++k;
    }
  std::vector<std::pair<size_t, double>> residuals;
  for (size_t i = 0; i < past.size(); ++i)
    if (std::isfinite(past[i].log_residual)) {
      auto& [sum, k] = mean[past[i].search];
      residuals.emplace_back(i, past[i].log_residual - sum / k);
    }
  e.fit(residuals);
  return e;
}

void ParameterEffects::fit(const std::vector<std::pair<size_t, double>>& residuals) {
  const size_t P = params();
  std::vector<std::pair<size_t, double>> r;
  for (auto& [i, x] : residuals)
    if (i * P < of_.size() && std::isfinite(x)) r.emplace_back(i, x);
  samples_ = r.size();
  for (size_t p = 0; p < P; ++p) {
    std::fill(beta_[p].begin(), beta_[p].end(), 0.0);
    std::fill(count_[p].begin(), count_[p].end(), 0);
  }
  prior_trust_ = 1;
  if (r.empty() || P == 0) return;
  {
    // How far this search's measurements bear the prior out: the slope of their residuals on
    // what the prior said of them (1: as the prior said, 0: unrelated), with kPriorTrustWeight
    // pseudo-measurements at 1 so a few measurements cannot throw a good prior away.
    std::vector<double> q;
    for (auto& [i, x] : r) {
      double sum = 0;
      for (size_t p = 0; p < P; ++p) sum += prior_[p][of_[i * P + p]];
      q.push_back(sum);
    }
    const double n = static_cast<double>(r.size());
    double mq = 0, mr = 0;
    for (size_t k = 0; k < r.size(); ++k) mq += q[k] / n, mr += r[k].second / n;
    double cov = 0, var = 0;
    for (size_t k = 0; k < r.size(); ++k)
      cov += (q[k] - mq) * (r[k].second - mr), var += (q[k] - mq) * (q[k] - mq);
    if (var > 1e-12 * n) {
      const double slope = cov / var;
      prior_trust_ =
          std::clamp((n * slope + kPriorTrustWeight) / (n + kPriorTrustWeight), 0.0, 1.0);
    }
  }
  for (auto& [i, x] : r)
    for (size_t p = 0; p < P; ++p) ++count_[p][of_[i * P + p]];
  // Backfitting: each parameter's effects in turn, against what the intercept and the other
  // parameters leave unexplained; the ridge penalty (one pseudo-measurement at 0) shrinks values
  // seen rarely. Converges within a few sweeps for one-hot factors.
  std::vector<double> fitted(r.size(), 0.0);  // sum of the effects of measurement k
  double mu = 0;
  for (int sweep = 0; sweep < 25; ++sweep) {
    mu = 0;
    for (size_t k = 0; k < r.size(); ++k) mu += r[k].second - fitted[k];
    mu /= static_cast<double>(r.size());
    double change = 0;
    for (size_t p = 0; p < P; ++p) {
      std::vector<double> sum(beta_[p].size(), 0.0);
      for (size_t k = 0; k < r.size(); ++k) {
        std::uint32_t v = of_[r[k].first * P + p];
        sum[v] += r[k].second - mu - (fitted[k] - beta_[p][v]);
      }
      std::vector<double> next(beta_[p].size(), 0.0);
      for (size_t v = 0; v < next.size(); ++v)
        if (count_[p][v]) next[v] = sum[v] / (count_[p][v] + kRidge);
      for (size_t k = 0; k < r.size(); ++k) {
        std::uint32_t v = of_[r[k].first * P + p];
        fitted[k] += next[v] - beta_[p][v];
      }
      for (size_t v = 0; v < next.size(); ++v)
        change = std::max(change, std::abs(next[v] - beta_[p][v]));
      beta_[p] = std::move(next);
    }
    if (change < 1e-6) break;
  }
  // A value not measured may be as good as the best measured value of its parameter.
  unmeasured_.assign(P, 0.0);
  for (size_t p = 0; p < P; ++p)
    for (size_t v = 0; v < beta_[p].size(); ++v)
      if (count_[p][v]) unmeasured_[p] = std::min(unmeasured_[p], beta_[p][v]);
}

double ParameterEffects::log_factor(size_t i) const {
  if (samples_ == 0 || (i + 1) * params() > of_.size()) return 0;
  double f = 0;
  for (size_t p = 0; p < params(); ++p) f += beta_[p][of_[i * params() + p]];
  return f;
}

void ParameterEffects::set_prior(const Prior& prior) {
  for (size_t p = 0; p < params(); ++p) {
    std::fill(prior_[p].begin(), prior_[p].end(), 0.0);
    std::fill(has_prior_[p].begin(), has_prior_[p].end(), 0);
    auto param = prior.find(names_[p]);
    if (param == prior.end()) continue;
    for (size_t v = 0; v < values_[p].size(); ++v) {
      auto value = param->second.find(values_[p][v]);
      if (value != param->second.end() && std::isfinite(value->second))
        prior_[p][v] = value->second, has_prior_[p][v] = 1;
    }
  }
}

ParameterEffects::Prior ParameterEffects::learned() const {
  Prior out;
  for (size_t p = 0; p < params(); ++p)
    for (size_t v = 0; v < values_[p].size(); ++v) {
      if (count_[p][v] == 0 && !has_prior_[p][v]) continue;
      if (values_[p][v] == kUnset) continue;
      out[names_[p]][values_[p][v]] = (count_[p][v] ? beta_[p][v] : 0) + prior_left(p, v);
    }
  return out;
}

size_t ParameterEffects::prior_values() const {
  size_t n = 0;
  for (const auto& h : has_prior_) n += static_cast<size_t>(std::count(h.begin(), h.end(), 1));
  return n;
}

double ParameterEffects::order_factor(size_t i) const {
  if ((i + 1) * params() > of_.size()) return 0;
  double f = log_factor(i);
  for (size_t p = 0; p < params(); ++p) f += prior_left(p, of_[i * params() + p]);
  return f;
}

double ParameterEffects::prior_left(size_t p, size_t v) const {
  return prior_trust_ * prior_[p][v] * kRidge / (count_[p][v] + kRidge);
}

void ParameterEffects::note_tried(size_t i) {
  if ((i + 1) * params() > of_.size()) return;
  for (size_t p = 0; p < params(); ++p) tried_[p][of_[i * params() + p]] = 1;
}

bool ParameterEffects::has_untried_value(size_t i) const {
  if ((i + 1) * params() > of_.size()) return false;
  for (size_t p = 0; p < params(); ++p)
    if (!tried_[p][of_[i * params() + p]]) return true;
  return false;
}

std::vector<std::vector<char>> ParameterEffects::no_values() const {
  std::vector<std::vector<char>> none(params());
  for (size_t p = 0; p < params(); ++p) none[p].assign(values_[p].size(), 0);
  return none;
}

size_t ParameterEffects::unshown(size_t i, std::vector<std::vector<char>>& shown, bool mark) const {
  if ((i + 1) * params() > of_.size() || shown.size() != params()) return 0;
  size_t n = 0;
  for (size_t p = 0; p < params(); ++p) {
    char& s = shown[p][of_[i * params() + p]];
    n += !s;
    if (mark) s = 1;
  }
  return n;
}

double ParameterEffects::log_factor_bound(size_t i) const {
  if (samples_ == 0 || (i + 1) * params() > of_.size()) return 0;
  double f = 0;
  for (size_t p = 0; p < params(); ++p) {
    size_t v = of_[i * params() + p];
    if (count_[p][v]) {
      f += beta_[p][v];
      continue;
    }
    f += unmeasured_[p];
  }
  return f;
}

double ParameterEffects::spread(size_t i) const {
  if (params() == 0 || (i + 1) * params() > of_.size()) return 0;
  double sum = 0;
  for (size_t p = 0; p < params(); ++p) sum += 1 / (count_[p][of_[i * params() + p]] + kRidge);
  return std::sqrt(sum / static_cast<double>(params()));
}

std::string ParameterEffects::summary(size_t n) const {
  std::vector<std::tuple<double, size_t, size_t>> all;  // |effect|, parameter, value
  for (size_t p = 0; p < params(); ++p)
    for (size_t v = 0; v < beta_[p].size(); ++v)
      if (count_[p][v] && std::abs(beta_[p][v]) >= std::log(1.05) && values_[p][v] != kUnset)
        all.emplace_back(std::abs(beta_[p][v]), p, v);
  std::sort(all.begin(), all.end(),
            [](auto& a, auto& b) { return std::get<0>(a) > std::get<0>(b); });
  std::ostringstream o;
  o.precision(2);
  o << std::fixed;
  for (size_t k = 0; k < all.size() && k < n; ++k) {
    auto [mag, p, v] = all[k];
    o << (k ? ", " : "") << names_[p] << "=" << values_[p][v] << " " << std::exp(beta_[p][v])
      << "x";
  }
  return o.str();
}

}  // namespace gputune::tuner
