// Runtime selection (select/select.h): exact matches, predictions for untuned inputs (nearest and
// the decision tree, chosen by leave-one-out), the decision file, and every bad input as an error
// value.
#include "select/select.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>

#include "bench/synthetic_spaces.h"
#include "db/store.h"
#include "test_util.h"
#include "tuned_store.h"

namespace gputune::select {
namespace {

using bench::synthetic_device;
using bench::synthetic_kernel;

const Device kGpu{"Synthetic GPU", "sm_90"};

Table table_of(KernelTable k) {
  DecisionTable t;
  t.origin = "test";
  t.kernels.push_back(std::move(k));
  auto r = Table::from(std::move(t));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value_or_throw();
}

TEST(Select, ATunedInputGetsItsMeasuredWinnerAndItsGeometry) {
  const Table t = table_of(synthetic_kernel(synthetic_device({{1 << 12}, {1 << 16}, {1 << 20}})));
  const auto c = t.choose("synthetic", kGpu, {{1 << 16}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kMeasured);
  EXPECT_EQ(c->config, "16");  // ideal log2 tile = 16/2 - 4 = 4
  EXPECT_EQ(c->from, std::vector<std::string>{"65536"});
  ASSERT_TRUE(c->measured_ms);
  EXPECT_EQ(c->block[0], 128);
  EXPECT_EQ(c->grid[0], (65536 + 128 * 16 - 1) / (128 * 16));
  EXPECT_EQ(c->defines(), std::vector<std::string>{"-Dtile=16"});
  EXPECT_NE(c->explain().find("measured (context 65536)"), std::string::npos) << c->explain();
}

TEST(Select, AnUntunedInputIsPredictedFromTheNearestContextInLogSize) {
  const Table t = table_of(synthetic_kernel(synthetic_device({{1 << 12}, {1 << 20}})));
  // 2^14 is nearer 2^12 than 2^20 in log space, though not in plain size.
  const auto c = t.choose("synthetic", kGpu, {{1 << 14}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kNearest);
  EXPECT_EQ(c->config, "4");
  EXPECT_EQ(c->from, std::vector<std::string>{"4096"});
  ASSERT_TRUE(c->expected);  // two contexts: leave-one-out could run
  EXPECT_EQ(c->expected->contexts, 2);
  EXPECT_GT(c->expected->worst, 1.0);  // each hides the other, whose winner differs
  EXPECT_EQ(c->grid[0], (16384 + 128 * 4 - 1) / (128 * 4));
  // Equally near both: the larger input's winner.
  const auto mid = t.choose("synthetic", kGpu, {{1 << 16}});
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->from, std::vector<std::string>{"1048576"});
}

TEST(Select, TheTreeIsUsedWhereLeaveOneOutSaysItBeatsNearest) {
  // The best tile follows the first size only; the second size spreads the contexts so far apart
  // that the nearest in log space is often one with another first size.
  const auto d = synthetic_device({{1 << 8, 1 << 4},
                                   {1 << 9, 1 << 20},
                                   {1 << 16, 1 << 4},
                                   {1 << 17, 1 << 20},
                                   {1 << 24, 1 << 4},
                                   {1 << 25, 1 << 20}});
  const KernelTable k = synthetic_kernel(d);
  const DeviceTable& fitted = k.devices.front();
  ASSERT_TRUE(fitted.loo);
  EXPECT_EQ(fitted.method, How::kLearned);
  EXPECT_LT(fitted.loo->learned.mean, fitted.loo->nearest.mean);
  ASSERT_TRUE(fitted.tree);
  EXPECT_LE(fitted.tree->depth(), 4);
  const Table t = table_of(k);
  // 2^17 x 2^4: nearest in log space is 2^16 x 2^4 either way; 2^9 x 2^4 is nearest 2^8 x 2^4.
  // 2^24 x 2^19: the tree follows the first size.
  const auto c = t.choose("synthetic", kGpu, {{1 << 24, 1 << 19}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kLearned);
  EXPECT_EQ(c->config, "64") << c->explain();  // ideal tile 2^(24/2 - 4), the largest there is
  EXPECT_EQ(c->from.size(), 6u);
}

TEST(Select, NearestStaysWhereTheTreeDoesNoBetter) {
  const KernelTable k =
      synthetic_kernel(synthetic_device({{1 << 10}, {1 << 14}, {1 << 18}, {1 << 22}}));
  EXPECT_EQ(k.devices.front().method, How::kNearest);
  ASSERT_TRUE(k.devices.front().loo);
  EXPECT_LE(k.devices.front().loo->nearest.mean, k.devices.front().loo->learned.mean + 1e-9);
}

TEST(Select, LeaveOneOutReportsEachHiddenContextAgainstItsTrueWinner) {
  const DeviceTable d = synthetic_device({{1 << 12}, {1 << 16}, {1 << 20}});
  const auto rows = leave_one_out_rows(d);
  ASSERT_EQ(rows.size(), 3u);
  // Hiding 2^16 (best tile 16): nearest is 2^20 (ties to the larger), whose winner is tile 64.
  EXPECT_EQ(rows[1].label, "65536");
  EXPECT_EQ(rows[1].nearest, "64");
  const TunedInput& hidden = d.inputs[1];
  ASSERT_TRUE(rows[1].nearest_ratio);
  EXPECT_DOUBLE_EQ(*rows[1].nearest_ratio, hidden.times_ms.at("64") / hidden.best_ms);
  // The largest input's winner for 2^20 hidden is 2^16's.
  EXPECT_EQ(rows[2].largest, "16");
  const auto loo = leave_one_out(d);
  ASSERT_TRUE(loo);
  EXPECT_EQ(loo->nearest.contexts, 3);
  EXPECT_EQ(loo->nearest.unknown, 0);
  EXPECT_GE(loo->largest.worst, loo->nearest.worst);
}

TEST(Select, ADeviceOfTheSameArchitectureAnswersAndSaysSo) {
  const Table t = table_of(synthetic_kernel(synthetic_device({{1 << 12}, {1 << 20}})));
  const auto c = t.choose("synthetic", {"NVIDIA H200", "sm_90"}, {{1 << 20}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kNearest);  // another GPU: never "measured"
  EXPECT_EQ(c->device, "Synthetic GPU");
  EXPECT_EQ(c->from, std::vector<std::string>{"1048576 on Synthetic GPU"});
  // The device's name is matched without regard to case.
  EXPECT_EQ(t.choose("synthetic", {"synthetic gpu", ""}, {{1 << 20}})->how, How::kMeasured);
}

TEST(Select, BadInputsAreErrorValuesThatNameWhatIsMissing) {
  const Table t = table_of(synthetic_kernel(synthetic_device({{1 << 12, 64}, {1 << 20, 64}})));
  auto kernel = t.choose("matmul", kGpu, {{1024, 64}});
  ASSERT_FALSE(kernel);
  EXPECT_EQ(kernel.error().code, Error::Code::kUnknownKernel);
  EXPECT_NE(kernel.error().message.find("it has: synthetic"), std::string::npos);
  auto device = t.choose("synthetic", {"NVIDIA A100", "sm_80"}, {{1024, 64}});
  ASSERT_FALSE(device);
  EXPECT_EQ(device.error().code, Error::Code::kUnknownDevice);
  EXPECT_NE(device.error().message.find("Synthetic GPU (sm_90)"), std::string::npos);
  auto sizes = t.choose("synthetic", kGpu, {{1024}});
  ASSERT_FALSE(sizes);
  EXPECT_EQ(sizes.error().code, Error::Code::kBadInput);
  EXPECT_NE(sizes.error().message.find("tuned for 2 problem size(s)"), std::string::npos);
  auto zero = t.choose("synthetic", kGpu, {{0, 64}});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, Error::Code::kBadInput);
  EXPECT_THROW((void)t.choose("matmul", kGpu, {{1024, 64}}).value_or_throw(), SelectError);
}

TEST(Select, AKernelWithoutReadableLaunchRulesStillGetsItsConfiguration) {
  KernelTable k = synthetic_kernel(synthetic_device({{1 << 12}, {1 << 20}}));
  k.job_document = "{}";  // as imported results carry: no KernelSpecification
  const Table t = table_of(k);
  const auto c = t.choose("synthetic", kGpu, {{1 << 12}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kMeasured);
  EXPECT_EQ(c->config, "4");
  EXPECT_FALSE(c->has_geometry);
  EXPECT_NE(c->explain().find("no launch geometry"), std::string::npos) << c->explain();
  const Table good = table_of(synthetic_kernel(synthetic_device({{1 << 12}})));
  EXPECT_TRUE(good.choose("synthetic", kGpu, {{1 << 12}})->has_geometry);
}

TEST(Select, AContextTunedWithAnInputValueNeedsThatValue) {
  DeviceTable d = synthetic_device({{1 << 12}, {1 << 20}});
  for (auto& in : d.inputs) in.values["alpha"] = 2;
  const Table t = table_of(synthetic_kernel(d));
  auto missing = t.choose("synthetic", kGpu, {{1 << 12}});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("'alpha'"), std::string::npos);
  EXPECT_EQ(t.choose("synthetic", kGpu, {{1 << 12}, {{"alpha", 2}}})->how, How::kMeasured);
  EXPECT_EQ(t.choose("synthetic", kGpu, {{1 << 12}, {{"alpha", 3}}})->how, How::kNearest);
}

TEST(Select, TheDecisionFileRoundTripsToTheSameAnswers) {
  DecisionTable t;
  t.origin = "test", t.generated = "2026-11-27";
  t.kernels.push_back(synthetic_kernel(synthetic_device(
      {{1 << 8, 1 << 4}, {1 << 9, 1 << 20}, {1 << 16, 1 << 4}, {1 << 17, 1 << 20}})));
  const std::string text = to_json(t).dump();
  auto parsed = Table::parse(text, "decisions.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  auto direct = Table::from(t);
  for (std::int64_t a : {1 << 7, 1 << 12, 1 << 16, 1 << 30})
    for (std::int64_t b : {1, 1 << 10, 1 << 20}) {
      const auto x = parsed->choose("synthetic", kGpu, {{a, b}});
      const auto y = direct->choose("synthetic", kGpu, {{a, b}});
      ASSERT_TRUE(x && y);
      EXPECT_EQ(x->config, y->config);
      EXPECT_EQ(x->how, y->how);
      EXPECT_EQ(x->from, y->from);
      EXPECT_EQ(x->grid, y->grid);
    }
  DecisionTable again = parsed->data();
  again.origin = t.origin;
  EXPECT_EQ(to_json(again).dump(), to_json(t).dump());
}

TEST(Select, ADecisionFileOfAnotherVersionOrShapeIsRefusedWithTheField) {
  DecisionTable t;
  t.kernels.push_back(synthetic_kernel(synthetic_device({{1 << 12}})));
  auto j = to_json(t);
  j["version"] = kDecisionVersion + 1;
  auto version = Table::parse(j.dump(), "d.json");
  ASSERT_FALSE(version);
  EXPECT_EQ(version.error().code, Error::Code::kWrongVersion);
  EXPECT_NE(version.error().message.find("export it again"), std::string::npos);
  j = to_json(t);
  j["kernels"][0]["devices"][0]["contexts"][0]["winner"] = "3";
  auto winner = Table::parse(j.dump(), "d.json");
  ASSERT_FALSE(winner);
  EXPECT_EQ(winner.error().code, Error::Code::kBadFile);
  EXPECT_NE(winner.error().message.find("kernels[0].devices[0].contexts[0].winner"),
            std::string::npos)
      << winner.error().message;
  j = to_json(t);
  j["kernels"][0]["devices"][0]["contexts"][0].erase("size");
  auto size = Table::parse(j.dump(), "d.json");
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().message.find("contexts[0].size: is missing"), std::string::npos);
  EXPECT_EQ(Table::parse("{\"format\": \"other\"}", "d.json").error().code, Error::Code::kBadFile);
  EXPECT_EQ(Table::parse("not json", "d.json").error().code, Error::Code::kBadFile);
  // Mutated files: an error value, never a crash or an exception.
  const std::string good = to_json(t).dump();
  for (size_t cut = 0; cut < good.size(); cut += 7) (void)Table::parse(good.substr(0, cut), "d");
}

TEST(Select, OpeningAFileThatIsNeitherSaysSo) {
  test::TempDir dir;
  auto missing = Table::open((dir / "none.json").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Error::Code::kBadFile);
  // Another application's SQLite database.
  const auto other = (dir / "other.db").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto foreign = Table::open(other);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, Error::Code::kNotGputune);
  EXPECT_NE(foreign.error().message.find("other.db"), std::string::npos);
}

/// A gputune database with a vector_add kernel tuned at 1M and 16M on one device.
struct TunedDb {
  test::TempDir dir;
  std::string path = (dir / "g.db").string();
  TunedDb() {
    db::Store store(path);
    std::ifstream job(test::examples_dir() / "vector_add.json");
    std::stringstream doc;
    doc << job.rdbuf();
    const auto run = store.begin_run(store.upsert_job("vector_add", "vector_add.json", doc.str()),
                                     "brute_force", 4);
    const auto k = store.upsert_kernel("vector_add", "abc123", "__global__ void vector_add() {}");
    auto context = [&](const std::string& label, int n) {
      return test::vector_add_context(store, k, "NVIDIA H100 80GB HBM3", 9, 132, label, n);
    };
    auto measure = [&](std::int64_t ctx, int block, int tile, double ms) {
      test::vector_add_measurement(store, run, k, ctx, block, tile, ms);
    };
    const auto m1 = context("1M", 1 << 20), m16 = context("16M", 1 << 24);
    measure(m1, 256, 1, 0.010), measure(m1, 128, 4, 0.012), measure(m1, 64, 8, 0.02);
    measure(m16, 256, 1, 0.150), measure(m16, 128, 4, 0.120), measure(m16, 64, 8, 0.2);
  }
};

TEST(Select, ATableFromTheDatabaseAnswersAsItsExportedFileDoes) {
  TunedDb db;
  auto direct = Table::open(db.path);
  ASSERT_TRUE(direct) << direct.error().message;
  const Device h100{"NVIDIA H100 80GB HBM3", "sm_90"};
  auto tuned = direct->choose("vector_add", h100, {{1 << 24}});
  ASSERT_TRUE(tuned) << tuned.error().message;
  EXPECT_EQ(tuned->how, How::kMeasured);
  EXPECT_EQ(tuned->config, "128,4");
  EXPECT_EQ(tuned->grid[0], (1 << 24) / 512);
  auto small = direct->choose("vector_add", h100, {{1 << 19}});
  ASSERT_TRUE(small);
  EXPECT_EQ(small->how, How::kNearest);
  EXPECT_EQ(small->config, "256,1");
  EXPECT_EQ(small->from, std::vector<std::string>{"1M"});
  // Leave-one-out: hiding 1M picks 16M's winner (0.012 / 0.010), and the other way round.
  ASSERT_TRUE(small->expected);
  EXPECT_NEAR(small->expected->worst, 1.25, 1e-9);
  EXPECT_NEAR(small->expected->median, (1.2 + 1.25) / 2, 1e-9);

  db::Store store(db.path);
  DecisionTable t = table_from_store(store);
  auto from_file = Table::parse(to_json(t).dump(), "d.json");
  ASSERT_TRUE(from_file) << from_file.error().message;
  auto same = from_file->choose("vector_add", h100, {{1 << 19}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->config, small->config);
  EXPECT_EQ(same->grid, small->grid);
  ASSERT_NE(from_file->kernel("vector_add"), nullptr);
  EXPECT_EQ(from_file->kernel("vector_add")->source, "__global__ void vector_add() {}");
}

TEST(Select, AContextWhoseRunNamedNoWinnerAnswersWithItsFastestCorrectMeasurement) {
  TunedDb db;
  {
    db::Store store(db.path);
    store.db().exec("DELETE FROM winners");  // as a run killed before naming one leaves it
  }
  auto t = Table::open(db.path);
  ASSERT_TRUE(t) << t.error().message;
  auto c = t->choose("vector_add", {"NVIDIA H100 80GB HBM3", "sm_90"}, {{1 << 24}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->how, How::kMeasured);
  EXPECT_EQ(c->config, "128,4");
  EXPECT_DOUBLE_EQ(*c->measured_ms, 0.120);
}

TEST(Select, TheExportAndBestCommandsUseTheSameSelection) {
  TunedDb db;
  const std::string g = GPUTUNE_BINARY;
  const auto file = (db.dir / "d.json").string();
  auto exported = test::run_command(g + " export --decisions " + file + " --db " + db.path);
  ASSERT_EQ(exported.exit_code, 0) << exported.out;
  EXPECT_NE(exported.out.find("vector_add on NVIDIA H100 80GB HBM3: 2 context(s)"),
            std::string::npos)
      << exported.out;
  auto t = Table::open(file);
  ASSERT_TRUE(t) << t.error().message;
  auto best = test::run_command(g + " best vector_add --db " + db.path +
                                " --device 'NVIDIA H100 80GB HBM3' --size 524288");
  ASSERT_EQ(best.exit_code, 0) << best.out;
  EXPECT_NE(best.out.find("256,1, predicted: the winner of the nearest tuned context (1M)"),
            std::string::npos)
      << best.out;
  auto json = test::run_command(g + " best vector_add --db " + db.path +
                                " --device 'NVIDIA H100 80GB HBM3' --size 16777216 --json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_NE(json.out.find("\"how\":\"measured\""), std::string::npos) << json.out;
  auto bad = test::run_command(g + " best vector_add --db " + db.path +
                               " --device 'NVIDIA A100' --size 524288");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("was not tuned on 'NVIDIA A100'"), std::string::npos) << bad.out;
  auto size = test::run_command(g + " best vector_add --db " + db.path +
                                " --device 'NVIDIA H100 80GB HBM3' --size 12,x");
  EXPECT_NE(size.exit_code, 0);
  EXPECT_NE(size.out.find("is not a problem size"), std::string::npos) << size.out;
}

}  // namespace
}  // namespace gputune::select
