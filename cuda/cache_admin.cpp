// The cache folder's housekeeping (cuda/cache_admin.h).
#include "cuda/cache_admin.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <vector>

#include "variants/job.h"

namespace gputune::cuda {

namespace fs = std::filesystem;

std::optional<std::uint64_t> parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".")
    return std::nullopt;
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() == 2 && unit.back() == 'I') unit.pop_back();
  static const std::map<std::string, double> kScale = {{"", 1},
                                                       {"B", 1},
                                                       {"K", 1024.0},
                                                       {"M", 1024.0 * 1024},
                                                       {"G", 1024.0 * 1024 * 1024},
                                                       {"T", 1024.0 * 1024 * 1024 * 1024}};
  auto scale = kScale.find(unit);
  if (scale == kScale.end()) return std::nullopt;
  const double bytes = std::strtod(number.c_str(), nullptr) * scale->second;
  if (!std::isfinite(bytes) || bytes >= 1.8e19) return std::nullopt;
  return static_cast<std::uint64_t>(std::llround(bytes));
}

std::string format_size(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char out[32];
  std::snprintf(out, sizeof out, "%.1f %s", v, units[u]);
  return out;
}

std::uint64_t size_of(const std::string& text, const std::string& file, const std::string& field,
                      const std::string& also) {
  if (auto bytes = parse_size(text)) return *bytes;
  throw JobError(file, field, "'" + text + "' is not a size",
                 "give a size such as 10G or 500M (binary units), or 0 for no limit" + also);
}

CacheLimit cache_limit(const fs::path& dir) {
  if (const char* env = std::getenv("GPUTUNE_CACHE_MAX_SIZE"); env && *env)
    return {size_of(env, "environment", "GPUTUNE_CACHE_MAX_SIZE"), "GPUTUNE_CACHE_MAX_SIZE"};
  const fs::path file = dir / kCacheLimitFile;
  std::ifstream in(file);
  if (!in) return {};
  std::string text;
  in >> text;
  return {size_of(text, file.string(), "size", " (`gputune cache --max-size SIZE` writes it)"),
          file.string()};
}

void set_cache_limit(const fs::path& dir, std::uint64_t bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / kCacheLimitFile;
  std::ofstream out(file);
  out << bytes << "\n";
  out.close();
  if (!out)
    throw JobError(file.string(), "max-size", "cannot write the limit there",
                   "check the folder's permissions, or set GPUTUNE_CACHE_MAX_SIZE instead");
}

namespace {

std::atomic<std::uint64_t> g_written{0};

bool is_hex(const std::string& s, size_t from, size_t n) {
  if (s.size() < from + n) return false;
  for (size_t i = from; i < from + n; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i])) ||
        std::isupper(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}

/// What a file in a shard folder `shard` (two hex digits) is, by its name alone.
enum class Name { kEntry, kTemporary, kOther };
Name classify(const std::string& shard, const std::string& name, bool traffic) {
  if (!is_hex(name, 0, 64) || name.compare(0, 2, shard) != 0) return Name::kOther;
  const std::string rest = name.substr(64);
  const std::vector<std::string> extensions =
      traffic ? std::vector<std::string>{".json"} : std::vector<std::string>{".json", ".cubin"};
  for (const std::string& e : extensions) {
    if (rest == e) return Name::kEntry;
    // write_atomically's temporary name: <final name>.tmp<pid>-<thread hash>
    if (rest.rfind(e + ".tmp", 0) == 0) {
      const std::string id = rest.substr(e.size() + 4);
      const size_t dash = id.find('-');
      auto digits = [](const std::string& s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        });
      };
      if (dash != std::string::npos && digits(id.substr(0, dash)) && digits(id.substr(dash + 1)))
        return Name::kTemporary;
    }
  }
  return Name::kOther;
}

struct Entry {
  std::vector<fs::path> files;
  std::uint64_t bytes = 0;
  std::int64_t used = 0;  ///< newest mtime of its files
  enum { kCubin, kTraffic, kAbandoned } kind = kCubin;
};

struct Scan {
  std::vector<Entry> entries;
  std::size_t other_files = 0;
};

