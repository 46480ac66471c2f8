/** \file db/tuned_header.h
 * Owns: the C/C++ header that carries a kernel's stored winners into the application that uses
 * the kernel (`gputune best KERNEL --header FILE`): one #define per tuning parameter, chosen at
 * compile time by -DGPUTUNE_TARGET_<device> and -DGPUTUNE_CONTEXT_<context>, with a per-device
 * default that is measured to be close to the best in every context of that device, and a
 * parameter the compiler already has (-Dname=..., as a tuner passes it) left alone.
 * Consumes: Store (winners and measurements). Produces: the header's text.
 * Must not: know about CUDA or write files; all SQL stays in store.cpp. */
#pragma once

#include <string>

#include "db/store.h"

namespace gputune::db {

struct HeaderOptions {
  std::string context;    ///< only this context label (empty: all)
  std::string device;     ///< only this device name (empty: all)
  std::string source;     ///< what the comment names as the origin, e.g. the database file
  std::string generated;  ///< the date the comment gives (empty: none)
};

/// `name` as the tail of a macro name: each run of characters other than letters and digits
/// becomes one '_' ("NVIDIA H100 80GB HBM3" -> "NVIDIA_H100_80GB_HBM3").
std::string macro_suffix(const std::string& name);

/// The header's text for the stored winners of `kernel` (a name or kernel-hash prefix). Only the
/// newest version of the kernel's source counts (the one with the latest winner); the comment says
/// how many contexts of older versions were left out. Throws std::invalid_argument naming the
/// kernel (and the contexts it has, if any) when nothing is stored to write.
std::string tuned_header(Store& store, const std::string& kernel, const HeaderOptions& o);

}  // namespace gputune::db
