/** \file pruner/traffic.h
 * Owns: the memory-traffic analysis of one variant's source with Clang libTooling (clang 14,
 * CUDA device code, `-nocudainc -nocudalib` and a small prelude of NVRTC's builtins). The kernel
 * is parsed with the variant's -D definitions, then a few representative warps of an interior
 * block (and, along an axis of at most 8 blocks, all warps of the last, often partial, block)
 * are executed symbolically: integer values are tracked per lane (thread and block indices,
 * scalar arguments, loop iterators), data values are not. Every global and shared access is
 * evaluated for the 32 lanes of the warp: 32-byte sectors per warp request (coalescing), bytes
 * requested, and for shared memory the bank-conflict degree (wavefronts per request). Long loops
 * with a uniform trip count and no loop-carried integer state are sampled (iterations 0, 1, T/2,
 * T-1, each weighted T/4); flops are counted from floating-point arithmetic, each loop's
 * control instructions from its trip count and unroll pragma, and conversions between integer
 * and floating types where the compiler cannot fold or hoist them.
 * Floating-point values are computed per lane where their operands are known (literals,
 * conversions, + - * / rounded to float for floats), and a load from an array whose contents
 * the job gives (TrafficInput::array_data) reads them. A float a sampled loop carries is unknown
 * after it. Other data values are not computed, but lanes that provably hold the same one are
 * known as such:
 * values loaded from one address by the same instruction, scalar arguments, and pure arithmetic
 * on such values (a symbol per lane). An access whose address depends on loaded data is reported
 * as such (`analysed == false`, with its note): lanes that share the data-dependent part (a
 * `shift[channel]` every lane of a row adds) are counted as they lie relative to each other, at
 * the average alignment of the unknown base, and lanes that do not share it in sectors of their
 * own (a gather `in[idx[i]]`: one per lane). A branch on data is reported with its line and both
 * sides are counted. Nothing is guessed silently. A source clang cannot parse
 * gives `parsed == false` with the first error, so callers fall back to the resource rules.
 * Consumes: source, -D options, launch geometry, argument sizes and scalar values.
 * Produces: TrafficReport. Must not: include cuda.h, launch anything, or touch the database.
 * Built with -fno-rtti (LLVM's build); the header exposes no clang types. */
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gputune::pruner {

/// The contents of a pointer argument the kernel only reads, as the job fills it: a load from it
/// gives the values themselves, read as the kernel's type reads them (a `shifts[c]` that sets an
/// address, a `row_ptr[i]` that bounds a loop), where every lane's element lies inside it.
struct ArrayData {
  std::shared_ptr<const std::vector<unsigned char>> bytes;
  std::string digest;  ///< of the bytes, for cache keys
};

struct TrafficInput {
  std::string source;
  std::string kernel_name;
  std::vector<std::string> options;  ///< compile options; -D/-U/-I/-std are passed to clang
  std::string kernel_folder;         ///< the folder of its `-I` option for the kernel's own folder
  std::array<std::int64_t, 3> grid{1, 1, 1};
  std::array<std::int64_t, 3> block{1, 1, 1};
  std::map<std::string, double> scalars;            ///< scalar kernel arguments by name
  std::map<std::string, std::int64_t> array_bytes;  ///< pointer arguments: bytes allocated
  /// The job's argument names in launch order: the kernel's parameter i takes the values of
  /// argument_order[i] (a T1 file from Kernel Tuner names its arguments as it likes:
  /// `input_samples` for a parameter `input`). Empty: matched by the kernel's parameter names.
  std::vector<std::string> argument_order;
  std::map<std::string, ArrayData> array_data;  ///< read-only pointer arguments' contents by name
  int max_warps_per_block = 3;                  ///< warps simulated per block
};

/// One syntactic access to global or shared memory, with totals over the whole grid.
struct Access {
  int line = 0, column = 0;
  std::string array;
  std::string space;  ///< "global" or "shared"
  std::string kind;   ///< "load" or "store"
  int element_bytes = 0;
  bool analysed = true;  ///< false: the address depends on data (the note says how it is counted)
  std::string note;
  double requests = 0;    ///< warp-level requests over the grid
  double sectors = 0;     ///< global: 32-byte sectors over the grid
  double wavefronts = 0;  ///< shared: requests x bank-conflict degree
  double ideal = 0;       ///< sectors (global) or wavefronts (shared) if perfectly coalesced
  double bytes = 0;       ///< bytes requested by the active lanes
  bool operator==(const Access&) const = default;
};

struct TrafficReport {
  bool parsed = false;
  std::string error;               ///< why parsing or analysis failed
  std::vector<Access> accesses;    ///< in source order
  std::vector<std::string> notes;  ///< approximations made (data-dependent branches, caps)
  std::size_t unanalysed = 0;      ///< accesses with a data-dependent address
  // Totals over the grid.
  double load_sectors = 0, store_sectors = 0;  ///< global, 32-byte sectors
  double requested_bytes = 0;                  ///< global bytes the lanes asked for
  double compulsory_bytes = 0;                 ///< per array: min(allocated bytes, bytes requested)
  double compulsory_load_bytes = 0;            ///< the same for what is loaded
  /// Rounds of global loads over the grid: per warp, the loads it issues before it must wait
  /// for one (a barrier, or an iteration of a loop the compiler keeps, ends a round; a loop
  /// unrolled by U batches U iterations' loads into one round).
  double load_rounds = 0;
  double shared_wavefronts = 0, shared_ideal = 0;
  double flops = 0;
  /// Warp instructions that keep the loops going (counter, compare, branch per iteration left
  /// after the unrolling the compiler will do: `#pragma unroll N`, full for short constant trips,
  /// else 4), over the grid.
  double control_instructions = 0;
  /// Warp instructions converting between integer and floating types or float and double (I2F,
  /// F2I, F2F), over the grid: a conversion of a constant expression is folded (none), one that
  /// no enclosing loop changes is counted once per entry of the loops it does not depend on.
  double conversion_instructions = 0;
  std::int64_t blocks = 0;
  int warps_per_block = 0, warps_simulated = 0;
  bool operator==(const TrafficReport&) const = default;
};

/// Parses and analyses one variant. Thread-safe (each call has its own compiler instance).
TrafficReport analyse_traffic(const TrafficInput& in);

/// A report as JSON text and back, every field (the tuner caches analyses on disk). Defined in
/// traffic_json.cpp, part of gputune_pruner (this library is built without RTTI). Reading gives
/// nothing for text that is not a whole report (a torn or older cache entry).
std::string traffic_to_json(const TrafficReport& r);
std::optional<TrafficReport> traffic_from_json(const std::string& text);

}  // namespace gputune::pruner
