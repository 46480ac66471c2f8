/** \file cuda/cubin_cache.h
 * Owns: the content-addressed on-disk cubin cache (key: source, the job's own headers it
 * includes, options, kernel, NVRTC version, arch), its folder, and atomic writes into it. The
 * folder's housekeeping (limit, usage, trim) is cuda/cache_admin.h's.
 * Consumes: Variant (for the key), CompiledVariant. Produces: cached CompiledVariants.
 * Runs beside: compile_all (cuda/nvrtc.h) asks it before compiling and stores what it compiled.
 * Must not: compile, launch, or touch the database. */
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "variants/instantiate.h"

namespace gputune::cuda {

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

/// How a cache key writes an option: `-I<kernel folder>` for the kernel's own folder, whose
/// headers' content is in the key already (a kernel copied elsewhere, or materialised by the
/// daemon's worker, finds its cubins), every other option as it is.
std::string option_for_key(const std::string& option, const std::string& kernel_folder);

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

}  // namespace gputune::cuda
