#include "pruner/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

namespace gputune::pruner {

namespace {
constexpr double kL2BytesPerClockPerSm = 48;
double conversion_slots(int major, int minor) {
  return static_cast<double>(fp32_lanes_per_sm(major, minor)) /
         conversion_lanes_per_sm(major, minor);
}
}  // namespace

DeviceRates rates_for(const DeviceSpec& d) {
  DeviceRates r;
  r.sm_count = d.limits.sm_count;
  r.clock_ghz = d.boost_clock_mhz / 1000.0;
  r.dram_gbs = d.memory_bandwidth_gbs;
  r.fp32_gflops = d.peak_fp32_tflops * 1000.0;
  r.l2_gbs = kL2BytesPerClockPerSm * r.sm_count * r.clock_ghz;
  r.conversion_slots = conversion_slots(d.limits.cc_major, d.limits.cc_minor);
  return r;
}

DeviceRates rates_from_driver(const DeviceLimits& l, double clock_khz, double mem_clock_khz,
                              int bus_width_bits) {
  DeviceRates r;
  r.sm_count = l.sm_count;
  r.clock_ghz = clock_khz / 1e6;
  r.dram_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;  // double data rate
  r.fp32_gflops = r.sm_count * fp32_lanes_per_sm(l.cc_major, l.cc_minor) * 2.0 * r.clock_ghz;
  r.l2_gbs = kL2BytesPerClockPerSm * r.sm_count * r.clock_ghz;
  r.conversion_slots = conversion_slots(l.cc_major, l.cc_minor);
  return r;
}

ModelFeatures features_from(const TrafficReport& t, const Occupancy& occ,
                            std::int64_t threads_per_block) {
  ModelFeatures f;
  if (!t.parsed || !t.error.empty()) {
    f.reason = t.error.empty() ? "not analysed" : t.error;
    return f;
  }
  if (!occ.feasible) {
    f.reason = "launch would fail: " + occ.infeasible_reason;
    return f;
  }
  f.ok = true;
  f.sectors = t.load_sectors + t.store_sectors;
  f.compulsory_bytes = t.compulsory_bytes;
  f.shared_wavefronts = t.shared_wavefronts;
  f.flops = t.flops;
  for (const Access& a : t.accesses) f.requests += a.requests;
  f.load_rounds = t.load_rounds;
  if (t.load_sectors > 0)
    f.dram_load_share = std::min(1.0, t.compulsory_load_bytes / (32.0 * t.load_sectors));
  f.control = t.control_instructions;
  f.conversions = t.conversion_instructions;
  f.blocks = t.blocks;
  f.warps_per_block = static_cast<int>((threads_per_block + 31) / 32);
  f.blocks_per_sm = occ.blocks_per_sm;
  f.active_warps = occ.active_warps;
  return f;
}

std::string Calibration::json() const {
  nlohmann::json j{
      {"overhead_us", overhead_us}, {"dram", dram},       {"l2", l2},
      {"shared", shared},           {"flops", flops},     {"saturating_warps", saturating_warps},
      {"overlap", overlap},         {"samples", samples}, {"rms_log_error", rms_log_error},
      {"latency_ns", latency_ns}};
  if (rates.valid())
    j["rates"] = {{"sm_count", rates.sm_count},
                  {"clock_ghz", rates.clock_ghz},
                  {"dram_gbs", rates.dram_gbs},
                  {"l2_gbs", rates.l2_gbs},
                  {"fp32_gflops", rates.fp32_gflops}};
  return j.dump();
}

Calibration Calibration::from_json(const std::string& text) {
  Calibration c;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return c;
  auto get = [&](const char* k, double& v) {
    if (j.contains(k) && j[k].is_number() && j[k].get<double>() > 0) v = j[k].get<double>();
  };
  get("overhead_us", c.overhead_us), get("dram", c.dram), get("l2", c.l2);
  get("shared", c.shared), get("flops", c.flops), get("saturating_warps", c.saturating_warps);
  get("overlap", c.overlap), get("latency_ns", c.latency_ns);
  // A fit stored before the terms overlapped as a p-norm was fitted to their max.
  if (!j.contains("overlap") && j.contains("samples")) c.overlap = kMaxOverlap;
  if (j.contains("samples") && j["samples"].is_number_integer()) c.samples = j["samples"];
  if (j.contains("rms_log_error") && j["rms_log_error"].is_number())
    c.rms_log_error = j["rms_log_error"];
  if (j.contains("rates") && j["rates"].is_object()) {
    const auto& r = j["rates"];
    DeviceRates d;
    auto rate = [&](const char* k, double& v) {
      if (r.contains(k) && r[k].is_number() && r[k].get<double>() > 0) v = r[k].get<double>();
    };
    if (r.contains("sm_count") && r["sm_count"].is_number_integer() && r["sm_count"].get<int>() > 0)
      d.sm_count = r["sm_count"];
    rate("clock_ghz", d.clock_ghz), rate("dram_gbs", d.dram_gbs), rate("l2_gbs", d.l2_gbs);
    rate("fp32_gflops", d.fp32_gflops);
    if (d.valid() && d.l2_gbs > 0) c.rates = d;
  }
  return c;
}

Calibration rebased(const Calibration& c, const DeviceRates& to) {
  const DeviceRates& from = c.rates;
  if (!from.valid() || from.l2_gbs <= 0 || !to.valid() || to.l2_gbs <= 0) return c;
  Calibration r = c;
  r.dram *= to.dram_gbs / from.dram_gbs;
  r.l2 *= to.l2_gbs / from.l2_gbs;
  r.shared *= (to.sm_count * to.clock_ghz) / (from.sm_count * from.clock_ghz);
  r.flops *= to.fp32_gflops / from.fp32_gflops;
  r.rates = to;
  return r;
}

Prediction predict(const ModelFeatures& f, const DeviceRates& d, const Calibration& c) {
  Prediction p;
  if (!f.ok || !d.valid() || f.blocks <= 0 || f.blocks_per_sm <= 0) return p;
  p.ok = true;
  p.dram_ms = c.dram * f.compulsory_bytes / (d.dram_gbs * 1e9) * 1e3;
  p.l2_ms = c.l2 * 32.0 * f.sectors / (d.l2_gbs * 1e9) * 1e3;
  p.shared_ms = c.shared * f.shared_wavefronts / (d.sm_count * d.clock_ghz * 1e9) * 1e3;
  // Issue: every warp memory or loop-control instruction takes a slot a warp FMA (32 lanes x 2
  // flops) could use, and a conversion conversion_slots of them.
  p.flops_ms = c.flops *
               (f.flops + 64.0 * (f.requests + f.control + d.conversion_slots * f.conversions)) /
               (d.fp32_gflops * 1e9) * 1e3;
  // Resident warps per SM: limited by occupancy and by how many blocks each SM gets.
  double blocks_per_sm_used =
      std::min<double>(f.blocks_per_sm, std::ceil(static_cast<double>(f.blocks) / d.sm_count));
  double warps = std::min<double>(f.active_warps, blocks_per_sm_used * f.warps_per_block);
  // Little's law: each resident warp has one round of loads in flight at a time.
  p.latency_ms =
      c.latency_ns * 1e-6 * f.dram_load_share * f.load_rounds / (std::max(1.0, warps) * d.sm_count);
  double top = p.dram_ms;
  p.bound = "dram";
  if (p.l2_ms > top) top = p.l2_ms, p.bound = "l2";
  if (p.shared_ms > top) top = p.shared_ms, p.bound = "shared";
  if (p.flops_ms > top) top = p.flops_ms, p.bound = "flops";
  if (p.latency_ms > top) top = p.latency_ms, p.bound = "latency";
  // The roofline's corner, rounded: the terms overlap, but not perfectly (a p-norm; its limit
  // for a large exponent is the plain max).
  double t = 0;
  if (top > 0) {
    const double q = c.overlap;
    for (double x : {p.dram_ms, p.l2_ms, p.shared_ms, p.flops_ms, p.latency_ms})
      t += std::pow(x / top, q);
    t = top * std::pow(t, 1.0 / q);
  }
  p.hiding = std::min(1.0, std::max(1.0, warps) / c.saturating_warps);
  double capacity = static_cast<double>(f.blocks_per_sm) * d.sm_count;
  double b = static_cast<double>(f.blocks);
  if (b >= capacity)
    p.waves = std::ceil(b / capacity) * capacity / b;
  else
    p.waves = d.sm_count / std::min<double>(d.sm_count, b);  // idle SMs
  p.ms = c.overhead_us / 1000.0 + t * p.waves / p.hiding;
  return p;
}

Prediction best_case(ModelFeatures f, const DeviceRates& d, const Calibration& c,
                     int max_blocks_per_sm) {
  Prediction best;
  for (int b = 1; b <= max_blocks_per_sm; ++b) {
    f.blocks_per_sm = b;
    f.active_warps = b * f.warps_per_block;
    Prediction p = predict(f, d, c);
    if (p.ok && (!best.ok || p.ms < best.ms)) best = p;
  }
  return best;
}

namespace {

double loss(const std::vector<ModelFeatures>& f, const std::vector<double>& m, const DeviceRates& d,
            const Calibration& c) {
  double s = 0;
  int n = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    Prediction p = predict(f[i], d, c);
    if (!p.ok || !(m[i] > 0)) continue;
    double e = std::log(p.ms / m[i]);
    s += e * e;
    ++n;
  }
  return n ? s / n : std::numeric_limits<double>::infinity();
}

}  // namespace

