/** \file select/kernel.h
 * gputune::select::Kernel: the chosen variant of a kernel, compiled and launched.
 *
 *   auto table = gputune::select::Table::open("matmul.db");
 *   auto kernel = gputune::select::Kernel::load(*table, "matmul", {{2048}});
 *   if (!kernel) { std::cerr << kernel.error().message << "\n"; return 1; }
 *   auto c = gputune::select::Buffer::allocate(2048 * 2048 * sizeof(float));  // a, b likewise
 *   auto done = kernel->launch(*c, *a, *b, 2048);   // the job's argument order and types
 *
 * Owns: for (table, kernel, input): asking the GPU what it is, Table::choose for it, building the
 * chosen Variant from the table's job and source, compiling it with NVRTC through the tuner's
 * on-disk cubin cache (its default folder, so a cubin the tuner compiled is a hit), once per
 * process per configuration, loading it once per process per device, and launching it with the
 * grid, block and dynamic shared memory the job's rules give for the input; device buffers for
 * the arguments. Every CUDA handle is owned by an RAII object; the driver is loaded at run time
 * (libcuda is never linked), and without one every call answers Error{kNoDriver} (choosing still
 * works: select.h). Errors are values: nothing here throws unless the caller asks
 * (value_or_throw).
 * Consumes: a Table (select.h). Produces: launches.
 * Must not: choose otherwise than Table::choose, write to a database, or generate a naive
 * kernel's source (that needs the clang analysis: `gputune generate` writes it). */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "select/select.h"

namespace gputune::select {

/// Success or an Error.
using Status = Result<std::monostate>;

/// The GPU with the driver's index `index` as Table::choose wants it ("NVIDIA H100 80GB HBM3",
/// "sm_90"); kNoDriver without a driver or such a device.
Result<Device> gpu_device(int index = 0) noexcept;

/// Device memory on one GPU, freed with the object. Move-only (a moved-from Buffer is empty).
class Buffer {
 public:
  static Result<Buffer> allocate(std::size_t bytes, int device = 0) noexcept;
  /// A buffer holding `host`'s elements.
  template <class T>
  static Result<Buffer> from(const std::vector<T>& host, int device = 0) noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    Result<Buffer> b = allocate(host.size() * sizeof(T), device);
    if (b) {
      Status up = b.value().upload(host.data(), host.size() * sizeof(T));
      if (!up) return up.error();
    }
    return b;
  }
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  ~Buffer();

  Status upload(const void* src, std::size_t bytes) noexcept;
  /// Copies to the host once the work launched before it on the default stream is done.
  Status download(void* dst, std::size_t bytes) const noexcept;
  template <class T>
  Status download(std::vector<T>& dst) const noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    return download(dst.data(), dst.size() * sizeof(T));
  }
  /// The device address (a CUdeviceptr), as a kernel's pointer argument takes it.
  std::uint64_t address() const { return address_; }
  std::size_t size() const { return bytes_; }

 private:
  struct Impl;
  Buffer() = default;
  std::unique_ptr<Impl> impl_;
  std::uint64_t address_ = 0;
  std::size_t bytes_ = 0;
  friend class Kernel;
};

struct KernelOptions {
  int device = 0;  ///< the driver's device index
  /// Choose and compile for this device instead of asking the driver (a machine without a GPU
  /// can then compile ahead, filling the cubin cache; load still answers kNoDriver there).
  std::optional<Device> as_device;
  /// The kernel's source file; "": the table's (a decision file exported without sources, or a
  /// database, may have none). Its folder is searched for the headers it includes: a kernel
  /// that includes headers of its own needs it (the table holds the kernel's file alone).
  std::string source_file;
  /// The cubin cache's folder; "": the tuner's ($GPUTUNE_CACHE_DIR, else ~/.cache/gputune).
  std::string cache_dir;
};

/// A kernel's chosen variant, loaded on a GPU. Cheap to copy (shared); safe to launch from many
/// threads.
class Kernel {
 public:
  /// Chooses for `input` on the GPU (Table::choose), compiles (or finds in the cubin cache) and
  /// loads the choice. kUnknownKernel, kUnknownDevice, kBadInput as choose; kBadFile when the
  /// table has no source and none is given; kCompile with NVRTC's log; kNoDriver without a
  /// driver or device; kLaunch when the driver refuses the module.
  static Result<Kernel> load(const Table& table, std::string_view kernel, const Input& input,
                             const KernelOptions& options = {}) noexcept;

  const Choice& choice() const;
  /// NVRTC's log of the compile ("" when the cubin came from a cache).
  const std::string& compile_log() const;
  /// Whether the cubin came from the on-disk cache or this process's memory (no NVRTC run).
  bool cached() const;

  /// Launches on the default stream with the choice's grid, block and dynamic shared memory.
  /// Arguments in the job's order: a Buffer (or a device address) for each vector, a value of
  /// the job's type for each scalar (matmul: C, A, B, an int). Returns when it is queued; kLaunch
  /// when the driver refuses it, or the arguments' count or sizes do not fit the job's.
  template <class... Args>
  Status launch(const Args&... args) const noexcept {
    return launch_on(nullptr, args...);
  }
  /// The same on `stream` (a CUstream).
  template <class... Args>
  Status launch_on(void* stream, const Args&... args) const noexcept {
    void* params[] = {address_of(args)..., nullptr};
    const std::size_t sizes[] = {size_of<Args>()..., 0};
    return launch_raw(stream, params, sizes, sizeof...(Args));
  }
  /// Launches with the driver's kernelParams (`count` pointers, each to an argument of
  /// `sizes[i]` bytes).
  Status launch_raw(void* stream, void** params, const std::size_t* sizes,
                    std::size_t count) const noexcept;
  /// Waits for everything launched on the kernel's device; kLaunch with the error a kernel hit.
  Status synchronize() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;

  template <class T>
  static void* address_of(const T& a) {
    if constexpr (std::is_same_v<T, Buffer>)
      return const_cast<std::uint64_t*>(&a.address_);
    else {
      static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are plain values");
      return const_cast<T*>(&a);
    }
  }
  template <class T>
  static constexpr std::size_t size_of() {
    return std::is_same_v<T, Buffer> ? sizeof(std::uint64_t) : sizeof(T);
  }
};

}  // namespace gputune::select
