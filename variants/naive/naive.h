/** \file variants/naive/naive.h
 * Owns: the naive-kernel front end. A naive kernel computes one output element per thread at
 * (idx, idy) = (blockIdx.x*blockDim.x+threadIdx.x, blockIdx.y*blockDim.y+threadIdx.y); gputune
 * rewrites it into tuned variants (Yang et al.'s pipeline, ../shared/docs/papers.md sections 1-4):
 * thread-block shape, thread merge along x and y (register tiling: one thread computes
 * merge_x*merge_y outputs, loop control and thread-independent values kept once), unrolling of the
 * loops that every thread runs the same way, and per input array a load path (global, read-only
 * `__ldg`, staged through a shared-memory tile loaded coalesced, with an optional padded pitch, or
 * one register per output for the whole work).
 *
 * Two halves: analyse_naive() (analysis.cpp, clang libTooling) turns the source into a
 * NaiveKernel, a plain description with the source text split around the places a variant changes;
 * everything else here is plain C++ (the folder's other files, listed in internal.h): the tunable
 * space the kernel allows (space.cpp, from plan.cpp's decisions), the source of one variant
 * (variant.cpp and the Emitter's files), and a T1 job that tunes it through the normal pipeline.
 * Must not: compile, launch, or touch the database. */
#pragma once

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/space.h"

namespace gputune::naive {

/// Thrown for a kernel outside the subset; names the construct and its line. The analysis that
/// throws it is built without RTTI (as LLVM 14 is): the out-of-line destructors (variant.cpp,
/// built with RTTI) make that the one place the vtables are emitted, with their type information.
class NaiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~NaiveError() override;
};
/// Thrown when the file has no kernel of that name (or cannot be parsed): nothing to fall back to.
class NaiveSourceError : public NaiveError {
 public:
  using NaiveError::NaiveError;
  ~NaiveSourceError() override;
};

/// Source text split around what a variant rewrites.
struct Piece {
  enum Kind { Lit, Local, ThreadIndex, Access };
  Kind kind = Lit;
  std::string text;          ///< Lit: the text; Local: the variable's name
  int id = -1;               ///< Local: local id; Access: access id
  int dim = 0;               ///< ThreadIndex: 0 = x, 1 = y
  std::vector<Piece> index;  ///< Access: the subscript
};
using Text = std::vector<Piece>;

struct Param {
  std::string name;
  std::string type;  ///< as written, without the name ("const float *", "int")
  bool pointer = false;
  std::string element;  ///< pointer: element type ("float")
  bool read = false, written = false;
  long long row = 0;      ///< a 2-D array `T (*a)[row]` (or `T a[][row]`), indexed `a[i][j]`
  bool assigned = false;  ///< a scalar the kernel assigns to (its value changes during the work)
};

struct Local {
  std::string name, type;
  bool replicated = false;  ///< one copy per merged thread (depends on the thread or is assigned)
};

/// One `a[i]` on a pointer parameter.
struct AccessSite {
  int param = -1;
  bool store = false;
  int line = 0;
  int loop = -1;                  ///< innermost enclosing shared loop (-1: none)
  bool conditional = false;       ///< under a branch, ternary, && or || inside the thread's work
  std::set<std::string> depends;  ///< "x", "y", "loop:<id>", "local:<id>" the subscript uses
  std::map<std::string, long long> unit;  ///< constant coefficients of x, y, loop:<id> when known
  bool whole_store = false;               ///< the left side of a plain `a[i] = v;` statement
  /// Triangular loops around the access (loops whose bounds follow the thread index): each runs
  /// over the block's range and each output does only its own steps, under a range check.
  int ranged = 0;
  /// The subscript's affine form evaluated at kSymPoints random values of the scalars it names
  /// (kernel scalars, thread-independent locals), so that symbolic coefficients can be compared:
  /// `sym["y"] == sym["loop:0"]` when idy and the loop advance by the same row length, whatever
  /// it is. Key "1" is the constant term. Empty when the subscript is not affine.
  std::map<std::string, std::vector<long long>> sym;
};

/// Points at which AccessSite::sym evaluates the scalars.
inline constexpr int kSymPoints = 3;

/// A conjunct of the bounds check that is an interval bound on one index: `idx < E` is the upper
/// bound E - 1 on dimension 0 (E thread-independent and free of locals and memory).
struct GuardBound {
  int dim = -1;  ///< -1: not an interval bound
  bool upper = false;
  Text bound;      ///< E
  int adjust = 0;  ///< the inclusive bound is E + adjust
};

