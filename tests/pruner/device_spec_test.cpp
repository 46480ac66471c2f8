#include "pruner/device_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <typeinfo>

#include "json_fuzz.h"
#include "test_util.h"

namespace gputune::pruner {
namespace {

TEST(DeviceSpec, EveryShippedDeviceLoadsWithSources) {
  auto all = load_devices(test::source_dir() / "configs/devices");
  ASSERT_EQ(all.size(), 10u);
  for (auto& d : all) {
    EXPECT_GT(d.limits.sm_count, 0) << d.key;
    EXPECT_EQ(d.sources.size(), 6u) << d.key;  // one per figure
  }
  auto h100 = find_device("H100", test::source_dir() / "configs/devices");
  EXPECT_EQ(h100.key, "h100-sxm");
  EXPECT_EQ(h100.limits.sm_count, 132);
  EXPECT_EQ(h100.limits.arch(), "sm_90");
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_gbs, 3350);
  auto a4000 = find_device("nvidia rtx a4000", test::source_dir() / "configs/devices");
  EXPECT_EQ(a4000.limits.arch(), "sm_86");
  EXPECT_EQ(a4000.limits.max_threads_per_sm, 1536);
}

// Spaces, '-' and '_' do not matter: a user types the key as they remember it.
TEST(DeviceSpec, NamesMatchWhateverSeparatorsTheyAreWrittenWith) {
  const auto dir = test::source_dir() / "configs/devices";
  EXPECT_EQ(find_device("h100_sxm", dir).key, "h100-sxm");
  EXPECT_EQ(find_device("RTX3090", dir).key, "rtx-3090");
  EXPECT_EQ(find_device("rtx a-4000", dir).key, "rtx-a4000");
  EXPECT_EQ(find_device("A100_PCIe_40GB", dir).key, "a100-pcie-40gb");
}

// Two files that a loose spelling of a name fits: neither is taken, both are named.
TEST(DeviceSpec, ANameThatFitsTwoDevicesIsAnErrorNamingBoth) {
  test::TempDir dir;
  auto h100 =
      nlohmann::json::parse(test::read_file(test::source_dir() / "configs/devices/h100-sxm.json"));
  h100["aliases"] = nlohmann::json::array();
  test::write_file(dir / "h100-sxm.json", h100.dump());
  h100["name"] = "Other H100";
  test::write_file(dir / "h100sxm.json", h100.dump());
  EXPECT_EQ(find_device("H100SXM", dir.path()).key, "h100sxm");  // as written, it is one of them
  try {
    find_device("h100_sxm", dir.path());
    FAIL();
  } catch (const DeviceError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'h100_sxm' fits more than one device file"), std::string::npos) << w;
    EXPECT_NE(w.find("h100-sxm  (NVIDIA H100 SXM5 80GB)"), std::string::npos) << w;
    EXPECT_NE(w.find("h100sxm  (Other H100)"), std::string::npos) << w;
  }
}

TEST(DeviceSpec, UnknownNameListsTheKnownOnes) {
  try {
    find_device("H300", test::source_dir() / "configs/devices");
    FAIL();
  } catch (const DeviceError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("unknown device 'H300'"), std::string::npos);
    EXPECT_NE(w.find("rtx-2080-ti"), std::string::npos);
    EXPECT_NE(w.find("l40s"), std::string::npos);
  }
}

TEST(DeviceSpec, BadFilesNameTheFieldAndTheProblem) {
  test::TempDir dir;
  auto good =
      nlohmann::json::parse(test::read_file(test::source_dir() / "configs/devices/rtx-3090.json"));
  auto expect_error = [&](nlohmann::json doc, const std::string& needle) {
    test::write_file(dir / "bad.json", doc.dump());
    try {
      load_device_file(dir / "bad.json");
      FAIL() << needle;
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  };
  auto d = good;
  d.erase("sm_count");
  expect_error(d, "field 'sm_count': missing");
  d = good;
  d["memory_bandwidth_gbs"] = -5;
  expect_error(d, "field 'memory_bandwidth_gbs': value -5 is outside");
  d = good;
  d["sources"].erase("l2_cache_mib");
  expect_error(d, "sources.l2_cache_mib");
  d = good;
  d["peak_fp32_tflops"] = 80.0;  // 82 SMs x 128 x 2 x 1.695 GHz = 35.6
  expect_error(d, "disagrees with SMs x lanes x 2 x clock");
  d = good;
  d["compute_capability"] = "4.2";
  expect_error(d, "unknown compute capability");
  test::write_file(dir / "bad.json", "{ not json");
  EXPECT_THROW(load_device_file(dir / "bad.json"), DeviceError);
}

// Every shipped device file, mutated: loaded (then every figure is positive) or refused with a
// DeviceError naming the file; nothing else escapes.
TEST(DeviceSpec, MutatedFilesLoadOrAreRefusedWithADeviceError) {
  test::TempDir dir;
  std::mt19937 rng(20261123);
  int loaded = 0, refused = 0;
  for (auto& entry : std::filesystem::directory_iterator(test::source_dir() / "configs/devices")) {
    const auto original = nlohmann::json::parse(test::read_file(entry.path()));
    for (int i = 0; i < 40; ++i) {
      auto doc = original;
      int changes = 1 + static_cast<int>(rng() % 2);
      for (int c = 0; c < changes; ++c) test::mutate_json(doc, rng);
      test::write_file(dir / "d.json", doc.dump());
      try {
        DeviceSpec d = load_device_file(dir / "d.json");
        EXPECT_GT(d.limits.sm_count, 0) << doc.dump();
        EXPECT_GT(d.memory_bandwidth_gbs, 0) << doc.dump();
        EXPECT_GT(d.peak_fp32_tflops, 0) << doc.dump();
        ++loaded;
      } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("d.json"), std::string::npos) << e.what();
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << entry.path().filename() << " mutated to " << doc.dump() << " threw "
                      << typeid(e).name() << ": " << e.what();
      }
    }
  }
  EXPECT_GT(loaded, 20);
  EXPECT_GT(refused, 20);
}

}  // namespace
}  // namespace gputune::pruner
