#include "tuner/compile.h"

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

#include "tuner/cache_admin.h"
#include "variants/hash.h"

namespace gputune::tuner {

namespace {

/// Owns an nvrtcProgram; destroys it on scope exit without throwing. A program NVRTC could not
/// create (out of memory) is a compile failure of that variant, as compile.h promises: `error()`.
class NvrtcProgram {
 public:
  NvrtcProgram(const std::string& source, const std::string& name) {
    nvrtcResult rc = nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr);
    if (rc != NVRTC_SUCCESS) {
      prog_ = nullptr;
      error_ = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc);
    }
  }
  const std::string& error() const { return error_; }
  NvrtcProgram(const NvrtcProgram&) = delete;
  ~NvrtcProgram() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
  std::string error_;
};

std::string program_log(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return {};
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  log.resize(n - 1);
  return log;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_options(const Variant& v, const std::string& arch) {
  std::vector<std::string> o = {"--gpu-architecture=" + arch, "--ptxas-options=-v"};
  o.insert(o.end(), v.options.begin(), v.options.end());
  return o;
}

CompiledVariant compile_variant(const Variant& v, const std::string& arch) {
  CompiledVariant c;
  auto t0 = std::chrono::steady_clock::now();
  NvrtcProgram prog(v.source, v.kernel_name + ".cu");
  if (!prog.error().empty()) {
    c.log = prog.error();
    return c;
  }
  std::string expr = v.kernel_name;
  nvrtcAddNameExpression(prog.get(), expr.c_str());
  auto opts = nvrtc_options(v, arch);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult rc = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  c.log = program_log(prog.get());
  c.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != NVRTC_SUCCESS) {
    if (c.log.empty()) c.log = nvrtcGetErrorString(rc);
    return c;
  }
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered) == NVRTC_SUCCESS && lowered)
    c.lowered_name = lowered;
  else
    c.lowered_name = v.kernel_name;
  size_t n = 0;
  if ((rc = nvrtcGetCUBINSize(prog.get(), &n)) != NVRTC_SUCCESS || n == 0) {
    c.log += std::string("\nnvrtcGetCUBINSize: ") + nvrtcGetErrorString(rc) +
             " (the architecture must be a real sm_XX to get a cubin)";
    return c;
  }
  c.cubin.resize(n);
  nvrtcGetCUBIN(prog.get(), c.cubin.data());
  c.cubin_hash = sha256_hex(c.cubin);
  c.ok = true;
  return c;
}