Scan scan(const fs::path& dir) {
  Scan s;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto scan_shards = [&](const fs::path& root, bool traffic) {
    std::error_code ec;
    for (fs::directory_iterator top(root, ec), end; !ec && top != end; top.increment(ec)) {
      const std::string shard = top->path().filename().string();
      std::error_code tec;
      if (!top->is_directory(tec)) {
        if (!(!traffic && shard == kCacheLimitFile)) ++s.other_files;
        continue;
      }
      if (!(shard.size() == 2 && is_hex(shard, 0, 2))) {
        if (!(!traffic && shard == "traffic")) ++s.other_files;  // a folder not ours: not entered
        continue;
      }
      std::map<std::string, Entry> by_key;  // a cubin entry is two files
      std::error_code sec;
      for (fs::directory_iterator it(top->path(), sec); !sec && it != end; it.increment(sec)) {
        const std::string name = it->path().filename().string();
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0) continue;  // gone meanwhile
        const Name kind = S_ISREG(st.st_mode) ? classify(shard, name, traffic) : Name::kOther;
        if (kind == Name::kOther) {
          ++s.other_files;
          continue;
        }
        const std::uint64_t bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
        const std::int64_t mtime = st.st_mtime;
        if (kind == Name::kTemporary) {
          if (now - mtime < kAbandonedWriteSeconds) continue;  // a write in progress
          Entry e;
          e.files = {it->path()}, e.bytes = bytes, e.used = mtime, e.kind = Entry::kAbandoned;
          s.entries.push_back(std::move(e));
          continue;
        }
        Entry& e = by_key[name.substr(0, 64)];
        e.files.push_back(it->path());
        e.bytes += bytes;
        e.used = std::max(e.used, mtime);
        e.kind = traffic ? Entry::kTraffic : Entry::kCubin;
      }
      for (auto& [key, e] : by_key) s.entries.push_back(std::move(e));
    }
  };
  scan_shards(dir, false);
  scan_shards(dir / "traffic", true);
  return s;
}

CacheUsage usage_of(const Scan& s) {
  CacheUsage u;
  u.other_files = s.other_files;
  for (const Entry& e : s.entries) {
    CacheUsage::Kind& k = e.kind == Entry::kCubin     ? u.cubins
                          : e.kind == Entry::kTraffic ? u.traffic
                                                      : u.abandoned;
    ++k.entries;
    k.bytes += e.bytes;
    if (e.kind == Entry::kAbandoned) continue;
    u.oldest_use = u.oldest_use == 0 ? e.used : std::min(u.oldest_use, e.used);
    u.newest_use = std::max(u.newest_use, e.used);
  }
  return u;
}

/// trim_cache on a scan already made.
TrimResult trim_scanned(Scan s, std::uint64_t target_bytes) {
  TrimResult r;
  r.before = usage_of(s);
  // Abandoned writes first, then by last use, oldest first.
  std::stable_sort(s.entries.begin(), s.entries.end(), [](const Entry& a, const Entry& b) {
    const bool aa = a.kind == Entry::kAbandoned, ba = b.kind == Entry::kAbandoned;
    if (aa != ba) return aa;
    return a.used < b.used;
  });
  std::uint64_t total = r.before.bytes();
  std::vector<bool> removed(s.entries.size(), false);
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const Entry& e = s.entries[i];
    if (total <= target_bytes && e.kind != Entry::kAbandoned) break;
    bool all = true, any = false;
    for (const fs::path& f : e.files) {
      std::error_code ec;
      // false without an error: another process (trimming too) removed it first
      if (fs::remove(f, ec)) any = true;
      if (ec) all = false;
    }
    if (!all) continue;  // a read-only folder: it stays, and counts
    removed[i] = true;
    total -= std::min(total, e.bytes);
    if (!any) continue;
    ++r.removed_entries;
    r.removed_bytes += e.bytes;
  }
  Scan left;
  left.other_files = s.other_files;
  for (size_t i = 0; i < s.entries.size(); ++i)
    if (!removed[i]) left.entries.push_back(std::move(s.entries[i]));
  r.after = usage_of(left);
  return r;
}

}  // namespace

CacheUsage cache_usage(const fs::path& dir) { return usage_of(scan(dir)); }

TrimResult trim_cache(const fs::path& dir, std::uint64_t target_bytes) {
  return trim_scanned(scan(dir), target_bytes);
}

void mark_used(const fs::path& file) {
  std::error_code ec;  // a read-only cache is still read
  fs::last_write_time(file, fs::file_time_type::clock::now(), ec);
}

std::uint64_t cache_bytes_written() { return g_written.load(); }
void count_cache_write(std::uint64_t bytes) { g_written += bytes; }

void trim_cache_after_use(const fs::path& dir, std::ostream& log) {
  if (dir.empty() || cache_bytes_written() == 0) return;
  try {
    const CacheLimit limit = cache_limit(dir);
    if (limit.bytes == 0) return;
    Scan s = scan(dir);  // one scan decides and trims
    const CacheUsage u = usage_of(s);
    if (u.bytes() <= limit.bytes && u.abandoned.entries == 0) return;
    const std::uint64_t target = u.bytes() <= limit.bytes ? u.bytes() : limit.bytes / 10 * 9;
    const TrimResult r = trim_scanned(std::move(s), target);
    if (r.removed_entries == 0) return;
    log << "gputune: cache " << dir.string() << ": removed " << r.removed_entries
        << (r.removed_entries == 1 ? " entry (" : " entries (") << format_size(r.removed_bytes)
        << "), unfinished writes and then the least recently used; " << format_size(r.after.bytes())
        << " left of its " << format_size(limit.bytes) << " limit (" << limit.source
        << "; `gputune cache --help`)\n";
  } catch (const std::exception& e) {
    log << "gputune: cache " << dir.string() << " not trimmed: " << e.what() << "\n";
  }
}

}  // namespace gputune::cuda
