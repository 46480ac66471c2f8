#include "db/interchange.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <typeinfo>

#include "json_fuzz.h"
#include "test_util.h"

namespace gputune::db {
namespace {

TEST(Import, KernelTunerCacheBecomesMeasurementsOfItsDevice) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  auto path = (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string();
  ImportSummary s = import_measurements(store, path);
  EXPECT_EQ(s.measurements, 11130);
  EXPECT_EQ(s.correct, 11130);
  EXPECT_EQ(s.device, "NVIDIA RTX A4000");
  EXPECT_EQ(s.context, "25000x2048");  // as the T1 job labels its ProblemSize
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
  ImportSummary again = import_measurements(store, path);
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
    import_measurements(store, (dir / "bad.json").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks parameter 'a'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.runs().empty());  // the transaction rolled back
  test::write_file(dir / "notkt.json", R"({"hello": 1})");
  EXPECT_THROW(import_measurements(store, (dir / "notkt.json").string()), std::runtime_error);
  EXPECT_THROW(import_measurements(store, (dir / "missing.json").string()), std::runtime_error);
  // A number beyond a double (interchange_fuzz): nlohmann's out_of_range, refused as malformed.
  test::write_file(dir / "huge.json", R"({"kernel_name": "k", "cache": {"1": {"time": 1e400}}})");
  try {
    import_measurements(store, (dir / "huge.json").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("huge.json: malformed JSON"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(store.runs().empty());
}

// A problem size is whole numbers an int64 holds; 1e300 is none (the cast was undefined).
TEST(Import, AProblemSizeBeyondAnInt64IsNone) {
  EXPECT_EQ(whole_problem_size(nlohmann::json::parse("[4096, 2]")),
            (std::vector<std::int64_t>{4096, 2, 1}));
  EXPECT_TRUE(whole_problem_size(nlohmann::json::parse("1e300")).empty());
  EXPECT_TRUE(whole_problem_size(nlohmann::json::parse("[1, -1e19]")).empty());
}

TEST(Import, FailedConfigurationsKeepTheirCategory) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  test::write_file(dir / "c.json",
                   R"({"kernel_name": "k", "device_name": "d", "tune_params_keys": ["a"],
    "problem_size": [10], "cache": {"1": {"a": 1, "time": "CompilationFailedConfig"},
    "2": {"a": 2, "time": "RuntimeFailedConfig"}, "3": {"a": 3, "time": 0.5, "times": [0.5]}}})");
  auto s = import_measurements(store, (dir / "c.json").string());
  EXPECT_EQ(s.failed, 2);
  auto ms = store.measurements(s.run_id);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[0].status, Status::kCorrect);
  EXPECT_EQ(ms[1].status, Status::kCompile);
  EXPECT_EQ(ms[2].status, Status::kRuntime);
}

TEST(Export, T4ResultsFollowTheSchema) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  test::write_file(dir / "c.json",
                   R"({"kernel_name": "k", "device_name": "d", "tune_params_keys": ["a", "b"],
    "cache": {"1,x": {"a": 1, "b": "x", "time": "RuntimeFailedConfig"}, "3,y": {"a": 3, "b": "y", "time": 0.5, "times": [0.5, 0.6]}}})");
  auto s = import_measurements(store, (dir / "c.json").string());
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

nlohmann::json small_t4(size_t n);

// A T4 file imports too: a gputune export names its kernel, device and context, so it moves a
// tuning problem from one database to another; one from elsewhere (Kernel Tuner's) needs the
// kernel and the device named, and says so.
TEST(Import, AT4FileImportsAsMeasurementsOfItsDevice) {
  test::TempDir dir;
  Store from((dir / "from.db").string());
  DeviceRecord gpu;
  gpu.name = "GPU", gpu.cc_major = 9, gpu.sm_count = 132;
  ContextRecord c;
  c.kernel_id = from.upsert_kernel("k", "hash-k", "src");
  c.device_id = from.upsert_device(gpu), c.label = "4096", c.problem_size_json = "[4096,1,1]";
  c.arch = "sm_90";
  const std::int64_t context = from.upsert_context(c);
  const std::int64_t run = from.begin_run(from.upsert_job("k", "job.json", "{}"), "bf", 3);
  int bs = 64;
  for (auto [status, ms] : std::vector<std::pair<const char*, std::optional<double>>>{
           {"correct", 2.0}, {"correct", 1.5}, {"compile", std::nullopt}}) {
    MeasurementRecord m;
    m.run_id = run, m.context_id = context, m.status = Status(status), m.time_ms = ms;
    // The job's order, not the names': u before bs.
    m.variant_id = from.upsert_variant(c.kernel_id, "2," + std::to_string(bs),
                                       "{\"u\": 2, \"bs\": " + std::to_string(bs) + "}");
    if (ms) m.samples_ms = {*ms, *ms + 0.1};
    from.add_measurement(m);
    bs *= 2;
  }
  const std::string exported = export_t4(from, run);
  test::write_file(dir / "k.t4.json", exported);
  // Each configuration, and metadata.gputune.parameters, keep the job's order.
  EXPECT_LT(exported.find("\"u\": 2"), exported.find("\"bs\": 128")) << exported;
  auto exported_doc = nlohmann::json::parse(exported);
  EXPECT_EQ(exported_doc["metadata"]["gputune"]["parameters"], nlohmann::json({"u", "bs"}));
  Store to((dir / "to.db").string());
  ImportSummary s = import_measurements(to, (dir / "k.t4.json").string());
  EXPECT_EQ(s.kernel, "k");
  EXPECT_EQ(s.device, "GPU");
  EXPECT_EQ(s.context, "4096");
  EXPECT_EQ(s.measurements, 3);
  EXPECT_EQ(s.correct, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(s.best_ms, 1.5);
  EXPECT_EQ(s.best_key, "2,128");  // the file's order: u, bs
  EXPECT_EQ(s.parameter_order, "the file's order");
  auto winners = to.winners("k", "4096", "GPU");
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_DOUBLE_EQ(winners[0].time_ms, 1.5);
  auto ms = to.measurements(s.run_id);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[0].samples_ms, (std::vector<double>{1.5, 1.6}));
  EXPECT_EQ(ms[2].status, Status::kCompile);  // its T4 invalidity
  EXPECT_EQ(ms[2].reason, "T4: compile");
  EXPECT_EQ(to.contexts("k").at(0).problem_size_json, "[4096,1,1]");
  // The command line names what the file does not, or replaces what it does.
  s = import_measurements(to, (dir / "k.t4.json").string(), {"", "NVIDIA H200", "big"});
  EXPECT_EQ(s.device, "NVIDIA H200");
  EXPECT_EQ(s.context, "big");
  // A file without an order (Kernel Tuner's T4 files keep none) takes that of the kernel of that
  // name already stored with these parameters, so both imports are one kernel with one key per
  // configuration; a kernel not stored gets name order.
  // Without a problem size either, it joins the stored context of its label (kernel and device
  // alike): one context, so one winner.
  exported_doc["metadata"]["gputune"].erase("parameters");
  exported_doc["metadata"]["gputune"].erase("problem_size");
  test::write_file(dir / "unordered.t4.json", exported_doc.dump());
  s = import_measurements(to, (dir / "unordered.t4.json").string());
  EXPECT_EQ(s.best_key, "2,128");
  EXPECT_EQ(to.winners("k", "4096", "GPU").size(), 1u);
  EXPECT_EQ(to.contexts("k").size(), 2u);  // 4096 on GPU, big on NVIDIA H200
  EXPECT_EQ(s.parameter_order, "the order of k already in the database");
  EXPECT_EQ(to.parameter_orders("k"), (std::vector<std::vector<std::string>>{{"u", "bs"}}));
  s = import_measurements(to, (dir / "unordered.t4.json").string(), {"fresh", "", ""});
  EXPECT_EQ(s.best_key, "128,2");
  EXPECT_EQ(s.parameter_order, "name order (the file keeps none)");
  // An order that does not name the configurations' parameters is refused.
  exported_doc["metadata"]["gputune"]["parameters"] = {"u", "block"};
  test::write_file(dir / "misnamed.t4.json", exported_doc.dump());
  try {
    import_measurements(to, (dir / "misnamed.t4.json").string());
    ADD_FAILURE() << "parameters that are not the configuration's";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "field 'metadata.gputune.parameters' [\"u\",\"block\"] does not name the "
                  "parameters of results[0].configuration [\"bs\",\"u\"]"),
              std::string::npos)
        << e.what();
  }
  // Kernel Tuner's T4 file names neither kernel nor device: each is asked for, nothing stored.
  test::write_file(dir / "kt.t4.json", small_t4(4).dump());
  const std::size_t runs = to.runs(100).size();
  auto error_of = [&](const ImportNames& names) {
    try {
      import_measurements(to, (dir / "kt.t4.json").string(), names);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({}), (dir / "kt.t4.json").string() +
                              ": a T4 file that does not say which kernel it measured "
                              "(metadata.gputune.kernel). Fix: give --kernel NAME");
  EXPECT_NE(error_of({"dedispersion_kernel", "", ""})
                .find("does not say which device it measured (metadata.gputune.device). Fix: "
                      "give --device NAME"),
            std::string::npos);
  EXPECT_EQ(to.runs(100).size(), runs);
  s = import_measurements(to, (dir / "kt.t4.json").string(),
                          {"dedispersion_kernel", "NVIDIA RTX A4000", ""});
  EXPECT_EQ(s.measurements, 4);
  EXPECT_EQ(s.context, "1");  // no problem size named
  // A configuration without a parameter the first one has: refused, nothing stored.
  auto doc = small_t4(3);
  doc["results"][1]["configuration"].erase("tile_size_x");
  test::write_file(dir / "gap.t4.json", doc.dump());
  try {
    import_measurements(to, (dir / "gap.t4.json").string(), {"k2", "d", ""});
    ADD_FAILURE() << "a configuration without tile_size_x";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "results[1] lacks parameter 'tile_size_x' (the first configuration has it)"),
              std::string::npos)
        << e.what();
  }
  test::write_file(dir / "empty.t4.json", R"({"schema_version": "1.0.0", "results": []})");
  try {
    import_measurements(to, (dir / "empty.t4.json").string(), {"k3", "d", ""});
    ADD_FAILURE() << "a T4 file without results";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'results' is empty: a T4 file with no "
                                         "measurement has nothing to import"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(to.runs(100).size(), runs + 1);
}

