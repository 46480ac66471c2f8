// The performance model: roofline terms, latency hiding, wave quantization, calibration and the
// rank correlation, against figures computed by hand.
#include "pruner/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace gputune::pruner {
namespace {

DeviceRates h100() {
  DeviceRates d;
  d.sm_count = 132;
  d.clock_ghz = 1.98;
  d.dram_gbs = 3350;
  d.fp32_gflops = 66900;
  d.l2_gbs = 48 * 132 * 1.98;
  return d;
}

ModelFeatures copy_features(double bytes) {
  ModelFeatures f;
  f.ok = true;
  f.compulsory_bytes = bytes;
  f.sectors = bytes / 32;  // perfectly coalesced
  f.blocks = 100000;
  f.warps_per_block = 8;
  f.blocks_per_sm = 8;
  f.active_warps = 64;
  return f;
}

TEST(Model, CopyIsDramBoundAtTheDeviceBandwidth) {
  Calibration c;
  c.overhead_us = 0;
  ModelFeatures f = copy_features(1e9);
  Prediction p = predict(f, h100(), c);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.bound, "dram");
  EXPECT_NEAR(p.dram_ms, 1e9 / 3350e9 * 1e3, 1e-9);
  // 100000 blocks on 132 x 8 slots: 95 waves of 1056, the last one partial.
  double waves = std::ceil(100000.0 / 1056) * 1056 / 100000;
  // The L2 term of a coalesced copy is about a quarter of the DRAM term: in a 4-norm it adds 0.1%.
  const double l2 = p.l2_ms / p.dram_ms;
  EXPECT_NEAR(l2, 3350.0 / (48 * 132 * 1.98), 1e-9);
  EXPECT_NEAR(p.ms, p.dram_ms * std::pow(1 + std::pow(l2, 4), 0.25) * waves, 1e-9);
  EXPECT_LT(p.ms, p.dram_ms * waves * 1.002);
}

// The terms overlap, but not perfectly: two equal terms take 2^(1/4) of one (the default p of
// 4), one term twice another 1.5% more than the larger; a large p is the plain roofline max.
TEST(Model, TheRooflinesCornerIsRounded) {
  Calibration c;
  c.overhead_us = 0;
  ModelFeatures f = copy_features(1e9);
  const double dram = predict(f, h100(), c).dram_ms;
  const double waves = predict(f, h100(), c).waves;
  f.flops = dram * 1e-3 * 66900e9;  // an issue term equal to the DRAM term
  f.sectors = 0;
  Prediction p = predict(f, h100(), c);
  EXPECT_NEAR(p.flops_ms, dram, 1e-12);
  EXPECT_NEAR(p.ms, std::pow(2.0, 0.25) * dram * waves, 1e-9);
  f.flops /= 2;
  EXPECT_NEAR(predict(f, h100(), c).ms, std::pow(1 + 1 / 16.0, 0.25) * dram * waves, 1e-9);
  c.overlap = 64;
  EXPECT_NEAR(predict(f, h100(), c).ms, dram * waves, 1e-3 * dram);
}

TEST(Model, UncoalescedAccessIsL2BoundAndFlopsBoundKernelsAreNot) {
  Calibration c;
  ModelFeatures f = copy_features(1e8);
  f.sectors *= 8;  // eight times the sectors: stride-8 access
  Prediction p = predict(f, h100(), c);
  EXPECT_EQ(p.bound, "l2");
  EXPECT_GT(p.l2_ms, p.dram_ms);
  f = copy_features(1e6);
  f.flops = 1e12;
  p = predict(f, h100(), c);
  EXPECT_EQ(p.bound, "flops");
  EXPECT_NEAR(p.flops_ms, 1e12 / 66900e9 * 1e3, 1e-9);
}

