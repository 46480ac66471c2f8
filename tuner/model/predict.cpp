#include "tuner/model/predict.h"

#include <elf.h>
#include <link.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "cuda/cache_admin.h"
#include "cuda/driver.h"
#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "tuner/common/progress.h"
#include "tuner/measure/arguments.h"
#include "tuner/measure/device_info.h"
#include "variants/hash.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

Rates rates_for_spec(const pruner::DeviceSpec& spec) {
  Rates r;
  r.rates = pruner::rates_for(spec);
  r.source = "configs/devices/" + spec.key + ".json";
  return r;
}

Rates rates_for_driver(const DeviceInfo& info) {
  try {
    pruner::DeviceSpec spec = pruner::find_device(info.name);
    if (spec.limits.sm_count == info.limits.sm_count) {
      Rates r = rates_for_spec(spec);
      r.source += " (matched by the driver's device name)";
      return r;
    }
  } catch (const pruner::DeviceError&) {
  }
  Rates r;
  if (info.clock_khz > 0 && info.mem_clock_khz > 0 && info.mem_bus_bits > 0) {
    r.rates = pruner::rates_from_driver(info.limits, info.clock_khz, info.mem_clock_khz,
                                        info.mem_bus_bits);
    r.source = "the driver's clock, memory clock and bus width";
  } else {
    r.source =
        "no rates: the driver reports no clocks and no device file matches '" + info.name + "'";
  }
  return r;
}

namespace {

// The GNU build ID of the main program (a hash the linker computes over its code), hex; empty
// when it has none.
std::string program_build_id() {
  static const std::string id = [] {
    std::string hex;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
          auto& h = *static_cast<std::string*>(out);
          for (int p = 0; p < info->dlpi_phnum && h.empty(); ++p) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[p];
            if (ph.p_type != PT_NOTE) continue;
            const char* at = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = at + ph.p_memsz;
            while (at + sizeof(ElfW(Nhdr)) <= end) {
              const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(at);
              const char* name = at + sizeof(ElfW(Nhdr));
              const char* desc = name + ((n->n_namesz + 3) & ~3u);
              if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                  std::string_view(name, 3) == "GNU" && desc + n->n_descsz <= end) {
                static const char* digits = "0123456789abcdef";
                for (unsigned i = 0; i < n->n_descsz; ++i) {
                  const auto b = static_cast<unsigned char>(desc[i]);
                  h += digits[b >> 4];
                  h += digits[b & 15];
                }
                break;
              }
              at = desc + ((n->n_descsz + 3) & ~3u);
            }
          }
          return 1;  // the first object is the main program
        },
        &hex);
    return hex;
  }();
  return id;
}

}  // namespace

std::string TrafficCache::key(const pruner::TrafficInput& in) {
  const std::string build = program_build_id();
  if (build.empty()) return "";
  std::ostringstream k;
  k.precision(17);
  k << "traffic analysis\nbuild " << build << "\nkernel " << in.kernel_name << "\n";
  for (const auto& o : in.options) k << "opt " << cuda::option_for_key(o, in.kernel_folder) << "\n";
  k << "grid " << in.grid[0] << " " << in.grid[1] << " " << in.grid[2] << "\nblock " << in.block[0]
    << " " << in.block[1] << " " << in.block[2] << "\nwarps " << in.max_warps_per_block << "\n";
  for (const auto& [name, v] : in.scalars) k << "scalar " << name << " " << v << "\n";
  for (const auto& [name, b] : in.array_bytes) k << "array " << name << " " << b << "\n";
  for (const auto& name : in.argument_order) k << "argument " << name << "\n";
  for (const auto& [name, d] : in.array_data) k << "contents " << name << " " << d.digest << "\n";
  if (const std::string headers = cuda::own_headers_digest(in.source, in.options); !headers.empty())
    k << "headers " << headers << "\n";
  return sha256_hex(k.str() + "source\n" + in.source);
}

std::optional<pruner::TrafficReport> TrafficCache::get(const std::string& key) const {
  if (dir.empty() || key.empty()) return std::nullopt;
  const std::filesystem::path file = dir / "traffic" / key.substr(0, 2) / (key + ".json");
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto report = pruner::traffic_from_json(text.str());  // nothing for a torn or foreign entry
  if (report) cuda::mark_used(file);                    // its last use, for trim_cache
  return report;
}

