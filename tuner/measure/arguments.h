/** \file tuner/measure/arguments.h
 * Owns: the host side of kernel arguments: sizing and filling them as the job says (Constant,
 * Random, BinaryRaw), reference outputs (ReferenceArguments), and comparing an output against its
 * reference with a tolerance. Needs no GPU, so it is tested on any machine.
 * Consumes: Job, ContextSpec. Produces: HostArguments, Comparison.
 * Must not: touch the driver or the database. */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "variants/job.h"

namespace gputune::tuner {

enum class ScalarKind { Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, F32, F64 };

struct ElementType {
  ScalarKind kind;
  int components;  ///< float4 -> 4
  int scalar_bytes;
  int bytes() const { return scalar_bytes * components; }
};

/// Parses a T1 argument type ("float", "int32", "double2", ...). Throws std::invalid_argument.
ElementType parse_element_type(const std::string& t);

struct HostArgument {
  std::string name;
  ElementType type;
  bool is_vector = true;
  bool output = false;
  bool written = false;             ///< WriteOnly / ReadWrite: re-upload before each variant
  std::uint64_t elements = 0;       ///< vector elements (each `components` scalars)
  std::vector<unsigned char> data;  ///< initial contents (scalar: its value)
  /// Expected output (ReferenceArguments); empty when the default configuration's output is used.
  std::vector<unsigned char> reference;
  std::string validation_method = "AbsoluteDifference";
  std::optional<double> threshold;
};

/// What make_arguments builds: everything, or what the model reads (sizes, scalar values, and
/// the contents of the read-only vectors model_reads_contents names, whose values can set
/// addresses and trip counts; other vectors' contents and references stay empty, which saves
/// filling 16M-element arrays).
enum class ArgumentContents { Filled, SizesOnly };
/// The largest read-only vector whose contents the model reads: 1 MiB (a filter, dedispersion's
/// float `shifts`) ...
constexpr std::uint64_t kModelArrayBytes = std::uint64_t{1} << 20;
/// ... and 64 MiB of 32- or 64-bit integers, the index arrays (a CSR `row_ptr` and `col_idx`, a
/// gather's indices, a permutation) whose values are the addresses and trip counts of sparse and
/// indirect kernels at the sizes they are tuned for: 16M indices. Narrower integers (bytes of an
/// image, samples) are data far more often than indices.
constexpr std::uint64_t kModelIndexArrayBytes = std::uint64_t{64} << 20;

/// Whether an element type is a 32- or 64-bit integer (an index type).
inline bool is_index_type(const ElementType& t) {
  return t.kind == ScalarKind::I32 || t.kind == ScalarKind::U32 || t.kind == ScalarKind::I64 ||
         t.kind == ScalarKind::U64;
}

/// Whether the model reads this argument's contents: a vector the kernel only reads (not
/// written, not an output) of at most kModelIndexArrayBytes of an index type, else at most
/// kModelArrayBytes.
inline bool model_reads_contents(const HostArgument& a) {
  const std::uint64_t limit = is_index_type(a.type) ? kModelIndexArrayBytes : kModelArrayBytes;
  return a.is_vector && !a.written && !a.output && a.elements > 0 &&
         a.elements <= limit / static_cast<std::uint64_t>(a.type.bytes());
}

/// Bytes of memory this process can still use: /proc/meminfo's MemAvailable, lowered to what the
/// cgroup (v2 memory.max - memory.current) leaves, if that is less; 0 when neither can be read.
std::uint64_t available_memory_bytes();

/// Throws JobError (field KernelSpecification.Arguments) when the vectors of `sized` (a context's
/// arguments, as make_arguments sizes them) need more than `available` bytes together, naming the
/// largest; `where` says whose bytes ("of memory this machine has available"). 0: no limit.
void check_argument_memory(const Job& job, const ContextSpec& ctx,
                           const std::vector<HostArgument>& sized, std::uint64_t available,
                           const std::string& where, const std::string& fix);

/// Sizes and fills every argument for a context. Sizes may use ProblemSize, context values, and
/// parameter names bound to their full value lists (e.g. "ProblemSize[0]+max(filter_width)-1").
/// Throws JobError naming the argument's field; when filling, the vectors' total is checked
/// against available_memory_bytes() before any is allocated (Linux overcommits: filling what
/// does not fit would get the process killed, not a bad_alloc).
std::vector<HostArgument> make_arguments(const Job& job, const ContextSpec& ctx,
                                         ArgumentContents contents = ArgumentContents::Filled);

/// What output argument i is verified against: its ReferenceArgument, else what the reference
/// configuration wrote there (`captured`, by argument; may be null or short), else nothing.
const std::vector<unsigned char>* expected_output(
    const std::vector<HostArgument>& args, size_t i,
    const std::vector<std::vector<unsigned char>>* captured);

/// Checks the job's arguments against the size of each parameter the compiled kernel declares (its
/// cubin's list): one argument per parameter, 8 bytes (a device pointer) for a Vector, the
/// element's bytes for a Scalar. A launch with arguments that differ reads garbage or faults, so
/// this is bad input: throws JobError naming the argument (`config` says which configuration's
/// cubin disagreed). Pointers and 8-byte scalars look alike here; cpu_check.h tells them apart.
void check_parameter_sizes(const Job& job, const std::vector<int>& sizes,
                           const std::string& config);

/// The fix every argument/parameter mismatch names (here and in cpu_check.h).
inline constexpr const char* kArgumentListFix =
    "list one argument per kernel parameter, in its order, with the parameter's type";

/// Scalar i of a buffer as double.
double read_scalar(const ElementType& t, const unsigned char* data, std::uint64_t i);

struct Comparison {
  bool ok = true;
  std::uint64_t mismatches = 0;
  std::uint64_t first_bad = 0;
  double max_abs_error = 0;
  double expected_at_first = 0, actual_at_first = 0;
  std::string describe(const std::string& arg) const;
};

/// Compares actual with expected element-wise: |a-e| <= abs_tol + rel_tol*|e| (NaN never matches
/// a number; NaN matches NaN). With a ReferenceArgument threshold, AbsoluteDifference uses
/// |a-e| <= threshold and SideBySideRelativeComparison |a-e| <= threshold*|e|.
Comparison compare_output(const HostArgument& arg, const std::vector<unsigned char>& actual,
                          const std::vector<unsigned char>& expected, double abs_tol,
                          double rel_tol);

}  // namespace gputune::tuner
