// The content-addressed cubin cache (cuda/cubin_cache.h).
#include "cuda/cubin_cache.h"

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

#include "cuda/cache_admin.h"
#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "variants/hash.h"

namespace gputune::cuda {

std::filesystem::path CubinCache::default_dir() {
  if (const char* d = std::getenv("GPUTUNE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "gputune";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "gputune";
  return ".gputune-cache";
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

}  // namespace gputune::cuda
