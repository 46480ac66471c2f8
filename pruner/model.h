/** \file pruner/model.h
 * Owns: the performance model: predicted time of a variant from its traffic (traffic.h), flops,
 * occupancy and wave quantization against a device's rates (a roofline with latency hiding), its
 * calibration per device from measured times, and the rank correlation used to score it.
 *   t = overhead + overlap(dram, l2, shared, flops) x waves / hiding, where
 *   overlap(...) = (sum of term^p)^(1/p): the terms overlap, but not perfectly, so the roofline's
 *            corner is rounded; p = 4 by default, chosen on dedispersion's 11,130 measured
 *            A4000 times (bench/results/replay-dedispersion-conversions-A4000-2026-11-26.md);
 *            large p: the max
 *   dram   = compulsory bytes / DRAM bandwidth
 *            (per array: min(its bytes, 32 B x sectors asked for))
 *   l2     = 32 B x global sectors / L2-to-SM bandwidth (coalescing shows up here)
 *   shared = wavefronts / (SMs x clock) (bank conflicts show up here)
 *   flops  = (flops + 64 x (warp memory instructions + loop control
 *                           + conversion slots x conversions)) / peak FP32 rate
 *            (issue: a load, a store or a loop's counter/compare/branch takes the slot of a
 *            warp FMA, 64 flops, so unrolling shows up here; a conversion runs on fewer lanes
 *            and takes FP32 lanes / conversion lanes slots, 8 from 8.6 on)
 *   latency = memory latency x load rounds / resident warps x DRAM share of the loads
 *            (Little's law: a warp waits a latency per round of global loads it issues before
 *            it needs one of them, and only the resident warps' rounds are in flight at once;
 *            the DRAM share is compulsory load bytes / loaded sector bytes, as L2 hits return
 *            sooner. One element per thread of a copy leaves too few bytes in flight to reach
 *            the DRAM bandwidth: this term is what says so)
 *   hiding = min(1, resident warps per SM / saturating warps)
 *   waves  = ceil(blocks / (blocks per SM x SMs)) x capacity / blocks (tail effect)
 * Calibration scales each term and fits the overhead, the saturating warp count and p by minimising
 * the squared log error over measured variants.
 * Must not: include cuda.h, launch anything, or touch the database. */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pruner/device_spec.h"
#include "pruner/occupancy.h"
#include "pruner/traffic.h"

namespace gputune::pruner {

struct DeviceRates {
  int sm_count = 0;
  double clock_ghz = 0;
  double dram_gbs = 0;
  double l2_gbs = 0;  ///< L2-to-SM bandwidth: 48 B per clock per SM unless measured
  double fp32_gflops = 0;
  /// Issue slots of FP32 work a warp conversion takes: FP32 lanes / conversion lanes per SM
  /// (128 / 16 from 8.6 on, 64 / 16 on 7.x and 8.0).
  double conversion_slots = 8;
  bool valid() const { return sm_count > 0 && clock_ghz > 0 && dram_gbs > 0 && fp32_gflops > 0; }
};

DeviceRates rates_for(const DeviceSpec& d);
/// From driver attributes (clock in kHz, memory clock in kHz, bus width in bits).
DeviceRates rates_from_driver(const DeviceLimits& l, double clock_khz, double mem_clock_khz,
                              int bus_width_bits);

/// What the model needs of one variant in one context.
struct ModelFeatures {
  bool ok = false;
  std::string reason;  ///< why there is no prediction (parse failure, infeasible launch)
  double sectors = 0, compulsory_bytes = 0, shared_wavefronts = 0, flops = 0;
  double requests = 0;     ///< warp-level memory instructions (global and shared) over the grid
  double load_rounds = 0;  ///< rounds of global loads over the grid (TrafficReport::load_rounds)
  double dram_load_share = 0;  ///< compulsory load bytes / loaded sector bytes (0 to 1)
  double control = 0;          ///< warp-level loop-control instructions over the grid
  double conversions = 0;      ///< warp-level conversions (I2F, F2I, F2F) over the grid
  std::int64_t blocks = 0;
  int warps_per_block = 0, blocks_per_sm = 0, active_warps = 0;
};

ModelFeatures features_from(const TrafficReport& t, const Occupancy& occ,
                            std::int64_t threads_per_block);

/// The memory latency of the latency term for a calibration that has none: fitted on the H100's
/// transpose 4096x4096 measurements (../shared/data/h100-2026-11-26) and checked on its
/// transpose 1000x3000 and matmul 4096 measurements
/// (bench/results/model-latency-h100-2026-11-27.md).
inline constexpr double kDefaultLatencyNs = 650;

/// The largest p a calibration fits: at most 4^(1/64) (2.2%) above the terms' max.
inline constexpr double kMaxOverlap = 64;

struct Calibration {
  double overhead_us = 4, dram = 1, l2 = 1, shared = 1, flops = 1, saturating_warps = 16;
  /// What a round of global loads waits, under load (ns).
  double latency_ns = kDefaultLatencyNs;
  double overlap = 4;  ///< the exponent p of the terms' p-norm (kMaxOverlap: nearly their max)
  int samples = 0;     ///< measurements it was fitted on (0: the defaults)
  double rms_log_error = 0;  ///< of the fit, natural log
  /// The rates it was fitted against (a run's: from the driver); not valid() for the defaults
  /// and for calibrations stored before the rates were.
  DeviceRates rates;
  std::string json() const;
  static Calibration from_json(const std::string& text);  ///< defaults for bad text
};

/// `c` for other rates of the same device (a device file's published figures against the
/// driver's): each term's scale is rebased so that it predicts the same times as it did with the
/// rates it was fitted against. Unchanged when those are not known.
Calibration rebased(const Calibration& c, const DeviceRates& to);

struct Prediction {
  bool ok = false;
  double ms = 0;
  double dram_ms = 0, l2_ms = 0, shared_ms = 0, flops_ms = 0, latency_ms = 0;
  double hiding = 1, waves = 1;
  std::string bound;  ///< dram, l2, shared, flops, latency
};

Prediction predict(const ModelFeatures& f, const DeviceRates& d, const Calibration& c);

/// The fastest prediction any occupancy up to `max_blocks_per_sm` allows: f's blocks per SM (and
/// its resident warps with them) replaced by each of 1..max_blocks_per_sm. Registers and static
/// shared memory can only lower a variant's occupancy, so with the bound from the thread count
/// and the launch's dynamic shared memory alone, no compiled variant is predicted faster: rule 4
/// can judge a variant from its source before it is compiled.
Prediction best_case(ModelFeatures f, const DeviceRates& d, const Calibration& c,
                     int max_blocks_per_sm);

/// Fits a calibration to measured times (ms) of variants with features; needs at least 4 with
/// ok features, else returns `start` unchanged.
Calibration calibrate(const std::vector<ModelFeatures>& f, const std::vector<double>& measured_ms,
                      const DeviceRates& d, const Calibration& start = {});

/// Spearman rank correlation (ties get their average rank); NaN for fewer than 2 pairs.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace gputune::pruner