// Each warp memory instruction takes an issue slot a warp FMA could have used: at equal flops
// and traffic, the variant that reads with float4 (a quarter of the instructions) is faster when
// issue bound, and memory instructions decide nothing in a DRAM-bound kernel.
TEST(Model, MemoryInstructionsTakeIssueSlots) {
  Calibration c;
  ModelFeatures f = copy_features(1e6);
  f.flops = 1e12;
  f.requests = 1e12 / 64 / 2;  // half as many warp loads as warp FMAs
  Prediction scalar = predict(f, h100(), c);
  EXPECT_EQ(scalar.bound, "flops");
  EXPECT_NEAR(scalar.flops_ms, 1.5e12 / 66900e9 * 1e3, 1e-9);
  f.requests /= 4;
  Prediction vec = predict(f, h100(), c);
  EXPECT_LT(vec.ms, scalar.ms);
  EXPECT_NEAR(vec.flops_ms, 1.125e12 / 66900e9 * 1e3, 1e-9);
  ModelFeatures copy = copy_features(1e9);
  const double dram = predict(copy, h100(), c).ms;
  copy.requests = 1e9 / 128 / 2;  // the copy's own loads and stores, 4 B x 32 lanes each
  // (Next to nothing: their issue term is about 1/80 of the DRAM term, and the terms add as a
  // 4-norm.)
  EXPECT_NEAR(predict(copy, h100(), c).ms, dram, 1e-8 * dram);
}

// Loop control takes issue slots too: at equal flops and traffic, the unrolled variant (fewer
// counter/compare/branch instructions) is predicted faster when issue bound.
TEST(Model, LoopControlTakesIssueSlots) {
  Calibration c;
  ModelFeatures f = copy_features(1e6);
  f.flops = 1e12;
  f.control = 3 * 1e12 / 64;  // one loop step (3 instructions) per warp FMA: not unrolled
  Prediction rolled = predict(f, h100(), c);
  EXPECT_EQ(rolled.bound, "flops");
  EXPECT_NEAR(rolled.flops_ms, 4e12 / 66900e9 * 1e3, 1e-9);
  f.control /= 4;  // unrolled by 4
  Prediction unrolled = predict(f, h100(), c);
  EXPECT_NEAR(unrolled.flops_ms, 1.75e12 / 66900e9 * 1e3, 1e-9);
  EXPECT_LT(unrolled.ms, rolled.ms);
}

// A conversion (I2F, F2I) runs on 16 lanes per SM: on an 8.6 or 9.0 GPU (128 FP32 lanes) it
// takes the issue slots of 8 warp FMAs, on 8.0 (64 lanes) of 4. The device files give the rate.
TEST(Model, ConversionsTakeTheSlotsOfSeveralFmas) {
  const auto dir = test::source_dir() / "configs/devices";
  const DeviceRates a4000 = rates_for(find_device("RTX A4000", dir));
  EXPECT_DOUBLE_EQ(a4000.conversion_slots, 8);
  EXPECT_DOUBLE_EQ(rates_for(find_device("H100 SXM", dir)).conversion_slots, 8);
  EXPECT_DOUBLE_EQ(rates_for(find_device("A100 PCIe 40GB", dir)).conversion_slots, 4);
  DeviceLimits volta;
  volta.sm_count = 80, volta.cc_major = 7, volta.cc_minor = 0;
  EXPECT_DOUBLE_EQ(rates_from_driver(volta, 1.5e6, 0.9e6, 4096).conversion_slots, 4);
  Calibration c;
  ModelFeatures f = copy_features(1e6);
  f.flops = 1e12;
  const double fma = predict(f, h100(), c).flops_ms;
  f.conversions = 1e12 / 64;  // one warp conversion per warp FMA
  Prediction p = predict(f, h100(), c);
  EXPECT_EQ(p.bound, "flops");
  EXPECT_NEAR(p.flops_ms, 9 * fma, 1e-9);
  // A device whose conversions run at the FP32 rate would take one slot each.
  DeviceRates fast = h100();
  fast.conversion_slots = 1;
  EXPECT_NEAR(predict(f, fast, c).flops_ms, 2 * fma, 1e-9);
}

