// The job's own headers, found and digested (cuda/header_digest.h).
#include "cuda/header_digest.h"

#include <nvrtc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "variants/hash.h"

namespace gputune::cuda {

std::vector<IncludeOption> include_options(const std::vector<std::string>& options) {
  std::vector<IncludeOption> out;
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    if ((o == "-I" || o == "--include-path") && i + 1 < options.size()) {
      out.push_back({i + 1, "", options[i + 1]});
      ++i;
    } else if (o.rfind("--include-path=", 0) == 0) {
      out.push_back({i, "--include-path=", o.substr(15)});
    } else if (o.rfind("-I", 0) == 0 && o.size() > 2) {
      out.push_back({i, "-I", o.substr(2)});
    }
  }
  return out;
}

namespace {

/// The folders `-I` and `--include-path` options name, in order.
std::vector<std::filesystem::path> include_dirs(const std::vector<std::string>& options) {
  std::vector<std::filesystem::path> dirs;
  for (const IncludeOption& o : include_options(options)) dirs.emplace_back(o.folder);
  return dirs;
}

/// What a path holds now, cheaply: its modification time and size, or that it is not a file.
std::string file_stamp(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return "none";
  const auto t = std::filesystem::last_write_time(p, ec).time_since_epoch().count();
  return std::to_string(t) + " " + std::to_string(std::filesystem::file_size(p, ec));
}

/// A folder of the toolkit's or the system's, whose headers are not the job's own: the system's
/// include and library folders, a CUDA toolkit under /usr/local or /opt/nvidia, or any folder
/// holding the CUDA runtime's headers.
bool system_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(dir, ec).lexically_normal().string();
  for (const char* prefix : {"/usr/include", "/usr/local/include", "/usr/lib", "/usr/local/lib",
                             "/usr/share", "/usr/local/cuda", "/opt/nvidia"})
    if (abs.rfind(prefix, 0) == 0) return true;
  return std::filesystem::exists(dir / "cuda_runtime_api.h", ec);
}

struct IncludeScan {
  std::vector<std::filesystem::path> dirs;      ///< -I folders, in order
  std::vector<std::filesystem::path> own_dirs;  ///< those that are not the system's
  std::set<std::string> seen;
  std::vector<std::filesystem::path> files;  ///< found, absolute and normal, in include order
  std::string digest;
  std::vector<std::pair<std::filesystem::path, std::string>> probed;  ///< path, file_stamp
};

/// Adds `text`'s own headers (and theirs) to the scan's digest, each once: `#include "name"`
/// searched in the includer's folder, the -I folders and the working directory (one not found
/// counts as missing), and `#include <name>` searched in the -I folders that are not the
/// system's (one not found there is the toolkit's or the system's, and is not followed).
void add_own_headers(const std::string& text, const std::filesystem::path& own_dir,
                     IncludeScan& scan) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // `#include "name"` or `#include <name>`, with blanks allowed around the '#'.
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line[p] != '#') continue;
    p = line.find_first_not_of(" \t", p + 1);
    if (p == std::string::npos || line.compare(p, 7, "include") != 0) continue;
    p = line.find_first_not_of(" \t", p + 7);
    if (p == std::string::npos || (line[p] != '"' && line[p] != '<')) continue;
    const bool quoted = line[p] == '"';
    const size_t close = line.find(quoted ? '"' : '>', p + 1);
    if (close == std::string::npos) continue;
    const std::string name = line.substr(p + 1, close - p - 1);
    std::vector<std::filesystem::path> where;
    if (quoted) {
      if (!own_dir.empty()) where.push_back(own_dir);
      where.insert(where.end(), scan.dirs.begin(), scan.dirs.end());
      where.emplace_back(".");
    } else {
      where = scan.own_dirs;
    }
    std::filesystem::path found;
    for (const auto& d : where) {
      const std::string stamp = file_stamp(d / name);
      scan.probed.emplace_back(d / name, stamp);
      if (stamp != "none") {
        std::error_code ec;
        found = std::filesystem::absolute(d / name, ec).lexically_normal();
        break;
      }
    }
    if (found.empty()) {
      if (quoted) scan.digest += "missing " + name + "\n";
      continue;
    }
    // A quoted include may reach a system header through -I: it is not the job's own.
    if (quoted && system_folder(found.parent_path())) continue;
    if (!scan.seen.insert(found.string()).second) continue;
    scan.files.push_back(found);
    std::ifstream in(found, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    // By the name it is included as, not where it lies: the same files elsewhere, the same key.
    scan.digest += (quoted ? "include \"" + name + "\" " : "include <" + name + "> ") +
                   sha256_hex(content.str()) + "\n";
    add_own_headers(content.str(), found.parent_path(), scan);
  }
}

IncludeScan scan_for(const std::vector<std::string>& options) {
  IncludeScan scan;
  scan.dirs = include_dirs(options);
  for (const auto& d : scan.dirs)
    if (!system_folder(d)) scan.own_dirs.push_back(d);
  return scan;
}

}  // namespace

std::vector<std::filesystem::path> own_header_files(const std::string& source,
                                                    const std::vector<std::string>& options) {
  IncludeScan scan = scan_for(options);
  add_own_headers(source, {}, scan);
  return scan.files;
}

std::string own_headers_digest(const std::string& source, const std::vector<std::string>& options) {
  if (source.find("include") == std::string::npos) return "";
  IncludeScan scan = scan_for(options);
  std::string memo_key = sha256_hex(source);
  for (const auto& d : scan.dirs) memo_key += "\n" + d.string();
  // One job's variants share source and folders (their -D values differ): the headers are read
  // once, and later keys only check that no file they found (or looked for) has changed since.
  struct Memo {
    std::string digest;
    std::vector<std::pair<std::filesystem::path, std::string>> probed;
  };
  static std::mutex mu;
  static std::map<std::string, Memo> memo;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(memo_key); it != memo.end()) {
      const bool same = std::all_of(it->second.probed.begin(), it->second.probed.end(),
                                    [](const auto& p) { return file_stamp(p.first) == p.second; });
      if (same) return it->second.digest;
    }
  }
  add_own_headers(source, {}, scan);
  const std::string digest = scan.digest.empty() ? "" : sha256_hex(scan.digest);
  std::lock_guard<std::mutex> lock(mu);
  memo[memo_key] = Memo{digest, std::move(scan.probed)};
  return digest;
}

}  // namespace gputune::cuda