std::filesystem::path CubinCache::default_dir() {
  if (const char* d = std::getenv("GPUTUNE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "gputune";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "gputune";
  return ".gputune-cache";
}

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

std::string option_for_key(const std::string& option, const std::string& kernel_folder) {
  if (!kernel_folder.empty() && option.size() == kernel_folder.size() + 2 &&
      option.rfind("-I", 0) == 0 && option.compare(2, std::string::npos, kernel_folder) == 0)
    return "-I<kernel folder>";
  return option;
}

std::string CubinCache::key(const Variant& v, const std::string& arch) {
  std::string k =
      "nvrtc " + nvrtc_version() + "\narch " + arch + "\nkernel " + v.kernel_name + "\n";
  for (auto& o : nvrtc_options(v, arch)) k += "opt " + option_for_key(o, v.kernel_folder) + "\n";
  if (const std::string headers = own_headers_digest(v.source, v.options); !headers.empty())
    k += "headers " + headers + "\n";
  return sha256_hex(k + "source\n" + v.source);
}

std::optional<CompiledVariant> CubinCache::get(const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  auto base = dir_ / key.substr(0, 2) / key;
  std::ifstream cub(base.string() + ".cubin", std::ios::binary), meta(base.string() + ".json");
  if (!cub || !meta) return std::nullopt;
  try {
    std::stringstream ss;
    ss << cub.rdbuf();
    auto m = nlohmann::json::parse(meta);
    CompiledVariant c;
    c.cubin = ss.str();
    if (sha256_hex(c.cubin) != m.at("cubin_hash").get<std::string>())
      return std::nullopt;  // torn/corrupt
    c.ok = true;
    c.cached = true;
    c.key = key;
    c.cubin_hash = m.at("cubin_hash").get<std::string>();
    c.lowered_name = m.at("lowered_name").get<std::string>();
    c.log = m.at("log").get<std::string>();
    mark_used(base.string() + ".cubin");  // its last use, for trim_cache
    return c;
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable entry: recompile
  }
}

void CubinCache::put(const CompiledVariant& c) const {
  if (dir_.empty() || !c.ok) return;
  // Caching is an optimisation: a read-only cache folder must not fail a run.
  const auto base = dir_ / c.key.substr(0, 2) / c.key;
  nlohmann::json m = {
      {"cubin_hash", c.cubin_hash}, {"lowered_name", c.lowered_name}, {"log", c.log}};
  write_atomically(base.string() + ".cubin", c.cubin);
  write_atomically(base.string() + ".json", m.dump());
}

bool write_atomically(const std::filesystem::path& path, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return false;
  const auto tid = std::hash<std::thread::id>{}(std::this_thread::get_id());
  auto tmp = path;
  tmp += ".tmp" + std::to_string(getpid()) + "-" + std::to_string(tid);
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (!ec) {
    count_cache_write(bytes.size());  // trim_cache_after_use looks only when something was
    return true;
  }
  std::filesystem::remove(tmp, ec);
  return false;
}

int compile_threads_for(unsigned cores, long long available_bytes) {
  long long n = std::clamp<long long>(cores, 1, 64);
  if (available_bytes >= 0) n = std::min(n, std::max(1LL, available_bytes / kCompileWorkerBytes));
  return static_cast<int>(n);
}

namespace {
long long mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}
}  // namespace

namespace {
std::atomic<int> g_compile_nice{10};
}  // namespace

void set_compile_nice(int steps) {
  if (steps < 0 || steps > 19)
    throw std::invalid_argument("--compile-nice " + std::to_string(steps) +
                                ": give nice steps from 0 (compile at normal priority) to 19");
  g_compile_nice = steps;
}

int compile_nice() { return g_compile_nice; }

void lower_compile_thread_priority() {
  const int steps = g_compile_nice;
  if (steps == 0) return;
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (!(now == -1 && errno != 0) && setpriority(PRIO_PROCESS, tid, std::min(19, now + steps)) == 0)
    return;
  static std::once_flag said;
  const int err = errno;
  std::call_once(said, [err] {
    std::fprintf(stderr,
                 "gputune: compile threads keep the normal priority (setpriority: %s); they "
                 "compete with measuring for the cores\n",
                 std::strerror(err));
  });
}

int default_compile_threads() {
  return compile_threads_for(std::thread::hardware_concurrency(), mem_available_bytes());
}

std::vector<CompiledVariant> compile_all(
    const std::vector<Variant>& variants, const std::string& arch, const CubinCache& cache,
    int threads, const std::function<void(size_t, CompiledVariant&)>& on_done,
    const std::function<bool()>& should_stop) {
  return compile_all(
      variants.size(), [&](size_t i) { return variants[i]; }, arch, cache, threads, on_done,
      should_stop);
}

std::vector<CompiledVariant> compile_all(
    size_t count, const std::function<Variant(size_t)>& make, const std::string& arch,
    const CubinCache& cache, int threads,
    const std::function<void(size_t, CompiledVariant&)>& on_done,
    const std::function<bool()>& should_stop) {
  std::vector<CompiledVariant> out(count);
  std::atomic<size_t> next{0};
  if (threads <= 0) threads = default_compile_threads();
  threads =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(count, 1)));
  std::mutex err_mu;
  std::exception_ptr first_error;
  std::atomic<bool> failed{false};  // a throwing make(i) ends the compile: no worker starts another
  auto worker = [&] {
    for (size_t i; !failed && (i = next.fetch_add(1)) < count;) {
      if (should_stop && should_stop()) {
        out[i].log = "not compiled: the run was interrupted";
        continue;
      }
      try {
        const Variant v = make(i);
        std::string key = CubinCache::key(v, arch);
        auto hit = cache.get(key);
        CompiledVariant c = hit ? std::move(*hit) : compile_variant(v, arch);
        c.key = key;
        if (!hit) cache.put(c);
        out[i] = std::move(c);
        if (on_done) on_done(i, out[i]);
      } catch (...) {
        failed = true;
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first_error) first_error = std::current_exception();
      }
    }
  };
  // Every worker on a thread of its own, at compile priority; the caller keeps its own.
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      lower_compile_thread_priority();
      worker();
    });
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return out;
}

}  // namespace gputune::tuner
