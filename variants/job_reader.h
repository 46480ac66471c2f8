/** \file variants/job_reader.h
 * Internal to the T1 job reader: job.cpp reads the T1 core (its lists of parameters, conditions
 * and arguments in job_sections.cpp), job_extension.cpp the GPUTune extension, all through the
 * Reader, which walks the document with a field path so that every error names where it
 * happened. Must not: be included by any other file. */
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "variants/expr.h"
#include "variants/job.h"

namespace gputune::detail {

using nlohmann::json;

/// Case-insensitive edit distance, for "did you mean" (job.cpp).
size_t edit_distance(const std::string& a, const std::string& b);

/// Walks the document with a field path, so every error names where it happened.
class Reader {
 public:
  Reader(std::string file, Job& job) : file_(std::move(file)), job_(job) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem,
                         const std::string& fix = {}) const {
    throw JobError(file_, field, problem, fix);
  }

  /// Rejects keys outside `known` (schema keys plus those real files carry), suggesting the
  /// closest one.
  void check_keys(const json& obj, const std::string& path, const std::set<std::string>& known) {
    require_object(obj, path, known);
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (known.count(it.key())) continue;
      const auto [best, best_d] = closest(it.key(), known);
      fail(field_of(path, it.key()), "unknown field",
           best_d <= 3 ? "did you mean '" + best + "'?"
                       : "remove it; known fields here are: " + join(known));
    }
  }

  /// As check_keys, for the T1 core: a key outside `known` is a note (what gputune does with it:
  /// nothing), never a refusal, since the community's files carry keys of their own tools
  /// (Kernel Tuner's BenchmarkConfig, Misc). A key a small edit away from a known one the object
  /// lacks is named with it, as the likely typo it is.
  void note_unknown_keys(const json& obj, const std::string& path,
                         const std::set<std::string>& known) {
    require_object(obj, path, known);
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (known.count(it.key())) continue;
      const auto [best, best_d] = closest(it.key(), known, &obj);
      note(field_of(path, it.key()) + " is not a field gputune reads" +
           (best_d <= 2 ? " (did you mean '" + best + "'?)" : "") + ": ignored");
    }
  }

  /// A key of `obj` a small edit away from `key` (its likely misspelling), or "".
  static std::string near_key(const json& obj, const std::string& key) {
    if (!obj.is_object()) return "";
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (it.key() != key && edit_distance(it.key(), key) <= 2) return it.key();
    return "";
  }

  /// "missing required field", naming the likely misspelling the object has instead.
  static std::string missing(const json& obj, const std::string& key) {
    const std::string near = near_key(obj, key);
    return near.empty() ? "missing required field"
                        : "missing required field (the file has '" + near + "': a misspelling?)";
  }

  const json& require(const json& obj, const std::string& path, const std::string& key,
                      const char* what) {
    auto it = obj.find(key);
    if (it == obj.end())
      fail(path.empty() ? key : path + "." + key, missing(obj, key),
           std::string("add it: ") + what);
    return *it;
  }

  /// A JSON value as an expression Value; objects have no Python counterpart here.
  Value to_value(const json& j, const std::string& field) {
    try {
      return json_to_value(j);
    } catch (const std::invalid_argument& e) {
      fail(field, e.what(), "write a number, string, boolean or list");
    }
  }

  std::string get_string(const json& j, const std::string& field) {
    if (!j.is_string()) fail(field, "expected a string, got " + std::string(j.type_name()));
    return j.get<std::string>();
  }

  /// An expression field: a string (checked for syntax) or a number (kept as its text).
  std::string get_expr(const json& j, const std::string& field) {
    std::string text;
    if (j.is_string()) {
      text = j.get<std::string>();
    } else if (j.is_number() || j.is_boolean()) {
      text = j.dump();
      if (j.is_boolean()) text = j.get<bool>() ? "True" : "False";
    } else {
      fail(field, "expected an expression (string or number), got " + std::string(j.type_name()));
    }
    Symbols syms;
    try {
      Expr::parse(text, syms);
    } catch (const ExprError& e) {
      fail(field, e.what(), "write a Python expression of the supported subset (see README)");
    }
    return text;
  }

  static std::string join(const std::set<std::string>& s) {
    std::string out;
    for (auto& k : s) out += (out.empty() ? "" : ", ") + k;
    return out;
  }

  void note(const std::string& n) { job_.notes.push_back(n); }

 private:
  static std::string field_of(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void require_object(const json& obj, const std::string& path,
                      const std::set<std::string>& known) const {
    if (!obj.is_object())
      fail(path.empty() ? "(the document)" : path,
           "expected an object, got " + std::string(obj.type_name()),
           "write an object {...} with the fields: " + join(known));
  }

  /// The known key closest to `key` and its edit distance (99 when none); with `present`, only
  /// among the keys that object lacks.
  static std::pair<std::string, size_t> closest(const std::string& key,
                                                const std::set<std::string>& known,
                                                const json* present = nullptr) {
    std::pair<std::string, size_t> best{"", 99};
    for (const auto& k : known) {
      if (present && present->contains(k)) continue;
      const size_t d = edit_distance(key, k);
      if (d < best.second) best = {k, d};
    }
    return best;
  }

  std::string file_;
  Job& job_;
};

/// A context's ProblemSize: 1 to 3 non-negative integers, padded with 1s to three (job.cpp).
List read_problem_size(Reader& r, const json& j, const std::string& path);

/// The GPUTune extension object into `job` (job_extension.cpp).
void read_extension(Reader& r, const json& ext, Job& job);

/// The ConfigurationSpace's TuningParameters and Conditions into `job` (job_sections.cpp).
void read_parameters(Reader& r, const json& space, Job& job);
void read_conditions(Reader& r, const json& space, Job& job);
/// The KernelSpecification's Arguments and ReferenceArguments into `job` (job_sections.cpp).
void read_arguments(Reader& r, const json& ks, Job& job);
void read_references(Reader& r, const json& ks, Job& job);

}  // namespace gputune::detail
