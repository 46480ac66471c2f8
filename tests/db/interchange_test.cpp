#include "db/interchange.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gputune::db {
namespace {

TEST(Import, KernelTunerCacheBecomesMeasurementsOfItsDevice) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  auto path = (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string();
  ImportSummary s = import_kernel_tuner_cache(store, path);
  EXPECT_EQ(s.measurements, 11130);
  EXPECT_EQ(s.correct, 11130);
  EXPECT_EQ(s.device, "NVIDIA RTX A4000");
  EXPECT_EQ(s.context, "25000x2048x1");
  // The best of the file, computed independently here.
  auto doc = nlohmann::json::parse(read_maybe_gzip(path));
  double best = 1e30;
  std::string best_key;
  for (auto it = doc["cache"].begin(); it != doc["cache"].end(); ++it)
    if (it.value()["time"].get<double>() < best)
      best = it.value()["time"].get<double>(), best_key = it.key();
  EXPECT_DOUBLE_EQ(s.best_ms, best);
  EXPECT_EQ(s.best_key, best_key);
  auto w = store.winners("dedispersion_kernel", "", "NVIDIA RTX A4000");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].config_key, best_key);
  auto ms = store.measurements(s.run_id);
  EXPECT_EQ(ms.size(), 11130u);
  EXPECT_EQ(ms[0].samples_ms.size(), 32u);
  // Importing twice keeps one kernel/variant/context and adds a second run.
  ImportSummary again = import_kernel_tuner_cache(store, path);
  EXPECT_NE(again.run_id, s.run_id);
  EXPECT_EQ(store.contexts("dedispersion_kernel").size(), 1u);
}

TEST(Import, ErrorsStoreNothing) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  test::write_file(dir / "bad.json",
                   R"({"kernel_name": "k", "device_name": "d", "tune_params_keys": ["a"],
    "cache": {"1": {"a": 1, "time": 1.0}, "2": {"time": 2.0}}})");
  try {
    import_kernel_tuner_cache(store, (dir / "bad.json").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks parameter 'a'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.runs().empty());  // the transaction rolled back
  test::write_file(dir / "notkt.json", R"({"hello": 1})");
  EXPECT_THROW(import_kernel_tuner_cache(store, (dir / "notkt.json").string()), std::runtime_error);
  EXPECT_THROW(import_kernel_tuner_cache(store, (dir / "missing.json").string()),
               std::runtime_error);
}

TEST(Import, FailedConfigurationsKeepTheirCategory) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  test::write_file(dir / "c.json",
                   R"({"kernel_name": "k", "device_name": "d", "tune_params_keys": ["a"],
    "problem_size": [10], "cache": {"1": {"a": 1, "time": "CompilationFailedConfig"},
    "2": {"a": 2, "time": "RuntimeFailedConfig"}, "3": {"a": 3, "time": 0.5, "times": [0.5]}}})");
  auto s = import_kernel_tuner_cache(store, (dir / "c.json").string());
  EXPECT_EQ(s.failed, 2);
  auto ms = store.measurements(s.run_id);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[0].status, "correct");
  EXPECT_EQ(ms[1].status, "compile");
  EXPECT_EQ(ms[2].status, "runtime");
}

TEST(Export, T4ResultsFollowTheSchema) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  test::write_file(dir / "c.json",
                   R"({"kernel_name": "k", "device_name": "d", "tune_params_keys": ["a", "b"],
    "cache": {"1,x": {"a": 1, "b": "x", "time": "RuntimeFailedConfig"}, "3,y": {"a": 3, "b": "y", "time": 0.5, "times": [0.5, 0.6]}}})");
  auto s = import_kernel_tuner_cache(store, (dir / "c.json").string());
  auto doc = nlohmann::json::parse(export_t4(store, s.run_id));
  EXPECT_EQ(doc["schema_version"], "1.0.0");
  EXPECT_EQ(doc["metadata"]["environment"]["device_query"]["devices"][0]["name"], "d");
  EXPECT_TRUE(doc["metadata"]["hardware"]["operating_system"].is_string());
  ASSERT_EQ(doc["results"].size(), 2u);
  auto& ok = doc["results"][0];
  EXPECT_EQ(ok["invalidity"], "correct");
  EXPECT_EQ(ok["correctness"], 1);
  EXPECT_EQ(ok["configuration"]["b"], "y");
  EXPECT_EQ(ok["times"]["runtimes"].size(), 2u);
  EXPECT_EQ(ok["measurements"][0]["name"], "time");
  EXPECT_DOUBLE_EQ(ok["measurements"][0]["value"].get<double>(), 0.5);
  EXPECT_EQ(doc["results"][1]["invalidity"], "runtime");
  EXPECT_EQ(doc["results"][1]["correctness"], 0);
  for (auto& r : doc["results"])
    for (auto* key : {"configuration", "times", "invalidity", "correctness"})
      EXPECT_TRUE(r.contains(key)) << key;
}

}  // namespace
}  // namespace gputune::db