/// A statement of the kernel body after the index set-up and the guard.
struct Stmt {
  enum Kind {
    KeepDecl,  ///< thread-independent declaration, emitted once per thread
    RepDecl,   ///< declaration of a replicated local: an array [merge_y][merge_x]
    Loop,      ///< a loop every thread runs the same way (control kept once)
    Rep,       ///< thread work: emitted once per merged thread, under its guard
    Reduce     ///< `atomicAdd(address, value)` to a thread-independent address: text = value
  };
  Kind kind = Rep;
  Text text;       ///< KeepDecl, Rep: the statement; RepDecl: the initialiser (may be empty)
  int local = -1;  ///< RepDecl
  // Loop: for (int var = lo; var < hi (or <=); ++var) body
  int loop = -1;
  std::string var;
  Text lo, hi;
  bool inclusive = false;
  /// A triangular loop: the index (0 idx, 1 idy) that lo or hi follows with coefficient 1
  /// (`for (j = i; ...)`, `j <= i`), -1 where the bound is the same for every thread.
  int lo_dim = -1, hi_dim = -1;
  std::vector<Stmt> body;
  // Reduce: the target array (parameter id), the address as written, the value's type.
  int target = -1;
  Text address;
  std::string element;
};

struct NaiveKernel {
  std::string name, file;
  int dims = 1;                          ///< 1: idx only; 2: idx and idy
  std::vector<std::string> index_names;  ///< the kernel's names for idx, idy ("" = only inline)
  std::vector<Param> params;
  std::vector<Local> locals;
  std::vector<AccessSite> accesses;
  std::vector<Text> guard;  ///< conjuncts: a thread works only where all hold
  std::vector<std::set<std::string>> guard_depends;
  std::vector<GuardBound> guard_bounds;  ///< per conjunct
  std::vector<Stmt> body;  ///< the first `pre_guard` run for every thread, the rest under the guard
  size_t pre_guard = 0;
  int loops = 0;
  std::vector<std::string> notes;  ///< what the analysis decided and why (offered choices)
  /// What was read in another spelling of the same structure (a loop counter declared before its
  /// loop, ...), and what looked like such a construct and was not understood, with its line and
  /// what to change: printed by generate, run and prune (job notes), once.
  std::vector<std::string> rewrites;
  /// The file's text before and after the kernel's definition (its includes, macros, helper
  /// functions, other kernels): every variant keeps it around the kernel it generates.
  std::string before, after;
};

/// Parses `source` and describes kernel `kernel`. Throws NaiveError naming the file, line and the
/// construct outside the subset. `as_written`: without the rewrites of other spellings of the
/// same structure (NaiveKernel::rewrites), to see what they add (`generate --as-written`).
NaiveKernel analyse_naive(const std::string& source, const std::string& kernel,
                          const std::string& file, const std::vector<std::string>& options = {},
                          bool as_written = false);

// ---------------------------------------------------------------------------------------------
// Variants (plan.cpp, space.cpp, variant.cpp and the Emitter's files; no clang).

/// Where a variant keeps an array the work reads: plain global loads, the read-only path, shared
/// memory (tiles or a halo window), or registers: one per output for the thread's whole work,
/// loaded once before it and stored once after when written (register_refusal says when not).
enum class Cache { Global, ReadOnly, Shared, Registers };
std::string cache_name(Cache c);

/// How a variant bounds its registers. `Threads`: __launch_bounds__(threads of the block), so
/// every launch fits (ptxas may also cap registers below what the code wants and spill: mm's
/// sgemm tile with two stages gets 128 registers and 36 bytes of spills from NVRTC); `None`: no
/// attribute, the compiler's choice up to 255 (the same tile: 167, no spills); `TwoBlocks`:
/// __launch_bounds__(threads, 2), registers capped so two blocks fit per SM.
enum class LaunchBounds { Threads, None, TwoBlocks };
std::string launch_bounds_name(LaunchBounds b);  ///< "threads", "none", "two_blocks"

/// What a variant is: one value per tunable dimension.
struct Choice {
  int block_x = 32, block_y = 1;
  int merge_x = 1, merge_y = 1;
  int unroll = 1;
  int tile_k = 16;  ///< strip of a staged loop
  bool pad = false;
  int vector = 1;  ///< elements per staging load (float2/float4) where contiguous and aligned
  /// Tiles read along the loop by a thread index (mm's a[idy * n + k], syrk's a[idx * m + k])
  /// stored transposed, [k][idy] or [k][idx], with the merged outputs along that index in runs
  /// of `vector`: a run's reads at one step of the loop are one vector load from the tile
  /// (transposable_dim), not `vector` steps' worth of registers per merged row or column.
  bool transpose = false;
  /// Threads of a warp along x (a power of two dividing block_x; the warp's other 32 / warp_x
  /// threads along y): each thread's place in the block from its lane and warp, so that a warp
  /// covers a warp_x x (32 / warp_x) patch of threads and its reads of a tile row or column
  /// are fewer distinct addresses (shared-memory wavefronts). 0: as launched (threadIdx.x
  /// fastest).
  int warp_x = 0;
  std::map<std::string, Cache> cache;  ///< by array (parameter) name; absent = global
  std::set<std::string> stage_store;   ///< written arrays whose stores go through a shared tile
  std::set<std::string> block_reduce;  ///< atomicAdd targets summed per block first
  int split = 1;  ///< threads per output sharing the reduction loop (split_loop); 1: none
  /// Buffers of a strip-mined loop's shared tiles: S > 1 copies the next S-1 strips with
  /// cp.async (sm_80+; a plain copy elsewhere) while the threads work on the current one.
  int stages = 1;
  /// The kernel's register budget (launch_bounds_name): __launch_bounds__(threads), none, or
  /// __launch_bounds__(threads, 2).
  LaunchBounds bounds = LaunchBounds::Threads;
};

