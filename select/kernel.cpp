/** \file select/kernel.cpp
 * Owns: Kernel::load (device, choice, Variant, compile through the cubin cache, module), the
 * process-wide registry that makes each compile and module load happen once (primary contexts
 * per device, cubins by cache key, modules by cache key and device), launches, and Buffer. Every
 * driver or NVRTC failure becomes an Error value here; tuner/'s CUDA layer (gputune_cuda) does
 * the work.
 * Must not: use the pruner (it would bring libclang into gputune::select), or throw out of a
 * noexcept entry point. */
#include "select/kernel.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "variants/instantiate.h"
#include "variants/job.h"

namespace gputune::select {

namespace {

using cuda::CudaError;
using cuda::Driver;
using nlohmann::json;

Error no_driver_error() {
  return Error{Error::Code::kNoDriver,
               "no CUDA driver or device: " + Driver::instance().unavailable_reason() +
                   ". Table::choose still answers; compiling ahead needs "
                   "KernelOptions.as_device; launching needs a GPU."};
}

/// The error of a device index the driver does not have; nothing when it has it.
std::optional<Error> device_error(int index) {
  const Driver& d = Driver::instance();
  if (!d.available()) return no_driver_error();
  if (index < 0 || index >= d.device_count())
    return Error{Error::Code::kNoDriver, "no CUDA device " + std::to_string(index) +
                                             ": this machine has " + cuda::describe_devices() +
                                             ". Fix: KernelOptions.device / the device argument."};
  return std::nullopt;
}

Error cuda_error(const CudaError& e, const std::string& what) {
  const bool gone = e.code == CUDA_ERROR_NOT_INITIALIZED || e.code == CUDA_ERROR_NO_DEVICE ||
                    e.code == CUDA_ERROR_DEINITIALIZED;
  return Error{gone ? Error::Code::kNoDriver : Error::Code::kLaunch, what + ": " + e.what()};
}

/// A module on one device: loaded once per process.
struct Loaded {
  cuda::PrimaryContext* context = nullptr;  // the registry's
  cuda::Module module;
  int static_smem = 0;
  std::int64_t opted_in = 0;  ///< dynamic shared memory the function is allowed (beyond 48 KiB)
  Loaded(cuda::PrimaryContext* c, const std::string& cubin, const std::string& name)
      : context(c), module(cubin, name) {}
};

/// Process-wide: each device's primary context, each configuration's cubin, each module.
struct Registry {
  std::mutex mutex;
  std::map<int, std::unique_ptr<cuda::PrimaryContext>> contexts;
  std::map<std::string, std::shared_ptr<const cuda::CompiledVariant>> cubins;
  std::map<std::pair<std::string, int>, std::shared_ptr<Loaded>> modules;

