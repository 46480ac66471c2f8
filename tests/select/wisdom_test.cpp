// Kernel Launcher wisdom files (select/wisdom.h): the fields its reader (src/wisdom.cpp at
// KernelTuner/kernel_launcher 6e27d0f) requires, and a round trip through a small reader written
// to the same rules (header line checked, '#' lines and blank lines skipped, config by the header's
// parameter order, device by environment.device_name).
#include "select/wisdom.h"

#include <gtest/gtest.h>

#include <sstream>

#include "select/fixture.h"

namespace gputune::select {
namespace {

using nlohmann::json;

struct Record {
  std::map<std::string, json> config;
  std::vector<std::int64_t> problem_size;
  double time = 0;
  std::string device;
  json environment;
};

/// Reads a wisdom file as Kernel Launcher does; throws where it would refuse the file.
std::vector<Record> read_wisdom(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error("empty file");
  const json header = json::parse(line);
  if (header.at("version") != "1.0") throw std::runtime_error("invalid version");
  if (header.at("key") != key) throw std::runtime_error("invalid key");
  if (!header.at("objective").is_string()) throw std::runtime_error("invalid objective");
  const json params = header.at("tunable_parameters");
  if (!params.is_array()) throw std::runtime_error("no tunable_parameters");
  std::vector<Record> out;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const json r = json::parse(line);
    Record rec;
    const json& config = r.at("config");
    if (config.size() != params.size()) throw std::runtime_error("invalid configuration");
    for (size_t i = 0; i < params.size(); ++i) {
      const auto t = config[i].type();
      if (t != json::value_t::number_integer && t != json::value_t::number_unsigned &&
          t != json::value_t::boolean && t != json::value_t::number_float &&
          t != json::value_t::string)
        throw std::runtime_error("cannot interpret json value: " + config[i].dump());
      rec.config[params[i].get<std::string>()] = config[i];
    }
    const json& size = r.at("problem_size");
    for (size_t i = 0; i < 3; ++i)  // ProblemSize: uint32 x, y, z, 1 where not given
      rec.problem_size.push_back(i < size.size() ? size[i].get<std::uint32_t>() : 1);
    rec.time = r.at(header.at("objective").get<std::string>()).get<double>();
    rec.device = r.at("environment").at("device_name").get<std::string>();
    rec.environment = r.at("environment");
    out.push_back(std::move(rec));
  }
  return out;
}

TEST(Wisdom, FileNamesAreKernelLaunchersSanitizedKeys) {
  EXPECT_EQ(wisdom_file_name("vector_add"), "vector_add.wisdom");
  EXPECT_EQ(wisdom_file_name("matmul<float, 16>"), "matmul_float__16_.wisdom");
  EXPECT_EQ(wisdom_file_name("a.b-c/d"), "a.b-c_d.wisdom");
  EXPECT_EQ(compute_capability("sm_90"), 90);
  EXPECT_EQ(compute_capability("sm_90a"), 90);
  EXPECT_EQ(compute_capability("compute_86"), 86);
  EXPECT_EQ(compute_capability(""), 0);
}

TEST(Wisdom, HeaderAndRecordsHaveKernelLaunchersFields) {
  const auto files = to_wisdom(test::three_devices(), {5, "2026-11-27T10:00:00"});
  ASSERT_EQ(files.size(), 1u);
  const WisdomFile& f = files[0];
  EXPECT_EQ(f.file_name, "vector_add.wisdom");
  std::istringstream in(f.text);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  // The header as Kernel Launcher's Python writer orders it.
  EXPECT_EQ(line, R"({"version":"1.0","objective":"time","tunable_parameters":["block_size_x",)"
                  R"("tile_size_x"],"key":"vector_add"})");
  ASSERT_TRUE(std::getline(in, line));
  const json first = json::parse(line);
  // The H100's first context (512x2048): its fastest candidate first.
  EXPECT_EQ(first["config"], json::parse("[64, 1]"));
  EXPECT_EQ(first["problem_size"], json::parse("[512, 2048]"));  // the significant sizes
  EXPECT_DOUBLE_EQ(first["time"].get<double>(), 0.10);
  EXPECT_EQ(first["environment"]["device_name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(first["environment"]["compute_capability"], 90);
  EXPECT_EQ(first["environment"]["date"], "2026-11-27T10:00:00");
  EXPECT_EQ(first["environment"]["gputune_context"], "512x2048");
  for (const char* k : {"config", "problem_size", "time", "environment"})
    EXPECT_TRUE(first.contains(k)) << k;
  EXPECT_EQ(f.records, 5 * 3 + 2 + 5);  // every measured candidate, at most 5 per context
  EXPECT_TRUE(f.notes.empty());
}

TEST(Wisdom, RoundTripGivesEveryContextsTimesAndWinner) {
  const DecisionTable t = test::three_devices();
  const auto files = to_wisdom(t, {2, ""});
  const auto records = read_wisdom(files.at(0).text, "vector_add");
  const KernelTable& k = t.kernels[0];
  size_t expected = 0;
  for (const DeviceTable& d : k.devices)
    for (const TunedInput& in : d.inputs) {
      expected += std::min<size_t>(2, in.times_ms.size());
      std::vector<const Record*> mine;
      for (const Record& r : records)
        if (r.device == d.name && r.environment["gputune_context"] == in.label) mine.push_back(&r);
      ASSERT_EQ(mine.size(), std::min<size_t>(2, in.times_ms.size())) << d.name << " " << in.label;
      EXPECT_EQ(mine[0]->problem_size, in.size);
      EXPECT_DOUBLE_EQ(mine[0]->time, in.best_ms);  // the winner first
      EXPECT_EQ(json(mine[0]->config), json(k.configs.at(in.winner)));
      EXPECT_LE(mine[0]->time, mine[1 % mine.size()]->time);
      EXPECT_FALSE(mine[0]->environment.contains("date"));  // none given, none written
    }
  EXPECT_EQ(records.size(), expected);
}

TEST(Wisdom, WhatKernelLaunchersFormatCannotHoldIsSaid) {
  DecisionTable t = test::three_devices();
  DeviceTable& d = t.kernels[0].devices[2];
  d.inputs.push_back(test::input("huge", std::int64_t(1) << 33, 1, {{"64,1", 9.0}}));
  d.inputs[0].values["alpha"] = 2.5;
  const auto f = to_wisdom(t).at(0);
  ASSERT_EQ(f.notes.size(), 2u);
  EXPECT_NE(f.notes[0].find("input values"), std::string::npos) << f.notes[0];
  EXPECT_NE(f.notes[1].find("context huge on NVIDIA RTX A4000: a problem size beyond 2^32-1"),
            std::string::npos)
      << f.notes[1];
  const auto records = read_wisdom(f.text, "vector_add");  // still readable
  for (const Record& r : records) EXPECT_NE(r.environment["gputune_context"], "huge");
  EXPECT_THROW(read_wisdom(f.text, "other_kernel"), std::runtime_error);  // the key is checked
}

}  // namespace
}  // namespace gputune::select
