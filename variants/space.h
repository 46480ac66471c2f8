/** \file variants/space.h
 * Owns: the search space: every configuration of the tuning parameters that satisfies all
 * conditions, in Kernel Tuner's order (the Cartesian product in parameter order), and Config, one
 * point of it. Construction is a depth-first walk that checks each condition as soon as its last
 * parameter is bound, so pruned subtrees are never expanded. Consumes: Job (parameters,
 * conditions). Produces: Space. Must not: compile, launch, or touch the database. */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/value.h"

namespace gputune {

/// One point of a space: parameter names (shared) and values.
struct Config {
  std::shared_ptr<const std::vector<std::string>> names;
  std::vector<Value> values;

  /// Kernel Tuner's cache key: values joined by ',' with Python's str().
  std::string key() const;
  /// {"name": value, ...} as JSON text, in parameter order.
  std::string json() const;
  const Value& operator[](const std::string& name) const;
  bool operator==(const Config& o) const { return key() == o.key(); }
};

struct ConditionReport {
  std::string expression;
  std::uint64_t removed = 0;  ///< configurations this condition was the first to reject
};

/// How large a space build_space accepts, so that a typo in `Values` (a range(1000) too many) is
/// an error within seconds rather than minutes of walking and gigabytes of memory.
struct SpaceLimits {
  std::uint64_t max_configurations = 10'000'000;  ///< valid configurations kept
  std::uint64_t max_steps = 100'000'000;          ///< values bound while walking the product
};

class Space {
 public:
  std::shared_ptr<const std::vector<std::string>> names;
  std::vector<List> values;                 ///< per parameter
  std::vector<ConditionReport> conditions;  ///< in the job's order
  std::uint64_t cartesian_size = 0;         ///< saturates at UINT64_MAX

  size_t size() const { return names->empty() ? 0 : points_.size() / names->size(); }
  bool empty() const { return size() == 0; }
  /// Index of parameter p's value in configuration i.
  std::uint32_t value_index(size_t i, size_t p) const { return points_[i * names->size() + p]; }
  Config config(size_t i) const;
  /// Position of a configuration with this key, or -1.
  long find(const std::string& key) const;
  /// Position of the configuration with these value indices (one per parameter), or -1.
  long find(const std::vector<std::uint32_t>& value_indices) const;

  /// Explains an empty space: which condition removed how much. Empty string when not empty.
  std::string explain_empty() const;

 private:
  friend Space build_space(const Job& job, const SpaceLimits& limits);

  /// Key of the job's default configuration: each parameter's Default, else its first value. The
  /// reference every other configuration is verified against, and the baseline of the speedup.
  std::string default_key(const Job& job);
  std::vector<std::uint32_t> points_;
};

/// Builds the space; throws JobError for conditions that fail to evaluate (naming the condition and
/// the configuration) and for a space beyond `limits` (naming the parameters and their sizes).
Space build_space(const Job& job, const SpaceLimits& limits = {});

/// Key of the job's default configuration: each parameter's Default, else its first value. The
/// reference every other configuration is verified against, and the baseline of the speedup.
std::string default_key(const Job& job);

/// A count as people read it: 12,345,678 (or "more than 1.8e19" when saturated).
std::string grouped(std::uint64_t count);

/// Positions of `n` configurations spread over the space (all of them, in order, when it holds no
/// more), `first` (the default configuration, say; -1: none) first: each further pick is the one
/// that shows the most parameter values, then the most pairs of values of two parameters, not yet
/// seen, so every value of every parameter turns up as early as it can and interactions (a shared
/// tile with merge 8) soon after. Evenly spaced positions do not do this: a stride that shares a
/// factor with the inner parameters' sizes lands on the same inner values every time.
/// Deterministic. A larger space is searched over 8192 of its positions (2n when n is larger),
/// spread over it; picks beyond the 512th follow that order without a search.
std::vector<size_t> spread(const Space& space, size_t n, long first = -1);
/// spread over some positions of the space only; a `first` not among them is left out.
std::vector<size_t> spread_among(const Space& space, const std::vector<size_t>& among, size_t n,
                                 long first = -1);

}  // namespace gputune
