/** \file tuner/search/forest.h
 * Owns: a small random forest regressor over the tuning parameters' values (each parameter a
 * feature: the rank of its value among the parameter's values, in numeric order where all are
 * numbers), the surrogate the portfolio search (tuner/search/portfolio.h) fits to log(measured
 * time). Trees capture what an additive model cannot: parameters that interact (a block shape that
 * is fast only with some tiles), thresholds (a resource limit), one value that is best only with
 * another. Splits are found by counting (values have few ranks), so a tree costs its depth times
 * the samples times the features tried per split; prediction gives the mean over trees and their
 * spread, what the acquisition trades off.
 * Must not: know about searches, strategies or the GPU. */
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace gputune::tuner {

class Forest {
 public:
  struct Options {
    std::size_t trees = 24;
    std::size_t min_leaf = 1;      ///< samples a leaf keeps at least
    double features_tried = 0.75;  ///< fraction of the features tried at each split (at least 1)
    double bootstrap = 1.0;        ///< samples per tree, as a fraction drawn with replacement
  };

  /// `ranks[p]`: how many ranks feature p has (its values are 0 .. ranks[p] - 1).
  explicit Forest(std::vector<std::uint32_t> ranks) : Forest(std::move(ranks), Options{}) {}
  Forest(std::vector<std::uint32_t> ranks, Options options);

  /// Fits the trees to `x` (row-major, one row of features() values per sample) and `y`.
  void fit(const std::vector<std::uint32_t>& x, const std::vector<double>& y, std::mt19937_64& rng);

  struct Prediction {
    double mean = 0, spread = 0;  ///< over the trees: the mean and the standard deviation
  };
  /// The prediction at one row of features() values (before any fit: 0, 0).
  Prediction predict(const std::uint32_t* row) const;
  /// One tree's prediction at a row (a draw from the forest's picture, for Thompson sampling).
  double predict_tree(std::size_t tree, const std::uint32_t* row) const;
  std::size_t trees() const { return nodes_.size(); }
  std::size_t features() const { return ranks_.size(); }
  bool fitted() const { return !nodes_.empty(); }

 private:
  struct Node {
    // Inner node: feature and threshold (rank <= threshold goes left), children; leaf: value.
    std::int32_t feature = -1;
    std::uint32_t threshold = 0;
    std::uint32_t left = 0, right = 0;
    double value = 0;
  };
  std::uint32_t grow(std::vector<Node>& tree, const std::vector<std::uint32_t>& x,
                     const std::vector<double>& y, std::vector<std::uint32_t>& rows,
                     std::size_t begin, std::size_t end, std::mt19937_64& rng);
  std::vector<std::uint32_t> ranks_;
  Options o_;
  std::vector<std::vector<Node>> nodes_;  ///< per tree, the root first
  // Scratch of the split search, per rank: count and sum of y.
  std::vector<double> count_, sum_;
  std::vector<std::size_t> order_;  ///< features in random order, for the ones tried
};

}  // namespace gputune::tuner