  /// The device's primary context, retained for the process and current on this thread. Call
  /// with `mutex` held. Throws CudaError.
  cuda::PrimaryContext& context(int device) {
    auto& c = contexts[device];
    if (!c)
      c = std::make_unique<cuda::PrimaryContext>(device);
    else
      c->make_current();
    return *c;
  }
};

/// Never destroyed: the driver releases the process's contexts and modules at exit, when a static
/// destructor could no longer call it safely.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

/// Bytes of a scalar argument of T1 type `type`; 0 when not known here (not checked).
std::size_t scalar_bytes(const std::string& type) {
  static const std::map<std::string, std::size_t> sizes = {
      {"int8", 1},    {"uint8", 1},   {"char", 1},   {"bool", 1},   {"int16", 2},   {"uint16", 2},
      {"half", 2},    {"float16", 2}, {"int32", 4},  {"uint32", 4}, {"int", 4},     {"float", 4},
      {"float32", 4}, {"int64", 8},   {"uint64", 8}, {"double", 8}, {"float64", 8}, {"long", 8}};
  auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Result<Device> gpu_device(int index) noexcept {
  try {
    if (auto e = device_error(index)) return *e;
    const Driver& d = Driver::instance();
    CUdevice dev = 0;
    d.check(d.cuDeviceGet(&dev, index), "cuDeviceGet");
    char name[256] = {};
    d.check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    int major = 0, minor = 0;
    d.check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
            "cuDeviceGetAttribute");
    d.check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
            "cuDeviceGetAttribute");
    return Device{name, "sm_" + std::to_string(major) + std::to_string(minor)};
  } catch (const CudaError& e) {
    return cuda_error(e, "asking the driver about device " + std::to_string(index));
  } catch (const std::exception& e) {
    return Error{Error::Code::kNoDriver, e.what()};
  }
}

// --- Buffer -------------------------------------------------------------------------------------

struct Buffer::Impl {
  cuda::PrimaryContext* context = nullptr;
  cuda::DeviceBuffer memory;
  ~Impl() {
    try {
      if (context) context->make_current();  // cuMemFree frees in the current context
    } catch (const std::exception&) {
    }
  }
};

Buffer::Buffer(Buffer&& o) noexcept
    : impl_(std::move(o.impl_)),
      address_(std::exchange(o.address_, 0)),
      bytes_(std::exchange(o.bytes_, 0)) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    impl_ = std::move(o.impl_);
    address_ = std::exchange(o.address_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
Buffer::~Buffer() = default;

Result<Buffer> Buffer::allocate(std::size_t bytes, int device) noexcept {
  try {
    if (auto e = device_error(device)) return *e;
    Buffer b;
    b.impl_ = std::make_unique<Impl>();
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      b.impl_->context = &r.context(device);
    }
    b.impl_->memory = cuda::DeviceBuffer(bytes);
    b.address_ = b.impl_->memory.get();
    b.bytes_ = bytes;
    return b;
  } catch (const CudaError& e) {
    return cuda_error(
        e, "allocating " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
  } catch (const std::exception& e) {
    return Error{Error::Code::kLaunch, e.what()};
  }
}

Status Buffer::upload(const void* src, std::size_t bytes) noexcept {
  try {
    if (!impl_) return Error{Error::Code::kLaunch, "upload to a moved-from Buffer"};
    if (bytes > bytes_)
      return Error{Error::Code::kLaunch, "upload of " + std::to_string(bytes) +
                                             " bytes to a buffer of " + std::to_string(bytes_)};
    impl_->context->make_current();
    impl_->memory.upload(src, bytes);
    return std::monostate{};
  } catch (const CudaError& e) {
    return cuda_error(e, "uploading to the device");
  }
}

Status Buffer::download(void* dst, std::size_t bytes) const noexcept {
  try {
    if (!impl_) return Error{Error::Code::kLaunch, "download from a moved-from Buffer"};
    if (bytes > bytes_)
      return Error{Error::Code::kLaunch, "download of " + std::to_string(bytes) +
                                             " bytes from a buffer of " + std::to_string(bytes_)};
    impl_->context->make_current();
    impl_->memory.download(dst, bytes);
    return std::monostate{};
  } catch (const CudaError& e) {
    return cuda_error(e, "downloading from the device");
  }
}

// --- Kernel -------------------------------------------------------------------------------------

struct Kernel::Impl {
  Choice choice;
  std::shared_ptr<const cuda::CompiledVariant> compiled;
  std::shared_ptr<Loaded> loaded;
  bool cached = false;
  std::vector<std::string> arg_names;
  std::vector<std::size_t> arg_bytes;  ///< expected size per argument (0: not checked)
};

const Choice& Kernel::choice() const { return impl_->choice; }
const std::string& Kernel::compile_log() const {
  static const std::string none;
  return impl_->cached ? none : impl_->compiled->log;
}
bool Kernel::cached() const { return impl_->cached; }

namespace {

/// The device a kernel is loaded for: KernelOptions.as_device (compile only), else the GPU.
Result<Device> target_device(const KernelOptions& options) {
  Device device;
  if (options.as_device) {
    device = *options.as_device;
    if (device.arch.empty())
      return Error{Error::Code::kBadInput,
                   "KernelOptions.as_device names no architecture: the variant is compiled for "
                   "one. Fix: set its arch (\"sm_90\")."};
  } else {
    Result<Device> d = gpu_device(options.device);
    if (!d) return d.error();
    device = d.value();
  }
  return device;
}

/// The kernel's source: KernelOptions.source_file (the job then names it), else the table's.
Result<std::string> kernel_source(const Table& table, const KernelTable& kt,
                                  const KernelOptions& options, const std::string& name, Job& job) {
  std::string source = kt.source;
  if (!options.source_file.empty()) {
    auto text = read_file(options.source_file);
    if (!text)
      return Error{Error::Code::kBadFile,
                   options.source_file + ": cannot be read (KernelOptions.source_file)."};
    source = std::move(*text);
    job.kernel_file = std::filesystem::absolute(options.source_file);
  }
  if (source.empty())
    return Error{Error::Code::kBadFile,
                 table.data().origin + " has no source of kernel '" + name +
                     "'. Fix: give the kernel's source file (KernelOptions.source_file), or "
                     "export the decisions with sources (`gputune export --decisions`)."};
  return source;
}

/// The chosen configuration's variant: its parameters (in the job's order where it names them
/// all) as the job's compile options over the source, launched with the choice's geometry.
Variant chosen_variant(const Job& job, const KernelTable& kt, const Choice& choice,
                       const std::string& source) {
  const nlohmann::ordered_json& values = kt.configs.at(choice.config);
  std::vector<std::string> names;
  for (const Parameter& p : job.parameters)
    if (values.contains(p.name)) names.push_back(p.name);
  if (names.size() != values.size()) names = kt.parameters;  // the job's order where it fits
  Config config;
  config.names = std::make_shared<const std::vector<std::string>>(names);
  for (const std::string& n : names)
    config.values.push_back(json_to_value(json::parse(values.at(n).dump())));
  Variant v = variant_to_compile(job, source, config);
  v.geometry.grid = choice.grid, v.geometry.block = choice.block;
  v.geometry.dynamic_smem = choice.dynamic_smem;
  return v;
}

}  // namespace

Result<Kernel> Kernel::load(const Table& table, std::string_view kernel, const Input& input,
                            const KernelOptions& options) noexcept {
  const std::string name(kernel);
  try {
    // 1. The device, and the choice for it.
    Result<Device> target = target_device(options);
    if (!target) return target.error();
    const Device& device = target.value();
    Result<Choice> choice = table.choose(kernel, device, input);
    if (!choice) return choice.error();
    const KernelTable* kt = table.kernel(kernel);
    if (!kt) return Error{Error::Code::kUnknownKernel, "no kernel '" + name + "' in the table"};

    // 2. The variant: the job's compile options and the chosen parameters over the source.
    Job job;
    try {
      job = parse_job(json::parse(kt->job_document),
                      table.data().origin + " (the job of kernel " + name + ")");
    } catch (const std::exception& e) {
      return Error{Error::Code::kBadFile,
                   "the job of kernel '" + name + "' cannot be read: " + e.what()};
    }
    if (job.naive)
      return Error{Error::Code::kCompile,
                   "kernel '" + name +
                       "' is a naive kernel (GPUTune.Naive): each variant's source is generated "
                       "by gputune's clang analysis, which gputune::select does not carry. Fix: "
                       "`gputune generate` writes the chosen variant's source; compile that into "
                       "the application and launch it with the Choice's grid and block."};
    Result<std::string> source = kernel_source(table, *kt, options, name, job);
    if (!source) return source.error();
    const Variant v = chosen_variant(job, *kt, *choice, source.value());

    auto impl = std::make_shared<Impl>();
    impl->choice = choice.value();
    for (const Argument& a : job.arguments) {
      impl->arg_names.push_back(a.name);
      impl->arg_bytes.push_back(a.memory_type == "Vector" ? sizeof(std::uint64_t)
                                                          : scalar_bytes(a.type));
    }

    // 3. The cubin: this process's, else the on-disk cache's (the tuner's), else NVRTC's.
    Registry& r = registry();
    const std::string key = cuda::CubinCache::key(v, device.arch);
    {
      std::lock_guard lock(r.mutex);
      auto it = r.cubins.find(key);
      if (it != r.cubins.end()) {
        impl->compiled = it->second, impl->cached = true;
      } else {
        const cuda::CubinCache cache(options.cache_dir.empty()
                                         ? cuda::CubinCache::default_dir()
                                         : std::filesystem::path(options.cache_dir));
        cuda::CompiledVariant c = cuda::compile_cached(v, device.arch, cache);
        if (!c.ok)
          return Error{Error::Code::kCompile, "NVRTC refused kernel '" + name + "' (" +
                                                  choice->config + ", " + device.arch + "):\n" +
                                                  c.log};
        impl->cached = c.cached;
        impl->compiled = r.cubins[key] =
            std::make_shared<const cuda::CompiledVariant>(std::move(c));
      }
    }

    // 4. The module on the device.
    if (auto e = device_error(options.device)) return *e;
    {
      std::lock_guard lock(r.mutex);
      auto& loaded = r.modules[{key, options.device}];
      if (!loaded) {
        cuda::PrimaryContext& ctx = r.context(options.device);
        auto l =
            std::make_shared<Loaded>(&ctx, impl->compiled->cubin, impl->compiled->lowered_name);
        l->static_smem = l->module.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
        loaded = std::move(l);
      }
      // More than 48 KiB of shared memory in all needs the function's opt-in.
      if (loaded->static_smem + choice->dynamic_smem > 48 * 1024 &&
          choice->dynamic_smem > loaded->opted_in) {
        const Driver& d = Driver::instance();
        loaded->context->make_current();
        d.check(d.cuFuncSetAttribute(loaded->module.function(),
                                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     static_cast<int>(choice->dynamic_smem)),
                "cuFuncSetAttribute", name);
        loaded->opted_in = choice->dynamic_smem;
      }
      impl->loaded = loaded;
    }
    Kernel k;
    k.impl_ = std::move(impl);
    return k;
  } catch (const CudaError& e) {
    return cuda_error(e, "loading kernel '" + name + "'");
  } catch (const std::exception& e) {
    return Error{Error::Code::kCompile, "preparing kernel '" + name + "': " + e.what()};
  }
}

Status Kernel::launch_raw(void* stream, void** params, const std::size_t* sizes,
                          std::size_t count) const noexcept {
  try {
    if (!impl_) return Error{Error::Code::kLaunch, "launch of a Kernel that was never loaded"};
    const Impl& k = *impl_;
    const std::string& name = k.choice.kernel;
    if (count != k.arg_names.size()) {
      std::string list;
      for (const auto& n : k.arg_names) list += (list.empty() ? "" : ", ") + n;
      return Error{Error::Code::kLaunch, "kernel '" + name + "' takes " +
                                             std::to_string(k.arg_names.size()) + " argument(s) (" +
                                             list + "); " + std::to_string(count) + " given."};
    }
    for (std::size_t i = 0; i < count; ++i)
      if (k.arg_bytes[i] && sizes && sizes[i] != k.arg_bytes[i])
        return Error{Error::Code::kLaunch,
                     "argument " + std::to_string(i) + " (" + k.arg_names[i] + ") of kernel '" +
                         name + "' is " + std::to_string(k.arg_bytes[i]) + " bytes in the job; " +
                         std::to_string(sizes[i]) +
                         " given. Fix: a Buffer or device address for a vector, the job's type "
                         "for a scalar (int32: int)."};
    const Driver& d = Driver::instance();
    k.loaded->context->make_current();
    const auto& g = k.choice.grid;
    const auto& b = k.choice.block;
    d.check(
        d.cuLaunchKernel(k.loaded->module.function(), static_cast<unsigned>(g[0]),
                         static_cast<unsigned>(g[1]), static_cast<unsigned>(g[2]),
                         static_cast<unsigned>(b[0]), static_cast<unsigned>(b[1]),
                         static_cast<unsigned>(b[2]), static_cast<unsigned>(k.choice.dynamic_smem),
                         static_cast<CUstream>(stream), params, nullptr),
        "cuLaunchKernel", k.choice.config);
    return std::monostate{};
  } catch (const CudaError& e) {
    return cuda_error(e, "launching kernel '" + impl_->choice.kernel + "'");
  } catch (const std::exception& e) {
    return Error{Error::Code::kLaunch, e.what()};
  }
}

Status Kernel::synchronize() const noexcept {
  try {
    if (!impl_) return Error{Error::Code::kLaunch, "synchronize of a Kernel never loaded"};
    const Driver& d = Driver::instance();
    impl_->loaded->context->make_current();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", impl_->choice.kernel);
    return std::monostate{};
  } catch (const CudaError& e) {
    return cuda_error(e, "waiting for kernel '" + impl_->choice.kernel + "'");
  }
}

}  // namespace gputune::select
