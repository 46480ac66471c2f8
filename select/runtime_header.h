/** \file select/runtime_header.h
 * Owns: the self-contained C++17 header `gputune best KERNEL --header FILE --runtime` writes: the
 * kernel's decision table as constants, and `gputune_tuned::<kernel>::choose(device, arch, size,
 * dims)` applying the rules of select::Table::choose (select.cpp) to it: the device by name
 * (ASCII case-insensitive), else the same-architecture device with the most contexts; an exact
 * context match on a device of that name (measured); else the device's rule: its decision tree
 * where its method is learned, else the nearest tuned context in log2 problem size, ties to the
 * larger input. Each answer says how it was obtained and from which contexts. Applications that
 * cannot read files (or link gputune) compile it in.
 * Consumes: a KernelTable (select::table_from_store). Produces: the header's text.
 * Must not: include anything of gputune in the generated header, or compute launch geometry (the
 * job's rules stay with select::Table and kernel.h). */
#pragma once

#include <string>

#include "select/decision_table.h"

namespace gputune::select {

struct RuntimeHeaderOptions {
  std::string origin;     ///< what the comment names as the origin, e.g. the database file
  std::string generated;  ///< the date the comment gives (empty: none)
};

/// The C++ identifier a kernel's namespace gets: each run of characters other than letters,
/// digits and '_' becomes one '_'; a leading digit gets a '_' before it.
std::string runtime_namespace(const std::string& kernel);

/// The header's text for one kernel. Throws std::invalid_argument naming the kernel when it has
/// no tuned context to choose from.
std::string runtime_header(const KernelTable& kernel, const RuntimeHeaderOptions& options = {});

}  // namespace gputune::select
