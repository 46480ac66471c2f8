/** \file tuner/compile.h
 * Owns: NVRTC compilation of Variants to cubin for one architecture, in a pool of worker threads,
 * with a content-addressed on-disk cubin cache (key: source, the job's own headers it includes,
 * options, kernel, NVRTC version, arch).
 * A compile failure is a result (status and log), not an exception.
 * Consumes: Variant. Produces: CompiledVariant. pruner/ reads the cubins afterwards.
 * Must not: launch anything or touch the database. */
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "variants/instantiate.h"

namespace gputune::tuner {

struct CompiledVariant {
  bool ok = false;
  std::string cubin;         ///< ELF bytes
  std::string lowered_name;  ///< the kernel's symbol in the cubin
  std::string log;           ///< NVRTC log (ptxas -v info included)
  double compile_ms = 0;     ///< 0 when served from the cache
  bool cached = false;
  std::string key;         ///< cache key (SHA-256)
  std::string cubin_hash;  ///< SHA-256 of the cubin (equal hashes: identical code)
};

/// "13.0"
std::string nvrtc_version();

/// Options passed to NVRTC for a variant (arch and ptxas -v added to the variant's own).
std::vector<std::string> nvrtc_options(const Variant& v, const std::string& arch);

/// An include folder named by compile options: `options[index]` is `prefix + folder` (`-Idir`,
/// `--include-path=dir`; the prefix is empty when the folder follows `-I` or `--include-path`
/// as an option of its own).
struct IncludeOption {
  size_t index = 0;
  std::string prefix, folder;
};
std::vector<IncludeOption> include_options(const std::vector<std::string>& options);

/// A digest of the job's own headers: those a source includes with quotes (`#include "x.h"`),
/// searched in the including file's folder, then the `-I`/`--include-path` folders of `options`,
/// then the working directory (a file not found counts as missing), and those it includes with
/// angle brackets that lie in an `-I` folder that is not the toolkit's or the system's; then
/// what those include, in turn. Each by the name it is included as and its content, not by
/// where it lies. The cubin and analysis caches put it in their keys, so editing a header
/// compiles again. Memoized per source and options.
std::string own_headers_digest(const std::string& source, const std::vector<std::string>& options);

/// The files the digest above reads (the job's own headers), absolute and normal, in include
/// order.
std::vector<std::filesystem::path> own_header_files(const std::string& source,
                                                    const std::vector<std::string>& options);

/// How a cache key writes an option: `-I<kernel folder>` for the kernel's own folder, whose
/// headers' content is in the key already (a kernel copied elsewhere, or materialised by the
/// daemon's worker, finds its cubins), every other option as it is.
std::string option_for_key(const std::string& option, const std::string& kernel_folder);

/// Compiles one variant (no cache).
CompiledVariant compile_variant(const Variant& v, const std::string& arch);

class CubinCache {
 public:
  /// An empty dir disables caching.
  explicit CubinCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  /// $GPUTUNE_CACHE_DIR, else $XDG_CACHE_HOME/gputune, else ~/.cache/gputune.
  static std::filesystem::path default_dir();

  static std::string key(const Variant& v, const std::string& arch);
  std::optional<CompiledVariant> get(const std::string& key) const;
  /// Stores successful compiles (written atomically: temp file then rename).
  void put(const CompiledVariant& c) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a reader
/// sees the whole file or none; creates the folder. False when it could not (the caches treat
/// that as a miss next time, never as an error).
bool write_atomically(const std::filesystem::path& path, const std::string& bytes);

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

}  // namespace gputune::tuner
