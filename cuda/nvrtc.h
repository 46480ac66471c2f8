/** \file cuda/nvrtc.h
 * Owns: NVRTC compilation of Variants to cubin for one architecture, alone or in a pool of
 * worker threads at compile priority, through the cubin cache (cuda/cubin_cache.h).
 * A compile failure is a result (status and log), not an exception.
 * Consumes: Variant. Produces: CompiledVariant. pruner/ reads the cubins afterwards; the run's
 * stream (tuner/compile/compile_pool.h) and gputune::select compile through it.
 * Must not: launch anything or touch the database. */
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cuda/cubin_cache.h"
#include "variants/instantiate.h"

namespace gputune::cuda {

/// "13.0"
std::string nvrtc_version();

/// Options passed to NVRTC for a variant (arch and ptxas -v added to the variant's own).
std::vector<std::string> nvrtc_options(const Variant& v, const std::string& arch);

/// Compiles one variant (no cache).
CompiledVariant compile_variant(const Variant& v, const std::string& arch);

/// The one compile through the cubin cache, which every path takes: the cache's entry for
/// (v, arch) if it has one (`cached` set), else NVRTC's compile, stored when it succeeded. The
/// result carries its key either way.
CompiledVariant compile_cached(const Variant& v, const std::string& arch, const CubinCache& cache);

/// Memory set aside per compile worker. An NVRTC instance compiling a generated conv2d variant
/// adds about 30 MB to the peak (bench/results/cpu-vm-2026-11-22.md); this leaves 8x headroom.
inline constexpr long long kCompileWorkerBytes = 256LL << 20;

/// Workers for `cores` cores and `available_bytes` of free memory (negative: unknown): one per
/// core, no more than the memory holds at kCompileWorkerBytes each, at least 1, at most 64.
int compile_threads_for(unsigned cores, long long available_bytes);

/// compile_threads_for this machine (hardware threads, MemAvailable from /proc/meminfo).
int default_compile_threads();

/// Compile work (NVRTC, and the model's analyses with the naive front end) runs this many nice
/// steps below normal, so that the thread that measures and, in `gputune serve`, the HTTP threads
/// get a core at once while it compiles (on 2 cores a compiling worker put the dashboard's p99
/// over its targets: bench/results/load-*.md). Nice only weighs under contention: with cores to
/// spare the compile is as fast. Process-wide, 10 by default (`--compile-nice`); 0: no change.
/// Throws std::invalid_argument outside 0..19.
void set_compile_nice(int steps);
int compile_nice();
/// Lowers the calling thread's priority by compile_nice() steps (Linux gives each thread its own
/// nice value). Only for a thread that does nothing but compile or analyse: an unprivileged
/// thread cannot raise it back. A failure is said once on stderr, and the work goes on.
void lower_compile_thread_priority();

/// Compiles all variants with `threads` workers (0: default), using the cache. `on_done(i, result)`
/// is called from worker threads (serialise inside it) as each finishes, after the cache has it:
/// it may change the result (drop the cubin once it has been read). Once `should_stop()` says
/// so (Ctrl-C), no further variant is started: those are left not ok, logged "not compiled".
std::vector<CompiledVariant> compile_all(
    const std::vector<Variant>& variants, const std::string& arch, const CubinCache& cache,
    int threads, const std::function<void(size_t, CompiledVariant&)>& on_done = {},
    const std::function<bool()>& should_stop = {});

/// Same, for `count` variants that `make(i)` builds as a worker reaches them: a large space's
/// sources (a naive kernel's are generated) are never all in memory at once, and a stop takes
/// effect before the next one is built. `make` is called from worker threads.
std::vector<CompiledVariant> compile_all(
    size_t count, const std::function<Variant(size_t)>& make, const std::string& arch,
    const CubinCache& cache, int threads,
    const std::function<void(size_t, CompiledVariant&)>& on_done = {},
    const std::function<bool()>& should_stop = {});

}  // namespace gputune::cuda
