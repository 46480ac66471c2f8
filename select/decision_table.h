/** \file select/decision_table.h
 * Owns: the decision table behind runtime selection, as data: per kernel and device, the tuned
 * contexts (problem size, input values, winner, the times of the candidate configurations), the
 * rule fitted at export time (nearest problem size in log space, or a small decision tree over
 * the log sizes where leave-one-out says it does better) and that leave-one-out's figures; the
 * decision file's JSON form (`gputune export --decisions`), and building the table from a
 * gputune database.
 * Consumes: db::TunedKernel records or a decision file. Produces: KernelTable values.
 * Must not: compile or launch anything (kernel.h does), or write to a database. */
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gputune::db {
class Store;
}

namespace gputune::select {

/// The decision file's format name and version (`"format"`, `"version"`).
inline constexpr const char* kDecisionFormat = "gputune-decisions";
inline constexpr int kDecisionVersion = 1;

/// How an answer was obtained.
enum class How {
  kMeasured,  ///< this device and this input were tuned: the measured winner
  kNearest,   ///< the winner of the tuned context nearest in log problem size
  kLearned,   ///< a decision tree over the log problem sizes, fitted at export
};
const char* to_string(How how);

/// One tuned context of a kernel on a device.
struct TunedInput {
  std::string label;
  std::vector<std::int64_t> size;        ///< problem size, padded to 3 with 1s
  std::map<std::string, double> values;  ///< the context's other input values (numbers)
  std::string winner;                    ///< configuration key
  double best_ms = 0;
  /// Times of the candidate configurations measured here (the winner's included).
  std::map<std::string, double> times_ms;
};

/// A decision tree over log2 problem sizes: a leaf names a configuration key, an inner node
/// sends log2(size[dim]) <= split to `lo`, the rest to `hi`.
struct TreeNode {
  std::string config;  ///< a leaf's configuration ("" for an inner node)
  int dim = 0;
  double split = 0;
  std::unique_ptr<TreeNode> lo, hi;
  TreeNode() = default;
  TreeNode(const TreeNode& o);
  TreeNode& operator=(const TreeNode& o);
  TreeNode(TreeNode&&) noexcept = default;
  TreeNode& operator=(TreeNode&&) noexcept = default;
  bool leaf() const { return !lo; }
  /// The leaf's configuration for `log_size` (log2 of the padded problem size).
  const std::string& decide(const std::vector<double>& log_size) const;
  int depth() const;
};

/// Selected time over the true winner's, per hidden context, for one way of choosing.
struct LooFigures {
  int contexts = 0;   ///< contexts hidden and selected for
  int unknown = 0;    ///< of those, selections never measured in the hidden context
  double median = 0;  ///< of the known ratios (1 = the winner itself)
  double worst = 0;
  double mean = 0;
};

/// Leave-one-out over a device's contexts: for each, hide it, choose from the others.
struct LooReport {
  LooFigures nearest, learned, largest;  ///< largest: always the largest input's winner
};

struct DeviceTable {
  std::string name, arch;  ///< "NVIDIA H100 80GB HBM3", "sm_90"
  int sm_count = 0;
  std::vector<TunedInput> inputs;
  How method = How::kNearest;    ///< the rule for an input not tuned: kNearest or kLearned
  std::optional<TreeNode> tree;  ///< fitted on every input (with 3 or more)
  std::optional<LooReport> loo;  ///< with 2 or more inputs
};

struct KernelTable {
  std::string name, hash;
  std::string job_document;  ///< the T1 job (launch rules, compile options) as text
  std::string source;        ///< the kernel's source ("" when not exported)
  std::vector<std::string> parameters;
  /// Candidate configurations: key -> {"name": value, ...} in parameter order.
  std::map<std::string, nlohmann::ordered_json> configs;
  std::vector<DeviceTable> devices;
  /// Significant problem-size dimensions over all contexts (the last not 1, plus 1; at least 1).
  int dims() const;
};

struct DecisionTable {
  std::string origin;     ///< the file or database it came from
  std::string generated;  ///< when it was written ("" when not said)
  std::vector<KernelTable> kernels;
};

// --- Fitting (at export) ------------------------------------------------------------------------

/// log2 of each size.
std::vector<double> log_size(const std::vector<std::int64_t>& size);

/// Squared distance of two problem sizes in log2 space.
double log_distance(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);

/// Index of the input nearest `size` in log space, skipping `skip` (-1: none); ties to the larger
/// input (more work, more like the application's big runs). -1 when there is none.
int nearest_input(const std::vector<TunedInput>& inputs, const std::vector<std::int64_t>& size,
                  int skip = -1);

/// A decision tree over the inputs but `skip` (-1: none), at most `max_depth` deep: each leaf
/// names the candidate with the smallest sum of slowdowns over its inputs (one never measured in
/// an input counts as kUnmeasuredPenalty there). Empty when no input is left.
inline constexpr double kUnmeasuredPenalty = 10.0;
std::optional<TreeNode> fit_tree(const std::vector<TunedInput>& inputs, int skip = -1,
                                 int max_depth = 4);

/// The configuration each way chooses for input `i` when it is hidden ("" when none can).
std::string choose_without(const DeviceTable& d, How how, int i);
/// Index of the largest input (product of sizes) but `skip`; -1 when none.
int largest_input(const std::vector<TunedInput>& inputs, int skip = -1);

/// One hidden input of leave-one-out: what each way chose for it and that choice's measured time
/// over the input's winner (none: the choice was never measured there, or no choice).
struct LooRow {
  std::string label;
  std::string nearest, learned, largest;
  std::optional<double> nearest_ratio, learned_ratio, largest_ratio;
};
std::vector<LooRow> leave_one_out_rows(const DeviceTable& d);

/// Leave-one-out figures of a device's inputs (none with fewer than 2).
std::optional<LooReport> leave_one_out(const DeviceTable& d);

/// Fits the device's tree, runs leave-one-out, and sets `method` to kLearned only where the tree
/// does better than nearest there (lower mean slowdown, no worse worst case).
void fit(DeviceTable& d);

// --- Building and the file ----------------------------------------------------------------------

/// The decision table of the kernels named `kernel` (empty: all) in a gputune database, fitted.
/// `candidates_per_input`: the fastest configurations of each input kept as candidates (the
/// winners always). Throws db::DbError for a file that is not a gputune database.
DecisionTable table_from_store(db::Store& store, const std::string& kernel = {},
                               int candidates_per_input = 3);

/// The decision file's JSON (compact when written with dump()).
nlohmann::json to_json(const DecisionTable& t, bool with_source = true);
/// Reads a decision file's JSON; throws std::invalid_argument naming the field and the fix
/// (another format, another version, a missing or mistyped field).
DecisionTable from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace gputune::select