/// The loop whose iterations several threads per output can share (`split`), or -1 with the
/// reason: a 1-D kernel's top-level loop in the work whose body only adds to replicated
/// accumulators (`sum += a[idx*n+i] * x[i];`). Each of `split` consecutive threads takes every
/// split-th iteration, the partial sums meet through warp shuffles, one thread writes.
struct SplitOption {
  int loop = -1;
  std::vector<int> locals;  ///< the accumulators
  /// Where an output's lanes sit: consecutive threads of a warp (their parts meet by shuffles),
  /// or, when a read in the loop is coalesced along idx (tmv's a[i*m+idx]), along threadIdx.y, so
  /// that each warp still reads consecutive idx (their parts meet in shared memory).
  bool across_warps = false;
  std::string reason;
};
SplitOption split_loop(const NaiveKernel& k);

/// The load paths an array may take, with the reason for each one left out.
struct ArrayOptions {
  std::string array;
  std::vector<Cache> allowed;
  std::vector<std::string> reasons;
};
std::vector<ArrayOptions> array_options(const NaiveKernel& k);

/// What a variant may do with an array the kernel writes: stage its stores through a shared
/// tile (coalesced along the other thread dimension, as in a tiled transpose) and/or sum its
/// `atomicAdd`s per block before one atomic per block; with the reason for each one left out.
struct OutputOptions {
  std::string array;
  bool stage = false, reduce = false;
  std::vector<std::string> reasons;
};
std::vector<OutputOptions> output_options(const NaiveKernel& k);

/// Reads a Choice from a configuration of the generated space (parameter names as in space_json).
Choice choice_from_config(const NaiveKernel& k, const Config& c);

/// Shared memory the variant declares, in bytes (static; 48 KiB at most).
long long shared_bytes(const NaiveKernel& k, const Choice& c);

/// Dynamic shared memory the variant needs at launch (its halo windows, whose size follows the
/// loop bounds), for the kernel's scalar arguments by name. Throws NaiveError when a scalar the
/// loop bounds use is missing.
long long dynamic_shared_bytes(const NaiveKernel& k, const Choice& c,
                               const std::map<std::string, double>& scalars);

/// The input arrays that can be read through a halo window, described ("in: 1 read(s), ...").
std::vector<std::string> halo_windows(const NaiveKernel& k);

/// The variant's source: a readable kernel with a header comment listing its transformations.
/// `problem` (when given) adds the launch geometry for those sizes to the comment.
std::string emit_variant(const NaiveKernel& k, const Choice& c);

/// Removes `const int NAME = EXPR;` lines whose NAME is not used in the rest of its block (the
/// per-output idx/idy bindings a loop over merged outputs does not need), so the generated
/// source compiles without "declared but never referenced" warnings. Only expressions without
/// calls, assignments or increments go, and never a name a preprocessor line mentions.
std::string drop_unused_bindings(const std::string& src);

/// A short label for file names: "bx32_by4_mx2_my2_u4_a-shared_b-readonly".
std::string choice_label(const NaiveKernel& k, const Choice& c);

/// Turns a job over a naive kernel into a tunable one: the generated parameters (block_size_x/y,
/// merge_x/y, unroll, tile_k, pad, vector, cache_<array>, write_<array>, reduce_<array>) and their
/// conditions, unless the job lists its own (a job may narrow the generated values by giving a
/// parameter of the same name), and the launch geometry: the job's GlobalSize is the naive kernel's
/// thread count (OpenCL style) and becomes blocks of block_size x merge. Throws JobError for a job
/// that does not fit.
void apply_to_job(Job& job, const NaiveKernel& k);

/// The thread block a variant launches (x, y): block_x x block_y, times split along x (lanes in
/// a warp) or along y (lanes across warps).
std::array<int, 2> launch_block(const NaiveKernel& k, const Choice& c);

/// The tuning space for a kernel outside the subset: block shape only, the source unchanged.
void apply_block_shape_only(Job& job, int dims);

}  // namespace gputune::naive
