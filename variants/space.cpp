#include "variants/space.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "variants/expr.h"

namespace gputune {

std::string Config::key() const {
  std::string k;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) k += ',';
    k += values[i].str();
  }
  return k;
}

std::string Config::json() const {
  // Written by hand (not via nlohmann::json, whose objects sort keys) to keep parameter order.
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += nlohmann::json((*names)[i]).dump() + ": " + value_to_json(values[i]).dump();
  }
  return out + "}";
}

const Value& Config::operator[](const std::string& name) const {
  for (size_t i = 0; i < names->size(); ++i)
    if ((*names)[i] == name) return values[i];
  throw std::out_of_range("no parameter named '" + name + "'");
}

Config Space::config(size_t i) const {
  Config c;
  c.names = names;
  size_t n = names->size();
  c.values.reserve(n);
  for (size_t p = 0; p < n; ++p) c.values.push_back(values[p][points_[i * n + p]]);
  return c;
}

std::string default_key(const Job& job) {
  std::string key;
  for (size_t i = 0; i < job.parameters.size(); ++i) {
    const auto& p = job.parameters[i];
    key += (i ? "," : "") + (p.default_value ? *p.default_value : p.values.front()).str();
  }
  return key;
}

std::string grouped(std::uint64_t v) {
  if (v == UINT64_MAX) return "more than 1.8e19";
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

long Space::find(const std::string& key) const {
  // Parse the key by matching each parameter's formatted values, in order.
  size_t pos = 0;
  size_t n = names->size();
  std::vector<std::uint32_t> idx(n);
  for (size_t p = 0; p < n; ++p) {
    size_t end = p + 1 < n ? key.find(',', pos) : key.size();
    if (end == std::string::npos) return -1;
    std::string part = key.substr(pos, end - pos);
    bool found = false;
    for (size_t k = 0; k < values[p].size(); ++k)
      if (values[p][k].str() == part) {
        idx[p] = static_cast<std::uint32_t>(k), found = true;
        break;
      }
    if (!found) return -1;
    pos = end + 1;
  }
  return find(idx);
}

long Space::find(const std::vector<std::uint32_t>& idx) const {
  const size_t n = names->size();
  if (idx.size() != n) return -1;
  // Points are in lexicographic index order: binary search.
  size_t lo = 0, hi = size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int cmp = 0;
    for (size_t p = 0; p < n && cmp == 0; ++p) {
      auto a = points_[mid * n + p];
      cmp = a < idx[p] ? -1 : a > idx[p] ? 1 : 0;
    }
    if (cmp == 0) return static_cast<long>(mid);
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

std::string Space::explain_empty() const {
  if (!empty()) return {};
  std::string out =
      "the conditions leave no valid configuration out of " + std::to_string(cartesian_size) + ":";
  for (auto& c : conditions)
    out += "\n  \"" + c.expression + "\" removed " + std::to_string(c.removed);
  return out;
}

namespace {

std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/// The error for a space beyond SpaceLimits: its parameters' sizes, how far the walk got (the
/// fraction `explored`; negative: it did not start).
[[noreturn]] void too_large(const Job& job, const Space& s, const std::string& why,
                            double explored) {
  std::string sizes;
  for (size_t p = 0; p < s.values.size(); ++p)
    sizes += (p ? " x " : "") + (*s.names)[p] + " " + std::to_string(s.values[p].size());
  std::string progress;
  if (explored >= 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.4g%%", 100.0 * explored);
    progress =
        " (after " + std::string(pct) + " of the product, " + grouped(s.size()) + " valid so far)";
  }
  throw JobError(job.file.string(), "ConfigurationSpace.TuningParameters",
                 "the space is too large: its product of values is " + grouped(s.cartesian_size) +
                     " configurations (" + sizes + "), and " + why + progress,
                 "narrow the Values, or add Conditions that remove most of the product (each is "
                 "checked as soon as its parameters are bound, so a condition on the first "
                 "parameters cuts the walk early)");
}

}  // namespace

Space build_space(const Job& job, const SpaceLimits& limits) {
  Space s;
  auto names = std::make_shared<std::vector<std::string>>();
  Symbols syms;
  std::vector<int> slot_of_param;
  for (auto& p : job.parameters) {
    names->push_back(p.name);
    s.values.push_back(p.values);
    slot_of_param.push_back(syms.slot(p.name));
  }
  s.names = names;
  const size_t n = names->size();

  // Each condition is checked at the depth where its last parameter gets bound.
  std::vector<Expr> exprs;
  std::vector<std::vector<size_t>> at_depth(n + 1);  // depth 0: before any binding
  for (size_t c = 0; c < job.conditions.size(); ++c) {
    exprs.push_back(Expr::parse(job.conditions[c].expression, syms));
    s.conditions.push_back({job.conditions[c].expression, 0});
    size_t depth = 0;
    for (int slot : exprs.back().free_slots()) {
      bool found = false;
      for (size_t p = 0; p < n; ++p)
        if (slot_of_param[p] == slot) depth = std::max(depth, p + 1), found = true;
      if (!found)
        throw JobError(job.file.string(),
                       "ConfigurationSpace.Conditions[" + std::to_string(c) + "]",
                       "name '" + syms.name(slot) + "' is not a tuning parameter");
    }
    at_depth[depth].push_back(c);
  }
  // remaining[d] = number of full configurations below a node at depth d.
  std::vector<std::uint64_t> remaining(n + 1, 1);
  for (size_t d = n; d-- > 0;)
    remaining[d] = saturating_product(remaining[d + 1], s.values[d].size());
  s.cartesian_size = remaining[0];
  auto explored = [&](const std::vector<std::uint32_t>& at, size_t depth) {
    long double done = 0;
    for (size_t d = 0; d <= depth && d < n; ++d)
      done += static_cast<long double>(at[d]) * static_cast<long double>(remaining[d + 1]);
    return static_cast<double>(done / static_cast<long double>(s.cartesian_size));
  };
  if (job.conditions.empty() && s.cartesian_size > limits.max_configurations)
    too_large(job, s,
              "with no Conditions every one is valid: more than the " +
                  grouped(limits.max_configurations) + " gputune keeps",
              -1.0);

  Env env(syms);
  std::vector<std::uint32_t> idx(n, 0);
  auto check = [&](size_t depth) {
    for (size_t c : at_depth[depth]) {
      Value r;
      try {
        r = exprs[c].eval(env);
      } catch (const ExprError& e) {
        std::string at;
        for (size_t p = 0; p < depth; ++p)
          at += (p ? ", " : "") + (*names)[p] + "=" + s.values[p][idx[p]].repr();
        throw JobError(job.file.string(),
                       "ConfigurationSpace.Conditions[" + std::to_string(c) + "]",
                       std::string(e.what()) + (at.empty() ? "" : " (at " + at + ")"),
                       "make the condition valid for every combination of values");
      }
      if (!r.truthy()) {
        s.conditions[c].removed += remaining[depth];
        return false;
      }
    }
    return true;
  };
  if (!check(0) || n == 0) return s;
  // Iterative depth-first walk over value indices.
  size_t depth = 0;  // parameter being bound
  idx[0] = 0;
  std::uint64_t steps = 0;
  for (;;) {
    if (idx[depth] < s.values[depth].size()) {
      if (++steps > limits.max_steps)
        too_large(job, s,
                  "the conditions leave too much of it to walk: " + grouped(limits.max_steps) +
                      " values bound",
                  explored(idx, depth));
      env.set(slot_of_param[depth], s.values[depth][idx[depth]]);
      if (check(depth + 1)) {
        if (depth + 1 == n) {
          if (s.size() >= limits.max_configurations)
            too_large(job, s,
                      "more than the " + grouped(limits.max_configurations) +
                          " valid configurations gputune keeps satisfy the conditions",
                      explored(idx, depth));
          s.points_.insert(s.points_.end(), idx.begin(), idx.end());
          ++idx[depth];
        } else {
          ++depth;
          idx[depth] = 0;
        }
      } else {
        ++idx[depth];
      }
    } else {
      env.unset(slot_of_param[depth]);
      if (depth == 0) break;
      --depth;
      ++idx[depth];
    }
  }
  return s;
}

namespace {

/// A step coprime with m near m/phi: k * step mod m visits every position once, and positions
/// visited one after another lie far apart.
size_t golden_step(size_t m) {
  if (m <= 2) return 1;
  size_t step = static_cast<size_t>(static_cast<double>(m) * 0.6180339887498949);
  while (std::gcd(step, m) != 1) ++step;
  return step;
}

}  // namespace

std::vector<size_t> spread(const Space& space, size_t n, long first) {
  std::vector<size_t> all(space.size());
  std::iota(all.begin(), all.end(), size_t{0});
  return spread_among(space, all, n, first);
}

std::vector<size_t> spread_among(const Space& space, const std::vector<size_t>& pool, size_t n,
                                 long first) {
  if (n == 0) return {};
  const bool first_in_pool =
      first >= 0 && std::find(pool.begin(), pool.end(), static_cast<size_t>(first)) != pool.end();
  std::vector<size_t> out;
  if (first_in_pool) out.push_back(static_cast<size_t>(first));
  const size_t params = space.names->size();
  if (n >= pool.size() || params == 0) {  // everything (or no way to tell configurations apart)
    for (size_t i : pool)
      if (out.size() < n && !(first_in_pool && i == static_cast<size_t>(first))) out.push_back(i);
    return out;
  }
  // Candidates: the pool in golden-step order, so ties go to positions far from earlier picks.
  const size_t m = pool.size();
  const size_t step = golden_step(m);
  const size_t candidates = std::min(m, std::max<size_t>(8192, 2 * n));
  std::vector<size_t> cand(candidates);
  for (size_t k = 0; k < candidates; ++k) cand[k] = pool[(k * step) % m];

  // What has been seen: each value of each parameter, and each pair of values of two parameters.
  std::vector<size_t> single_at(params + 1, 0);
  for (size_t p = 0; p < params; ++p) single_at[p + 1] = single_at[p] + space.values[p].size();
  std::vector<size_t> pair_at(params * params, 0);
  size_t pairs = 0;
  for (size_t p = 0; p < params; ++p)
    for (size_t q = p + 1; q < params; ++q) {
      pair_at[p * params + q] = pairs;
      pairs += space.values[p].size() * space.values[q].size();
    }
  // Pairs of parameters with thousands of values each would take more memory than they are worth.
  if (pairs > (size_t{1} << 24)) pairs = 0;
  std::vector<char> seen_single(single_at[params], 0), seen_pair(pairs, 0);
  std::vector<std::uint64_t> unseen(params);  // values of each parameter not seen yet
  auto restart = [&] {
    std::fill(seen_single.begin(), seen_single.end(), 0);
    std::fill(seen_pair.begin(), seen_pair.end(), 0);
    for (size_t p = 0; p < params; ++p) unseen[p] = space.values[p].size();
  };
  restart();
  // A new value of a parameter counts the square of how many of its values are still unseen: the
  // longest parameter needs a new value in every pick to show them all in as few picks.
  auto visit = [&](size_t i, bool mark) {
    std::uint64_t new_singles = 0, new_pairs = 0;
    for (size_t p = 0; p < params; ++p) {
      const size_t vp = space.value_index(i, p);
      char& s = seen_single[single_at[p] + vp];
      if (!s) new_singles += unseen[p] * unseen[p];
      if (mark && !s) s = 1, --unseen[p];
      for (size_t q = p + 1; q < params && pairs > 0; ++q) {
        char& pq = seen_pair[pair_at[p * params + q] + vp * space.values[q].size() +
                             space.value_index(i, q)];
        new_pairs += !pq;
        if (mark) pq = 1;
      }
    }
    return new_singles * (pairs + 1) + new_pairs;  // a new value outweighs any number of pairs
  };
  std::vector<char> taken(candidates, 0);
  for (size_t k = 0; k < candidates; ++k)
    if (first_in_pool && cand[k] == static_cast<size_t>(first)) taken[k] = 1;
  if (first_in_pool) visit(static_cast<size_t>(first), true);
  // Beyond kGreedy picks every value and pair has turned up many times over: the rest follow the
  // golden-step order, which costs nothing (the greedy search costs picks x candidates).
  constexpr size_t kGreedy = 512;
  while (out.size() < n && out.size() < kGreedy) {
    long best = -1;
    std::uint64_t best_score = 0;
    for (size_t k = 0; k < candidates; ++k) {
      if (taken[k]) continue;
      const std::uint64_t score = visit(cand[k], false);
      if (score > best_score) best = static_cast<long>(k), best_score = score;
    }
    if (best < 0) {  // every value and pair seen: start another round, so picks stay apart
      if (std::find(taken.begin(), taken.end(), 0) == taken.end()) break;
      restart();
      continue;
    }
    taken[best] = 1;
    visit(cand[best], true);
    out.push_back(cand[best]);
  }
  for (size_t k = 0; k < candidates && out.size() < n; ++k)
    if (!taken[k]) out.push_back(cand[k]);
  return out;
}

}  // namespace gputune
