/** \file cuda/cache_admin.h
 * Owns: housekeeping of the on-disk cache folder that cuda/cubin_cache.h (cubins) and
 * tuner/model/predict.h (traffic reports) write: what it holds, its size limit, trimming the least
 * recently used entries to that limit, clearing it. `gputune cache` and the automatic trim after a
 * command that wrote to the cache are thin shells over this. Must not: read or judge an entry's
 * content (its writer owns the format and treats a missing entry as a miss), or touch any file
 * whose name is not one the caches write: pointed at the wrong folder, it removes nothing of the
 * user's. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

namespace gputune::cuda {

/// The cache folder's `max-size` file (set by `gputune cache --max-size`) and the default.
inline constexpr const char* kCacheLimitFile = "max-size";
inline constexpr std::uint64_t kDefaultCacheLimitBytes = 10ULL << 30;
/// A write the caches left half done (a temporary file) counts as abandoned after this long.
inline constexpr int kAbandonedWriteSeconds = 3600;

/// "10G", "500M", "1.5GiB", "64k", "123" (bytes): binary units (1G = 1024^3 bytes), with an
/// optional "i", "B" or "iB" after the unit. Nothing for anything else (negative, no digits,
/// an unknown unit).
std::optional<std::uint64_t> parse_size(const std::string& text);
/// parse_size, or a JobError naming `file` and `field`, with the fix (and `also` after it).
std::uint64_t size_of(const std::string& text, const std::string& file, const std::string& field,
                      const std::string& also = "");
/// 1536 -> "1.5 KiB"; under 1 KiB in bytes.
std::string format_size(std::uint64_t bytes);

/// The limit and where it came from.
struct CacheLimit {
  std::uint64_t bytes = kDefaultCacheLimitBytes;  ///< 0: no limit
  std::string source = "default";  ///< "GPUTUNE_CACHE_MAX_SIZE", "<dir>/max-size", "default"
};
/// $GPUTUNE_CACHE_MAX_SIZE, else the folder's max-size file, else the default. Throws
/// JobError (naming the variable or the file, and the fix) when the one that is set is not a size.
CacheLimit cache_limit(const std::filesystem::path& dir);
/// Writes the folder's max-size file (0: no limit); throws JobError when it cannot.
void set_cache_limit(const std::filesystem::path& dir, std::uint64_t bytes);

/// What a cache folder holds. Sizes are disk usage (allocated blocks), as `du` counts them.
struct CacheUsage {
  struct Kind {
    std::size_t entries = 0;
    std::uint64_t bytes = 0;
  };
  Kind cubins;     ///< compiled variants (a .cubin and its .json)
  Kind traffic;    ///< traffic analysis reports (traffic/)
  Kind abandoned;  ///< temporary files of writes that never finished (older than an hour)
  std::size_t other_files = 0;  ///< files the caches did not write: never removed
  /// Last use of the least and most recently used entry (a hit renews it); 0 when empty.
  std::int64_t oldest_use = 0, newest_use = 0;  ///< seconds since the epoch
  std::uint64_t bytes() const { return cubins.bytes + traffic.bytes + abandoned.bytes; }
};
CacheUsage cache_usage(const std::filesystem::path& dir);

struct TrimResult {
  std::size_t removed_entries = 0;
  std::uint64_t removed_bytes = 0;
  CacheUsage before, after;
};
/// Removes abandoned writes, then entries in order of last use, oldest first, until the folder
/// holds at most `target_bytes`. Entries that vanish meanwhile (another process trimming) or
/// cannot be removed (a read-only folder) are skipped. A process reading an entry as it goes
/// sees a miss and compiles (or analyses) again.
TrimResult trim_cache(const std::filesystem::path& dir, std::uint64_t target_bytes);

/// Renews an entry's last use (its file's modification time) on a cache hit; errors ignored.
void mark_used(const std::filesystem::path& file);

/// Bytes this process has written into cache folders (CubinCache::put, TrafficCache::put).
std::uint64_t cache_bytes_written();
void count_cache_write(std::uint64_t bytes);

/// After a command that used the cache at `dir` (empty: caching off): when this process wrote to
/// it and it is over its limit, trims it to 90% of the limit (so the next run does not trim
/// again at once) and says so on `log`. Never throws: a limit that is not a size is reported and
/// nothing is removed.
void trim_cache_after_use(const std::filesystem::path& dir, std::ostream& log);

}  // namespace gputune::cuda