// Little's law (issue #45): a copy whose warps each load one 128-byte row per round keeps too
// few bytes in flight to reach the DRAM bandwidth; four rows per round do. The latency term is
// latency x rounds / resident warps x the DRAM share of the loads, and it enters the p-norm.
TEST(Model, TooFewLoadsInFlightMakeACopyLatencyBound) {
  Calibration c;
  c.overhead_us = 0;
  c.latency_ns = 1000;
  ModelFeatures f = copy_features(1e9);
  const double warps = 0.5e9 / 128;  // the loaded half, a 128-byte row per warp
  f.load_rounds = warps;
  f.dram_load_share = 1;
  const Prediction one = predict(f, h100(), c);
  EXPECT_NEAR(one.latency_ms, 1000e-6 * warps / (64 * 132), 1e-12);
  EXPECT_EQ(one.bound, "latency");
  f.load_rounds = warps / 4;  // four rows per round
  const Prediction four = predict(f, h100(), c);
  EXPECT_NEAR(four.latency_ms, one.latency_ms / 4, 1e-12);
  EXPECT_EQ(four.bound, "dram");
  EXPECT_GT(one.ms, 1.4 * four.ms);
  EXPECT_LT(four.ms, 1.01 * predict(copy_features(1e9), h100(), c).ms);
  // Fewer resident warps keep fewer rounds in flight; loads served from L2 do not count.
  f.active_warps = 16;
  EXPECT_NEAR(predict(f, h100(), c).latency_ms, 4 * four.latency_ms, 1e-12);
  f.dram_load_share = 0;
  EXPECT_EQ(predict(f, h100(), c).latency_ms, 0);
  // The latency travels in a calibration's JSON form.
  EXPECT_DOUBLE_EQ(Calibration::from_json(c.json()).latency_ns, 1000);
  EXPECT_DOUBLE_EQ(Calibration::from_json("{}").latency_ns, kDefaultLatencyNs);
}

TEST(Model, LowOccupancyAndTinyGridsAreSlower) {
  Calibration c;
  c.overhead_us = 0;
  ModelFeatures f = copy_features(1e9);
  double full = predict(f, h100(), c).ms;
  f.active_warps = 4;  // a quarter of the 16 saturating warps
  Prediction p = predict(f, h100(), c);
  EXPECT_NEAR(p.hiding, 0.25, 1e-12);
  EXPECT_NEAR(p.ms, full * 4, 1e-9);
  // 66 blocks: half the SMs idle.
  f = copy_features(1e9);
  f.blocks = 66;
  p = predict(f, h100(), c);
  EXPECT_NEAR(p.waves, 2.0, 1e-12);
  EXPECT_NEAR(p.hiding, 0.5, 1e-12);  // one block of 8 warps per SM
}

TEST(Model, TheBestCaseIsNoSlowerThanAnyOccupancyItAllows) {
  Calibration c;
  c.overhead_us = 0;
  // 200 blocks of 8 warps on 132 SMs: one block per SM leaves 68 blocks for a second wave (2 x
  // 132 / 200 = 1.32) and hides latency with 8 of the 16 warps (2x); two per SM run every block
  // in one wave with 16 warps.
  ModelFeatures f = copy_features(1e9);
  f.blocks = 200;
  double fastest = 1e300;
  for (int b = 1; b <= 8; ++b) {
    ModelFeatures g = f;
    g.blocks_per_sm = b, g.active_warps = 8 * b;
    fastest = std::min(fastest, predict(g, h100(), c).ms);
  }
  Prediction best = best_case(f, h100(), c, 8);
  ASSERT_TRUE(best.ok);
  EXPECT_DOUBLE_EQ(best.ms, fastest);
  ModelFeatures one = f;
  one.blocks_per_sm = 1, one.active_warps = 8;
  EXPECT_NEAR(predict(one, h100(), c).ms, 1.32 * 2 * best.ms, 1e-9);
  // A bound of one block per SM gives that block's prediction; none for no features.
  EXPECT_DOUBLE_EQ(best_case(f, h100(), c, 1).ms, predict(one, h100(), c).ms);
  f.ok = false;
  EXPECT_FALSE(best_case(f, h100(), c, 8).ok);
}

TEST(Model, NoPredictionWithoutFeaturesOrForInfeasibleLaunches) {
  TrafficReport t;
  t.parsed = false;
  t.error = "clang could not parse";
  Occupancy occ;
  ModelFeatures f = features_from(t, occ, 256);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.reason, "clang could not parse");
  EXPECT_FALSE(predict(f, h100(), {}).ok);
  t.parsed = true;
  t.error.clear();
  occ.feasible = false;
  occ.infeasible_reason = "too many registers";
  EXPECT_NE(features_from(t, occ, 256).reason.find("too many registers"), std::string::npos);
}