Calibration calibrate(const std::vector<ModelFeatures>& f, const std::vector<double>& measured,
                      const DeviceRates& d, const Calibration& start) {
  int n = 0;
  for (size_t i = 0; i < f.size() && i < measured.size(); ++i)
    if (f[i].ok && measured[i] > 0) ++n;
  if (n < 4 || !d.valid()) return start;
  Calibration c = rebased(start, d);
  struct Param {
    double Calibration::*field;
    double lo, hi;
  };
  const Param params[] = {{&Calibration::overhead_us, 0.5, 200},
                          {&Calibration::dram, 0.05, 50},
                          {&Calibration::l2, 0.05, 50},
                          {&Calibration::shared, 0.05, 50},
                          {&Calibration::flops, 0.05, 50},
                          {&Calibration::saturating_warps, 1, 64},
                          {&Calibration::overlap, 1, kMaxOverlap},
                          {&Calibration::latency_ns, 100, 5000}};
  double best = loss(f, measured, d, c);
  for (double step : {4.0, 2.0, 1.41, 1.19, 1.09, 1.04}) {
    for (int round = 0; round < 6; ++round) {
      bool improved = false;
      for (const Param& p : params) {
        for (double factor : {step, 1.0 / step}) {
          Calibration t = c;
          t.*p.field = std::clamp(c.*p.field * factor, p.lo, p.hi);
          double l = loss(f, measured, d, t);
          if (l < best - 1e-12) best = l, c = t, improved = true;
        }
      }
      if (!improved) break;
    }
  }
  c.samples = n;
  c.rms_log_error = std::sqrt(best);
  c.rates = d;
  return c;
}

namespace {
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> a(x.begin(), x.begin() + static_cast<long>(n));
  std::vector<double> b(y.begin(), y.begin() + static_cast<long>(n));
  auto ra = ranks(a), rb = ranks(b);
  double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

}  // namespace gputune::pruner
