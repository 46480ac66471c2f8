// db/status.h: a measurement's status has one text form, for the database and T4, and nothing
// else gets in.
#include "db/status.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "db/sqlite.h"
#include "db/store.h"
#include "test_util.h"

namespace gputune::db {
namespace {

// A literal that names no status does not compile where it is a constant expression.
static_assert(Status("correct") == Status::kCorrect);
static_assert(Status("compiled").text() == "compiled");
static_assert(!Status::parse("Correct"));

TEST(Status, EveryStatusHasOneTextThatReadsBackAsItself) {
  std::set<std::string_view> texts;
  for (int c = Status::kCorrect; c <= Status::kCompiled; ++c) {
    const Status s(static_cast<Status::Code>(c));
    EXPECT_FALSE(s.text().empty()) << c;
    EXPECT_TRUE(texts.insert(s.text()).second) << s;
    ASSERT_TRUE(Status::parse(s.text())) << s;
    EXPECT_EQ(*Status::parse(s.text()), s);
    EXPECT_EQ(Status(s.str()), s);
  }
  EXPECT_EQ(texts.size(), Status::kTexts.size());
  EXPECT_TRUE(Status().text().empty());
  for (const char* bad : {"", "ok", "Compile", "correct ", "no time"}) {
    EXPECT_FALSE(Status::parse(bad)) << bad;
    EXPECT_EQ(Status{std::string(bad)}, Status::kInvalid) << bad;
    EXPECT_FALSE(Status{std::string(bad)}.valid()) << bad;
  }
}

TEST(Status, TimedAreTheGpuOutcomesAndFailedAllButCorrectAndCompiled) {
  std::set<std::string> timed, failed;
  for (int c = Status::kCorrect; c <= Status::kCompiled; ++c) {
    const Status s(static_cast<Status::Code>(c));
    if (s.timed()) timed.insert(s.str());
    if (s.failed()) failed.insert(s.str());
  }
  EXPECT_EQ(timed, (std::set<std::string>{"correct", "runtime", "correctness", "timeout"}));
  EXPECT_EQ(failed,
            (std::set<std::string>{"compile", "runtime", "correctness", "timeout", "constraints"}));
}

TEST(Status, TheStoreRefusesAMeasurementWithoutOneAndADatabaseWithAnUnknownOne) {
  test::TempDir dir;
  const std::string path = (dir / "g.db").string();
  Store store(path);
  const auto kernel = store.upsert_kernel("k", "h", "source");
  DeviceRecord d;
  d.name = "GPU";
  ContextRecord c;
  c.kernel_id = kernel, c.device_id = store.upsert_device(d), c.label = "1";
  c.problem_size_json = "[1,1,1]";
  MeasurementRecord m;
  m.run_id = store.begin_run(store.upsert_job("k", "/k.json", "{}"), "brute_force", 1);
  m.context_id = store.upsert_context(c), m.variant_id = store.upsert_variant(kernel, "1", "{}");
  EXPECT_THROW(store.add_measurement(m), DbError);
  m.status = Status(std::string("crashed"));
  EXPECT_THROW(store.add_measurement(m), DbError);
  m.status = Status::kRuntime;
  const auto id = store.add_measurement(m);
  ASSERT_EQ(store.measurements(m.run_id).size(), 1u);
  EXPECT_EQ(store.measurements(m.run_id)[0].status, Status::kRuntime);
  // The schema holds the same list (a CHECK on the column), so no other text gets in either.
  EXPECT_THROW(Statement(store.db(),
                         "UPDATE measurements SET status='crashed' WHERE id=" + std::to_string(id))
                   .step(),
               DbError);
  Statement schema(store.db(), "SELECT sql FROM sqlite_master WHERE name='measurements'");
  ASSERT_TRUE(schema.step());
  std::string list = "status IN (";
  for (std::string_view t : Status::kTexts) list += "'" + std::string(t) + "',";
  list.back() = ')';
  EXPECT_NE(schema.text(0).find(list), std::string::npos) << schema.text(0);
}

// A run's and a queued job's status meet text only through text() and parse_*(): a misspelt
// status ("complete", "canceled") cannot be compared or stored.
static_assert(!std::is_convertible_v<RunStatus, std::string>);
static_assert(!std::is_convertible_v<const char*, RunStatus>);
static_assert(!std::is_convertible_v<std::string, RunStatus>);
static_assert(!std::is_convertible_v<QueueStatus, std::string>);
static_assert(!std::is_convertible_v<const char*, QueueStatus>);
static_assert(!std::is_convertible_v<RunStatus, QueueStatus>);
static_assert(text(RunStatus::kNoDevice) == "no_device");
static_assert(parse_queue_status("cancelled") == QueueStatus::kCancelled);
static_assert(!parse_run_status("Done") && !parse_queue_status("canceled"));

// The schema's CHECK on `table`.status lists exactly `texts`, in order.
void expect_schema_lists(Store& store, const std::string& table,
                         const std::vector<std::string_view>& texts) {
  Statement schema(store.db(), "SELECT sql FROM sqlite_master WHERE name='" + table + "'");
  ASSERT_TRUE(schema.step());
  std::string list = "status IN (";
  for (std::string_view t : texts) list += "'" + std::string(t) + "',";
  list.back() = ')';
  EXPECT_NE(schema.text(0).find(list), std::string::npos) << schema.text(0);
}

TEST(Status, RunAndQueueStatusesAreTheSchemasAndReadBackAsStored) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  std::vector<std::string_view> run_texts, queue_texts;
  for (int i = 0; i <= static_cast<int>(RunStatus::kImported); ++i) {
    const auto s = static_cast<RunStatus>(i);
    run_texts.push_back(text(s));
    EXPECT_EQ(parse_run_status(text(s)), s) << text(s);
  }
  for (int i = 0; i <= static_cast<int>(QueueStatus::kNoDevice); ++i) {
    const auto s = static_cast<QueueStatus>(i);
    queue_texts.push_back(text(s));
    EXPECT_EQ(parse_queue_status(text(s)), s) << text(s);
  }
  expect_schema_lists(store, "runs", run_texts);
  expect_schema_lists(store, "queue", queue_texts);