/// `n` variants with random traffic (global and shared), flops and resident warps, and the times
/// `truth` predicts for them on an H100.
std::pair<std::vector<ModelFeatures>, std::vector<double>> measured_variants(
    const Calibration& truth, unsigned seed, int n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<ModelFeatures> fs;
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    ModelFeatures f = copy_features(std::pow(10, 6 + 3 * u(rng)));
    f.sectors *= 1 + 15 * u(rng);
    f.shared_wavefronts = std::pow(10, 5 + 3 * u(rng));
    f.flops = std::pow(10, 8 + 4 * u(rng));
    f.active_warps = 4 + static_cast<int>(60 * u(rng));
    fs.push_back(f);
    ms.push_back(predict(f, h100(), truth).ms);
  }
  return {fs, ms};
}

TEST(Model, CalibrationRecoversKnownConstants) {
  Calibration truth;
  truth.overhead_us = 12, truth.dram = 1.6, truth.l2 = 0.7, truth.flops = 2.5;
  truth.saturating_warps = 24, truth.overlap = 8;
  const auto [fs, ms] = measured_variants(truth, 7, 60);
  Calibration fit = calibrate(fs, ms, h100());
  EXPECT_EQ(fit.samples, 60);
  EXPECT_LT(fit.rms_log_error, 0.05);
  double before = 0, after = 0;
  for (size_t i = 0; i < fs.size(); ++i) {
    before += std::abs(std::log(predict(fs[i], h100(), {}).ms / ms[i]));
    after += std::abs(std::log(predict(fs[i], h100(), fit).ms / ms[i]));
  }
  EXPECT_LT(after, before / 5);
  // Too few measurements: the start is returned.
  Calibration few = calibrate({fs[0], fs[1]}, {ms[0], ms[1]}, h100());
  EXPECT_EQ(few.samples, 0);
  // The JSON form round-trips.
  Calibration back = Calibration::from_json(fit.json());
  EXPECT_DOUBLE_EQ(back.dram, fit.dram);
  EXPECT_DOUBLE_EQ(back.overlap, fit.overlap);
  EXPECT_EQ(back.samples, 60);
  EXPECT_DOUBLE_EQ(Calibration::from_json("not json").dram, 1.0);
  EXPECT_DOUBLE_EQ(Calibration::from_json("not json").overlap, 4);
  // A fit stored before p was fitted was fitted to the terms' max.
  EXPECT_DOUBLE_EQ(Calibration::from_json(R"({"dram": 1.2, "samples": 9})").overlap, kMaxOverlap);
}

// A calibration fitted with one set of rates (a run's, from the driver) predicts the same times
// with another set for the same GPU (a device file's published figures) once rebased; the rates
// travel in its JSON form.
TEST(Model, ARebasedCalibrationPredictsTheSameTimesWithOtherRates) {
  Calibration truth;
  truth.overhead_us = 9, truth.dram = 1.3, truth.l2 = 0.8, truth.shared = 1.7, truth.flops = 2.2;
  const auto [fs, ms] = measured_variants(truth, 11, 40);
  const Calibration fit = Calibration::from_json(calibrate(fs, ms, h100()).json());
  ASSERT_TRUE(fit.rates.valid());
  EXPECT_DOUBLE_EQ(fit.rates.dram_gbs, h100().dram_gbs);
  DeviceRates published = h100();
  published.dram_gbs *= 1.12, published.l2_gbs *= 0.5, published.fp32_gflops *= 1.05;
  published.clock_ghz *= 0.9;
  const Calibration moved = rebased(fit, published);
  double unmoved_error = 0;
  for (const ModelFeatures& f : fs) {
    EXPECT_NEAR(predict(f, published, moved).ms / predict(f, h100(), fit).ms, 1.0, 1e-9);
    unmoved_error += std::abs(std::log(predict(f, published, fit).ms / predict(f, h100(), fit).ms));
  }
  EXPECT_GT(unmoved_error, 0.5);  // without rebasing, the other rates do change the times
  // Unknown rates (calibrations stored before they were): left as they are.
  Calibration old = fit;
  old.rates = {};
  EXPECT_DOUBLE_EQ(rebased(old, published).dram, fit.dram);
}

TEST(Model, SpearmanMatchesHandComputedRanks) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ties get average ranks: x ranks 1, 2.5, 2.5, 4; y ranks 1, 2, 3, 4 -> rho = 0.9487 (scipy).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138, 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));
  EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
}

}  // namespace
}  // namespace gputune::pruner
