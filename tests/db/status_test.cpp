// db/status.h: a measurement's status has one text form, for the database and T4, and nothing
// else gets in.
#include "db/status.h"

#include <gtest/gtest.h>

#include <set>

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
    if (s.timed()) timed.insert(s);
    if (s.failed()) failed.insert(s);
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
  m.status = std::string("crashed");
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

}  // namespace
}  // namespace gputune::db