void TrafficCache::put(const std::string& key, const pruner::TrafficReport& r) const {
  if (dir.empty() || key.empty()) return;
  cuda::write_atomically(dir / "traffic" / key.substr(0, 2) / (key + ".json"),
                         pruner::traffic_to_json(r));
}

ModelArguments model_arguments(const std::vector<HostArgument>& args) {
  ModelArguments m;
  for (const HostArgument& a : args) {
    m.order.push_back(a.name);
    if (model_reads_contents(a) && !a.data.empty())
      m.contents[a.name] = {std::make_shared<const std::vector<unsigned char>>(a.data),
                            sha256_hex(std::string_view(
                                reinterpret_cast<const char*>(a.data.data()), a.data.size()))};
    if (a.is_vector)
      m.array_bytes[a.name] = static_cast<std::int64_t>(a.elements) * a.type.bytes();
    else if (!a.data.empty())
      m.scalars[a.name] = read_scalar(a.type, a.data.data(), 0);
  }
  return m;
}

ModelRun run_model(const Job& job, const std::string& source, const std::vector<Config>& configs,
                   const ContextSpec& ctx, const ModelArguments& args,
                   const std::vector<bool>& usable, const std::vector<pruner::Occupancy>& occupancy,
                   const Rates& rates, const pruner::Calibration& calibration, int threads,
                   bool progress, const TrafficCache& cache,
                   const std::function<bool()>& should_stop) {
  ModelRun m;
  std::atomic<bool> stopped{false};
  std::atomic<size_t> cached{0};
  size_t n = configs.size();
  m.traffic.resize(n);
  m.features.resize(n);
  m.predictions.resize(n);
  std::vector<std::int64_t> threads_per_block(n, 0);
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  Progress prog("model " + ctx.name, n, progress);
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      if (stopped || (should_stop && should_stop())) {
        stopped = true;
        break;
      }
      pruner::TrafficReport t;
      if (usable[i]) {
        pruner::TrafficInput in;
        in.source = variant_source(job, source, configs[i]);
        in.kernel_name = job.kernel_name;
        in.options = compile_options(job, configs[i]);
        in.kernel_folder = kernel_folder(job);
        in.scalars = args.scalars;
        in.array_bytes = args.array_bytes;
        in.argument_order = args.order;
        in.array_data = args.contents;
        try {
          LaunchGeometry g = launch_geometry(job, configs[i], ctx);
          in.grid = g.grid, in.block = g.block;
          threads_per_block[i] = g.threads_per_block();
          const std::string key = TrafficCache::key(in);
          if (auto hit = cache.get(key)) {
            t = std::move(*hit);
            ++cached;
          } else {
            t = pruner::analyse_traffic(in);
            cache.put(key, t);
          }
        } catch (const JobError& e) {
          t.error = "no launch geometry: " + e.problem;
        }
      } else {
        t.error = "not compiled";
      }
      m.traffic[i] = std::move(t);
      std::lock_guard<std::mutex> lock(mu);
      prog.update(++done, 0, std::nullopt);
    }
  };
  // A clang AST per worker: the compile pool's rule (one per core as far as memory holds).
  int nt = threads > 0 ? threads : cuda::default_compile_threads();
  std::vector<std::thread> pool;
  for (int k = 0; k < nt; ++k)
    pool.emplace_back([&] {
      cuda::lower_compile_thread_priority();
      worker();
    });
  for (auto& t : pool) t.join();
  prog.finish();
  m.analyses_cached = cached;
  m.interrupted = stopped;
  for (size_t i = 0; i < n; ++i) {
    m.features[i] = pruner::features_from(m.traffic[i], occupancy[i], threads_per_block[i]);
    if (usable[i] && !m.features[i].ok && m.first_error.empty() && !m.traffic[i].error.empty())
      m.first_error = m.traffic[i].error;
    if (usable[i] && (!m.traffic[i].parsed || !m.traffic[i].error.empty())) ++m.not_analysed;
  }
  repredict(m, rates, calibration);
  return m;
}

void repredict(ModelRun& m, const Rates& rates, const pruner::Calibration& calibration) {
  m.predicted = 0;
  for (size_t i = 0; i < m.features.size(); ++i) {
    m.predictions[i] = rates.rates ? pruner::predict(m.features[i], *rates.rates, calibration)
                                   : pruner::Prediction{};
    if (m.predictions[i].ok) ++m.predicted;
  }
}

}  // namespace gputune::tuner