  const auto job = store.upsert_job("k", "/k.json", "{}");
  const auto run = store.begin_run(job, "brute_force", 1);
  EXPECT_EQ(store.run(run)->status, RunStatus::kRunning);
  for (int i = 0; i <= static_cast<int>(RunStatus::kImported); ++i) {
    store.finish_run(run, static_cast<RunStatus>(i), "m");
    EXPECT_EQ(store.run(run)->status, static_cast<RunStatus>(i));
    EXPECT_EQ(store.runs(1).at(0).status, static_cast<RunStatus>(i));
  }
  QueueItem item;
  item.uid = random_uid(), item.name = "k";
  const auto queued = store.enqueue(item);
  EXPECT_EQ(store.queue_item(queued)->status, QueueStatus::kQueued);
  store.finish_queue(queued, QueueStatus::kNoDevice, "no GPU");
  EXPECT_EQ(store.queue_item(queued)->status, QueueStatus::kNoDevice);
}

TEST(Status, ARunWithAStatusOfNoKnownTextIsAnErrorThatNamesIt) {
  test::TempDir dir;
  Store store((dir / "g.db").string());
  const auto run = store.begin_run(store.upsert_job("k", "/k.json", "{}"), "brute_force", 1);
  // Written past the schema's CHECK, as another program might.
  Statement(store.db(), "PRAGMA ignore_check_constraints=1").run();
  Statement(store.db(), "UPDATE runs SET status='complete' WHERE id=" + std::to_string(run)).run();
  try {
    store.run(run);
    FAIL() << "read a run whose status names nothing";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("'complete'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gputune::db
