/** \file select/wisdom.h
 * Owns: Kernel Launcher's wisdom files (KernelTuner/kernel_launcher, wisdom format "1.0", as its
 * src/wisdom.cpp reads them and python/kernel_launcher/wisdom.py writes them; docs/selection.md
 * names the version): one file per kernel, `<key>.wisdom`, whose first line is the header
 * {"version", "objective": "time", "tunable_parameters", "key"} and each further line one record
 * {"config": [values in the header's parameter order], "problem_size", "time" (ms),
 * "environment": {"date", "device_name", "compute_capability", ...}}.
 * Consumes: a DecisionTable (its candidates' times per tuned context). Produces: file texts.
 * Must not: write files (the caller does), or choose anything: Kernel Launcher applies its own
 * rule (device name, then problem size by the difference of the products, then time). */
#pragma once

#include <string>
#include <vector>

#include "select/decision_table.h"

namespace gputune::select {

/// The header's "version" and "objective" Kernel Launcher accepts.
inline constexpr const char* kWisdomVersion = "1.0";
inline constexpr const char* kWisdomObjective = "time";

struct WisdomOptions {
  /// Records per tuned context: its fastest candidates (Kernel Launcher's Python writer keeps 5).
  int max_results = 5;
  std::string date;  ///< the records' environment "date" (ISO 8601; "" leaves it out)
};

struct WisdomFile {
  std::string kernel;
  std::string file_name;  ///< `<sanitized key>.wisdom`
  std::string text;       ///< header line, then one record per line, each ending in '\n'
  int records = 0;
  /// What Kernel Launcher cannot tell apart or read, said once per kernel (input values it does
  /// not key on, a problem size beyond its 32 bits).
  std::vector<std::string> notes;
};

/// Kernel Launcher's file name for a tuning key: each character but [0-9a-zA-Z_.-] becomes '_',
/// then ".wisdom" (sanitize_tuning_key in its src/wisdom.cpp).
std::string wisdom_file_name(const std::string& key);

/// "sm_90" -> 90 (Kernel Tuner's compute_capability); 0 when it is not of that form.
int compute_capability(const std::string& arch);

/// One wisdom file per kernel of the table; the tuning key is the kernel's name.
std::vector<WisdomFile> to_wisdom(const DecisionTable& table, const WisdomOptions& options = {});

}  // namespace gputune::select
