/** \file pruner/device_spec.h
 * Owns: descriptions of GPUs that need not be present (one JSON file each in configs/devices: SMs,
 * clocks, memory bandwidth, peak FP32 rate, L2, with a source for each figure), their validation,
 * and lookup by file key, name or alias (`--device NAME`), so a user can prune and rank for a GPU
 * they do not have. Per-SM limits come from the compute capability (occupancy.h). Must not: include
 * cuda.h or touch the database. */
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "pruner/occupancy.h"

namespace gputune::pruner {

struct DeviceSpec {
  std::string key;  ///< file stem, e.g. "h100-sxm"
  std::string name;
  std::vector<std::string> aliases;
  DeviceLimits limits;  ///< per compute capability, with sm_count filled in
  double boost_clock_mhz = 0;
  double memory_gib = 0;
  double memory_bandwidth_gbs = 0;
  double peak_fp32_tflops = 0;
  double l2_cache_mib = 0;
  std::map<std::string, std::string> sources;  ///< figure -> where it comes from
};

/// An error in a device file or a lookup; what() names the file and field, or lists the known
/// names.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads and checks one device file: every figure present, positive, with a source, and the peak
/// FP32 rate consistent (within 10%) with SMs x FP32 lanes per SM x 2 x boost clock.
DeviceSpec load_device_file(const std::filesystem::path& file);

/// The shipped device folder: $GPUTUNE_DEVICES_DIR, else PREFIX/share/gputune/devices beside an
/// installed binary (PREFIX/bin), else the source tree's configs/devices.
std::filesystem::path default_devices_dir();

/// All devices of a folder, sorted by key. Throws DeviceError for the first bad file.
std::vector<DeviceSpec> load_devices(const std::filesystem::path& dir = default_devices_dir());

/// Finds a device by key, name or alias (case-insensitive). Throws DeviceError listing the known
/// ones.
DeviceSpec find_device(const std::string& name,
                       const std::filesystem::path& dir = default_devices_dir());

/// FP32 lanes per SM for a compute capability (64 on 7.x and 8.0, 128 on 8.6, 8.9, 9.0, ...).
int fp32_lanes_per_sm(int cc_major, int cc_minor);

/// Conversions (I2F, F2I, F2F) per clock per SM: 16 from 7.0 on, 32 before (the CUDA C++
/// Programming Guide's arithmetic throughput table, "all other type conversions").
int conversion_lanes_per_sm(int cc_major, int cc_minor);

}  // namespace gputune::pruner
