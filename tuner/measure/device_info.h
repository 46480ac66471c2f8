/** \file tuner/measure/device_info.h
 * Owns: a device as the tuner and the model see it: the driver's attributes (cuda/device.h)
 * over the pruner's per-architecture tables, which hold the granularities the driver does not
 * report (register and shared-memory allocation units, sub-partitions, barriers).
 * Consumes: cuda::DeviceAttributes. Produces: DeviceInfo with pruner::DeviceLimits.
 * Also: the device a parsed job names (job_device), with the error that names the field.
 * Must not: touch the database or parse jobs. */
#pragma once

#include <cstdint>
#include <string>

#include "cuda/device.h"
#include "pruner/occupancy.h"

namespace gputune {
struct Job;  // variants/job.h
}

namespace gputune::tuner {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::int64_t total_mem = 0;
  int l2_bytes = 0;
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_bits = 0;
  pruner::DeviceLimits limits;  // from the driver's attributes
};

/// The limits of a device the driver described: the tables' for its compute capability (or the
/// defaults with its compute capability, for one the tables do not know), the driver's where it
/// reports them (a dimension limit it reports as 0 keeps the table's).
DeviceInfo device_info(const cuda::DeviceAttributes& a);

/// Device `index` as the driver describes it. Throws cuda::CudaError.
DeviceInfo query_device(int index);

/// The device a job runs on (GPUTune.Device.Index, or --gpu): throws JobError naming that field
/// (`source` for the file, when the index came from elsewhere, such as the command line) and the
/// devices there are when it does not exist. Needs an available driver.
DeviceInfo job_device(const Job& job, const std::string& source = {},
                      const std::string& field = "GPUTune.Device.Index");

}  // namespace gputune::tuner