// A T4 file is one tuning problem: a run that measured several (two kernels, two contexts, a
// second GPU) is exported one at a time, each named in metadata.gputune.
TEST(Export, AT4FileHoldsOneTuningProblem) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  DeviceRecord gpu, other_gpu;
  gpu.name = "GPU", gpu.cc_major = 9, gpu.sm_count = 132;
  other_gpu.name = "GPU 2", other_gpu.cc_major = 8, other_gpu.sm_count = 108;
  const std::int64_t device = store.upsert_device(gpu), device2 = store.upsert_device(other_gpu);
  std::map<std::string, std::int64_t> ctx, variant;
  auto context = [&](const std::string& kernel, const std::string& label, std::int64_t dev,
                     const std::string& size) {
    ContextRecord c;
    c.kernel_id = store.upsert_kernel(kernel, "hash-" + kernel, "src");
    c.device_id = dev, c.label = label, c.problem_size_json = size, c.arch = "sm_90";
    ctx[kernel + "/" + label + "/" + std::to_string(dev)] = store.upsert_context(c);
  };
  context("k", "small", device, "[1,1,1]");
  context("k", "large", device, "[2,1,1]");
  context("k2", "small", device, "[1,1,1]");
  context("k", "large", device2, "[2,1,1]");
  for (const char* kernel : {"k", "k2"})
    for (int bs : {64, 128, 256})
      variant[kernel + std::to_string(bs)] =
          store.upsert_variant(store.upsert_kernel(kernel, std::string("hash-") + kernel, "src"),
                               std::to_string(bs), "{\"bs\": " + std::to_string(bs) + "}");
  const std::int64_t job = store.upsert_job("k", "job.json", "{}");
  auto add = [&](std::int64_t run, const std::string& context_key, const std::string& v,
                 const char* status, std::optional<double> ms) {
    MeasurementRecord m;
    m.run_id = run, m.context_id = ctx.at(context_key), m.variant_id = variant.at(v);
    m.status = Status(status), m.time_ms = ms;
    store.add_measurement(m);
  };
  const std::int64_t run = store.begin_run(job, "brute_force", 8);
  add(run, "k/small/" + std::to_string(device), "k64", "correct", 2.0);
  add(run, "k/small/" + std::to_string(device), "k128", "correct", 1.0);
  add(run, "k/small/" + std::to_string(device), "k256", "compiled", std::nullopt);
  add(run, "k/large/" + std::to_string(device), "k64", "correct", 4.0);
  add(run, "k2/small/" + std::to_string(device), "k264", "correct", 3.0);
  const std::int64_t run2 = store.begin_run(job, "brute_force", 8);
  add(run2, "k/large/" + std::to_string(device2), "k64", "correct", 5.0);
  auto error_of = [&](std::int64_t r, const std::string& label, const std::string& kernel) {
    try {
      export_t4(store, r, label, kernel);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string r1 = std::to_string(run), r2 = std::to_string(run2);
  // The choice left open: each problem with the options that export it alone.
  const std::string listing =
      "\n  --context large --kernel k: k on GPU, problem size [2,1,1], 1 result (run " + r1 +
      ")\n  --context small --kernel k: k on GPU, problem size [1,1,1], 2 results (run " + r1 +
      ")\n  --context small --kernel k2: k2 on GPU, problem size [1,1,1], 1 result (run " + r1 +
      ")";
  EXPECT_EQ(error_of(run, "", ""), "run " + r1 +
                                       " measured 3 tuning problems, and a T4 file holds one "
                                       "(their configurations would mix): pick one with the "
                                       "options below:" +
                                       listing);
  EXPECT_NE(error_of(run, "small", "").find("run " + r1 + " measured 2 tuning problems"),
            std::string::npos);
  EXPECT_EQ(
      error_of(run, "huge", ""),
      "no timed measurement of run " + r1 +
          " matches --context huge; what it holds, with the options that export each:" + listing);
  // One problem measured on two GPUs (all runs): --run picks one.
  const std::string both = error_of(0, "large", "k");
  EXPECT_NE(both.find("the database measured 2 tuning problems"), std::string::npos) << both;
  EXPECT_NE(both.find("with --run N where the same problem was measured on several devices"),
            std::string::npos)
      << both;
  EXPECT_NE(both.find("k on GPU 2, problem size [2,1,1], 1 result (run " + r2 + ")"),
            std::string::npos)
      << both;

  auto doc = nlohmann::json::parse(export_t4(store, run, "small", "k"));
  ASSERT_EQ(doc["results"].size(), 2u);  // the compiled-only variant is not a result
  EXPECT_EQ(doc["results"][0]["configuration"]["bs"], 128);
  EXPECT_EQ(doc["results"][1]["configuration"]["bs"], 64);
  EXPECT_EQ(doc["metadata"]["gputune"],
            nlohmann::json::parse(R"({"kernel": "k", "context": "small", "device": "GPU",
              "problem_size": [1,1,1], "parameters": ["bs"], "runs": [)" +
                                  r1 + "]}"));
  // The device query names the problem's GPU only.
  doc = nlohmann::json::parse(export_t4(store, run2, "large"));
  ASSERT_EQ(doc["results"].size(), 1u);
  EXPECT_EQ(doc["metadata"]["gputune"]["device"], "GPU 2");
  ASSERT_EQ(doc["metadata"]["environment"]["device_query"]["devices"].size(), 1u);
  EXPECT_EQ(doc["metadata"]["environment"]["device_query"]["devices"][0]["name"], "GPU 2");
  // A run that timed nothing: an empty T4 file that names no problem.
  doc = nlohmann::json::parse(export_t4(store, store.begin_run(job, "brute_force", 8)));
  EXPECT_TRUE(doc["results"].empty());
  EXPECT_EQ(doc["metadata"]["gputune"], nlohmann::json::object());
}

// The first `n` entries of the shipped Kernel Tuner cache and T4 file, plus a failed one.
nlohmann::json small_kernel_tuner_cache(size_t n) {
  auto doc = nlohmann::json::parse(read_maybe_gzip(
      (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string()));
  nlohmann::json cache = nlohmann::json::object();
  for (auto it = doc["cache"].begin(); it != doc["cache"].end() && cache.size() < n; ++it)
    cache[it.key()] = it.value();
  cache.begin().value()["time"] = "RuntimeFailedConfig";
  doc["cache"] = cache;
  return doc;
}
nlohmann::json small_t4(size_t n) {
  auto doc = nlohmann::json::parse(read_maybe_gzip(
      (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000_T4.json.gz").string()));
  doc["results"].erase(doc["results"].begin() + static_cast<long>(n), doc["results"].end());
  return doc;
}

TEST(MeasurementFile, ReadsBothFormatsOfTheSameMeasurements) {
  test::TempDir dir;
  test::write_file(dir / "kt.json", small_kernel_tuner_cache(5).dump());
  test::write_file(dir / "t4.json", small_t4(5).dump());
  MeasurementFile kt = read_measurement_file((dir / "kt.json").string());
  MeasurementFile t4 = read_measurement_file((dir / "t4.json").string());
  EXPECT_EQ(kt.format, MeasurementFile::Format::KernelTuner);
  EXPECT_EQ(t4.format, MeasurementFile::Format::T4);
  EXPECT_EQ(kt.device, "NVIDIA RTX A4000");
  EXPECT_EQ(kt.keys.size(), 8u);
  ASSERT_EQ(kt.entries.size(), 5u);
  ASSERT_EQ(t4.entries.size(), 5u);
  EXPECT_FALSE(kt.entries[0].time_ms);
  EXPECT_EQ(kt.entries[0].failure, "RuntimeFailedConfig");
  ASSERT_TRUE(kt.entries[1].time_ms);
  EXPECT_EQ(kt.entries[1].samples_ms.size(), 32u);
  EXPECT_TRUE(kt.entries[1].params.contains("block_size_y"));
  ASSERT_TRUE(t4.entries[1].time_ms);
  EXPECT_EQ(t4.entries[1].samples_ms.size(), 32u);
  EXPECT_TRUE(t4.entries[1].compile_ms);
  EXPECT_TRUE(t4.entries[1].params.contains("block_size_y"));
}

TEST(MeasurementFile, AWrongKindOfValueNamesTheFileAndTheField) {
  test::TempDir dir;
  auto expect_error = [&](const nlohmann::json& doc, const std::string& field) {
    test::write_file(dir / "m.json", doc.dump());
    try {
      read_measurement_file((dir / "m.json").string());
      ADD_FAILURE() << field << ": no error";
    } catch (const std::runtime_error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("m.json"), std::string::npos) << m;
      EXPECT_NE(m.find("'" + field + "'"), std::string::npos) << m;
    }
  };
  auto kt = small_kernel_tuner_cache(3);
  std::string k1 = std::next(kt["cache"].begin()).key();
  auto doc = kt;
  doc["cache"][k1]["time"] = -2.0;
  expect_error(doc, "cache." + k1 + ".time");
  doc = kt;
  doc["cache"][k1]["times"][3] = "fast";
  expect_error(doc, "cache." + k1 + ".times[3]");
  doc = kt;
  doc["cache"][k1]["block_size_x"] = nlohmann::json::object();
  expect_error(doc, "cache." + k1 + ".block_size_x");
  doc = kt;
  doc["kernel_name"] = 3;
  expect_error(doc, "kernel_name");
  doc = kt;
  doc["tune_params_keys"][1] = nullptr;
  expect_error(doc, "tune_params_keys[1]");
  auto t4 = small_t4(3);
  doc = t4;
  doc["results"][2]["times"]["runtimes"] = 1.5;
  expect_error(doc, "results[2].times.runtimes");
  doc = t4;
  doc["results"][1]["configuration"] = "1,32";
  expect_error(doc, "results[1].configuration");
  doc = t4;
  doc["results"][0]["invalidity"] = false;
  expect_error(doc, "results[0].invalidity");
}

// Both shipped formats, mutated many times: each file reads or is refused with an error naming
// it; an import either stores every entry or nothing, and the database stays usable.
TEST(MeasurementFile, MutatedFilesReadOrAreRefusedAndImportIsAllOrNothing) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  std::mt19937 rng(20261123);
  const nlohmann::json bases[] = {small_kernel_tuner_cache(6), small_t4(6)};
  int read = 0, refused = 0, imported = 0;
  for (int i = 0; i < 400; ++i) {
    nlohmann::json doc = bases[i % 2];
    int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) test::mutate_json(doc, rng);
    auto path = (dir / ("m" + std::to_string(i) + ".json")).string();
    test::write_file(path, doc.dump());
    try {
      MeasurementFile f = read_measurement_file(path);
      ++read;
      for (auto& e : f.entries) {
        EXPECT_TRUE(e.params.is_object()) << doc.dump();
        EXPECT_NE(e.time_ms.has_value(), !e.failure.empty()) << doc.dump();
        if (e.time_ms) {
          EXPECT_GE(*e.time_ms, 0.0);
        }
      }
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << doc.dump().substr(0, 1500) << "\nthrew " << typeid(e).name() << ": "
                    << e.what();
    }
    size_t runs_before = store.runs(1000).size();
    try {
      // A T4 file from elsewhere names no kernel or device: given, as `import` is told them.
      const ImportNames names =
          i % 2 ? ImportNames{"dedispersion_kernel", "NVIDIA RTX A4000", ""} : ImportNames{};
      ImportSummary s = import_measurements(store, path, names);
      EXPECT_EQ(store.measurements(s.run_id).size(), static_cast<size_t>(s.measurements));
      EXPECT_EQ(store.runs(1000).size(), runs_before + 1);
      ++imported;
    } catch (const DbError& e) {
      ADD_FAILURE() << "database error: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_EQ(store.runs(1000).size(), runs_before) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << doc.dump().substr(0, 1500) << "\nimport threw " << typeid(e).name() << ": "
                    << e.what();
    }
  }
  EXPECT_GT(read, 50);
  EXPECT_GT(refused, 50);
  EXPECT_GT(imported, 20);
}

}  // namespace
}  // namespace gputune::db
