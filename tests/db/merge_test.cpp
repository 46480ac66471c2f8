// db/merge: `gputune db merge OUT SHARD...` is idempotent and order-free (every order of three
// shards, twice, with a shard that is a copy of another plus more, gives one result: the rows by
// their content identities and the winners), moves every table but the queue, never writes a
// shard, migrates an older shard's copy, refuses a newer or foreign one with nothing written, and
// a kill -9 midway leaves OUT as it was or fully merged.
#include "db/merge.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "db/store.h"
#include "test_util.h"

namespace gputune::db {
namespace {

namespace fs = std::filesystem;

/// One text line per row, by content identities (no local id), sorted: two databases with the
/// same dump hold the same data. updated_at of winners is left out (when it was written here).
std::string dump(const std::string& path) {
  Store store(path);
  const char* queries[] = {
      "SELECT 'device '||uid||name||cc_major||cc_minor||sm_count||total_mem||source FROM devices",
      "SELECT 'kernel '||hash||name||quote(source)||' variants '||variant_count||' counted '||"
      "(SELECT count(*) FROM variants v WHERE v.kernel_id=kernels.id) FROM kernels",
      "SELECT 'job '||hash||name||file FROM jobs",
      "SELECT 'context '||c.hash||k.hash||d.uid||label||problem_size||input_values||arch||"
      "driver_version||toolkit_version||nvrtc_version FROM contexts c JOIN kernels k ON "
      "k.id=c.kernel_id JOIN devices d ON d.id=c.device_id",
      "SELECT 'variant '||v.hash||k.hash||config_key||params FROM variants v JOIN kernels k ON "
      "k.id=v.kernel_id",
      "SELECT 'run '||r.uid||j.hash||strategy||status||message||total||done||started_at||"
      "quote(finished_at)||quote(budget)||quote(seconds_spent)||naive_fallback FROM runs r "
      "JOIN jobs j ON j.id=r.job_id",
      "SELECT 'measurement '||r.uid||c.hash||v.hash||m.status||reason||log||quote(time_ms)||"
      "samples||quote(compile_ms)||quote(registers)||quote(static_smem)||quote(local_bytes)||"
      "quote(spill_bytes)||quote(occupancy)||quote(gflops)||quote(gbps)||cubin_hash||grid||"
      "block||created_at||quote(predicted_ms)||is_default FROM measurements m JOIN runs r ON "
      "r.id=m.run_id JOIN contexts c ON c.id=m.context_id JOIN variants v ON v.id=m.variant_id",
      "SELECT 'count '||r.uid||c.hash||n.status||n.n FROM measurement_counts n JOIN runs r ON "
      "r.id=n.run_id JOIN contexts c ON c.id=n.context_id WHERE n.n>0",
      "SELECT 'winner '||c.hash||r.uid||v.hash||m.created_at||m.time_ms||w.provisional||"
      "quote((SELECT v2.hash||x.created_at FROM measurements x JOIN variants v2 ON "
      "v2.id=x.variant_id WHERE x.id=w.replaced_measurement_id)) FROM winners w JOIN contexts c "
      "ON c.id=w.context_id JOIN measurements m ON m.id=w.measurement_id JOIN runs r ON "
      "r.id=m.run_id JOIN variants v ON v.id=m.variant_id",
      "SELECT 'calibration '||d.uid||quote(r.uid)||samples||rms_log_error||params_json||"
      "m.created_at FROM model_calibrations m JOIN devices d ON d.id=m.device_id LEFT JOIN runs "
      "r ON r.id=m.run_id",
      "SELECT 'plan '||r.uid||plan_json FROM run_plans p JOIN runs r ON r.id=p.run_id",
  };
  std::vector<std::string> lines;
  for (const char* q : queries) {
    Statement s(store.db(), q);
    while (s.step()) lines.push_back(s.text(0));
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

std::string integrity(const std::string& path) {
  Store store(path);
  Statement s(store.db(), "PRAGMA integrity_check");
  s.step();
  return s.text(0);
}

/// A shard as a machine of a SLURM batch writes it: the shared kernel, device and job, contexts
/// "small" and "large" (and its own, `extra`), one run of `n` measurements drawn from `seed`
/// (correct and failed), the winner named as a run does, a calibration and a plan.
void add_run(const std::string& path, unsigned seed, int n, const std::string& extra = "",
             double offset = 0, bool provisional_last = false) {
  Store store(path);
  Transaction t(store.db());
  auto kernel = store.upsert_kernel("matmul", "kernelhash", "// source");
  DeviceRecord d;
  d.name = "NVIDIA H100", d.cc_major = 9, d.sm_count = 132;
  auto dev = store.upsert_device(d);
  auto job = store.upsert_job("matmul", "/home/" + std::to_string(seed) + "/matmul.json", "{}");
  std::vector<std::int64_t> contexts;
  for (const std::string& label : {std::string("small"), std::string("large"), extra}) {
    if (label.empty()) continue;
    ContextRecord c;
    c.kernel_id = kernel, c.device_id = dev, c.label = label, c.arch = "sm_90";
    c.problem_size_json = "[\"" + label + "\"]";
    contexts.push_back(store.upsert_context(c));
  }
  auto run = store.begin_run(job, "brute_force", n);
  std::mt19937 rng(seed);
  std::vector<std::optional<std::int64_t>> best(contexts.size());
  std::vector<double> best_t(contexts.size(), 1e300);
  for (int i = 0; i < n; ++i) {
    const std::size_t ci = static_cast<std::size_t>(i) % contexts.size();
    const int v = static_cast<int>(rng() % 20);
    MeasurementRecord m;
    m.run_id = run, m.context_id = contexts[ci];
    m.variant_id =
        store.upsert_variant(kernel, std::to_string(v), "{\"a\": " + std::to_string(v) + "}");
    m.status = rng() % 4 ? Status::kCorrect : Status::kCompile;
    m.is_default = v == 0;
    if (m.status == Status::kCorrect) {
      m.time_ms = offset + 1.0 + static_cast<double>(rng() % 1000) / 100.0;
      m.samples_ms = {*m.time_ms, *m.time_ms + 0.01};
      if (!m.is_default) m.predicted_ms = *m.time_ms * 1.1;
    } else {
      m.reason = "error " + std::to_string(v);
    }
    auto id = store.add_measurement(m);
    if (m.is_default && m.time_ms) store.set_predicted_ms(id, *m.time_ms * 0.9);
    if (m.time_ms && *m.time_ms < best_t[ci]) best_t[ci] = *m.time_ms, best[ci] = id;
  }
  for (std::size_t c = 0; c < contexts.size(); ++c)
    if (best[c])
      store.offer_winner(contexts[c], *best[c], provisional_last && c + 1 == contexts.size());
  store.save_calibration(dev, run, n, 0.1 * seed, "{\"seed\": " + std::to_string(seed) + "}");
  RunPlan plan;
  plan.chosen = {"1", "2"}, plan.summary = "seed " + std::to_string(seed);
  store.save_run_plan(run, plan);
  store.update_run_progress(run, n, 1.5);
  store.finish_run(run, db::RunStatus::kDone, "");
  t.commit();
}

std::string read_bytes(const std::string& p) { return test::read_file(p); }

struct Shards {
  test::TempDir dir;
  std::string a = (dir / "a.db").string(), b = (dir / "b.db").string(), c = (dir / "c.db").string();
  Shards() {
    add_run(a, 1, 60);
    fs::copy_file(a, b);  // b: a copy of a, then a run more (a partial overlap)
    add_run(b, 2, 40, "b-only");
    add_run(c, 3, 50, "", -0.5, true);  // faster, and provisional in its last context
    add_run(c, 4, 30, "", 5.0);         // slower: c's provisional winner stays
  }
};

TEST(Merge, AnyOrderTwiceAndPartialOverlapsGiveOneResult) {
  Shards s;
  const auto shard_bytes = read_bytes(s.a) + read_bytes(s.b) + read_bytes(s.c);
  std::vector<std::string> order = {s.a, s.b, s.c};
  std::sort(order.begin(), order.end());
  std::string first;
  int n = 0;
  do {
    // One shard per invocation, in this order, each twice.
    const std::string out = (s.dir / ("one-" + std::to_string(n) + ".db")).string();
    for (const std::string& shard : order) merge_shards(out, {shard});
    for (const std::string& shard : order) merge_shards(out, {shard});
    // All in one invocation, in this order.
    const std::string all = (s.dir / ("all-" + std::to_string(n++) + ".db")).string();
    merge_shards(all, order);
    const std::string d = dump(out);
    if (first.empty()) first = d;
    EXPECT_EQ(d, first) << "order " << order[0] << " " << order[1] << " " << order[2];
    EXPECT_EQ(dump(all), first);
    EXPECT_EQ(integrity(out), "ok");
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(n, 6);
  // Merging a merged database, or it into itself, changes nothing either.
  const std::string out = (s.dir / "one-0.db").string();
  auto again = merge_shards(out, {(s.dir / "all-5.db").string(), out, s.b});
  EXPECT_EQ(again.measurements_added, 0);
  EXPECT_EQ(again.winners_changed, 0);
  EXPECT_TRUE(again.shards[1].skipped);
  EXPECT_EQ(dump(out), first);
  // Shards are never written.
  EXPECT_EQ(read_bytes(s.a) + read_bytes(s.b) + read_bytes(s.c), shard_bytes);

  // Everything came along once: b holds a's run, so 60 + 40 + 50 + 30.
  Store store(out);
  Statement m(store.db(),
              "SELECT count(*), (SELECT count(*) FROM runs), (SELECT count(*) FROM "
              "model_calibrations), (SELECT count(*) FROM run_plans), (SELECT sum(n) "
              "FROM measurement_counts) FROM measurements");
  ASSERT_TRUE(m.step());
  EXPECT_EQ(m.int64(0), 180);
  EXPECT_EQ(m.int64(1), 4);
  EXPECT_EQ(m.int64(2), 4);
  EXPECT_EQ(m.int64(3), 4);
  EXPECT_EQ(m.int64(4), 180);
}

// Where shards name different winners, the faster one wins (a re-measured one before a
// provisional one) and the other stays as history.
TEST(Merge, TheFasterWinnerWinsAndTheOtherStaysAsHistory) {
  Shards s;
  {
    Store c(s.c);
    ASSERT_TRUE(c.winners("matmul", "large").at(0).provisional);
  }
  const std::string out = (s.dir / "out.db").string();
  merge_shards(out, {s.a, s.c});
  Store a(s.a), c(s.c), o(out);
  for (const char* label : {"small", "large"}) {
    auto wa = a.winners("matmul", label), wc = c.winners("matmul", label),
         wo = o.winners("matmul", label);
    ASSERT_EQ(wa.size(), 1u);
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wo.size(), 1u);
    const WinnerRow& expected = wa[0].provisional != wc[0].provisional
                                    ? (wa[0].provisional ? wc[0] : wa[0])
                                    : (wc[0].time_ms < wa[0].time_ms ? wc[0] : wa[0]);
    const WinnerRow& loser = &expected == &wa[0] ? wc[0] : wa[0];
    EXPECT_EQ(wo[0].time_ms, expected.time_ms) << label;
    EXPECT_EQ(wo[0].provisional, expected.provisional) << label;
    EXPECT_EQ(wo[0].config_key, expected.config_key) << label;
    Statement h(o.db(), "SELECT count(*) FROM measurements WHERE status='correct' AND time_ms=?");
    h.bind(1, loser.time_ms);
    ASSERT_TRUE(h.step());
    EXPECT_GE(h.int64(0), 1) << "the losing winner stays as a measurement";
  }
}

// A shard copied while its run went on, and the later copy: the run's rows are the key-matched
// union (not twice the early ones), its state the later one, and a prediction the default
// configuration got after its row was stored comes along, in either order.
TEST(Merge, AShardCopiedMidRunAndItsLaterCopyGiveOneResult) {
  test::TempDir dir;
  const std::string early = (dir / "early.db").string(), late = (dir / "late.db").string();
  add_run(late, 21, 30);
  std::int64_t default_row = 0;
  {
    Store store(late);
    MeasurementRecord m;
    m.run_id = 1, m.context_id = 1, m.status = Status::kCorrect, m.time_ms = 4.0,
    m.samples_ms = {4.0};
    m.variant_id = store.upsert_variant(1, "0", "{\"a\": 0}"), m.is_default = true;
    default_row = store.add_measurement(m);
    store.update_run_progress(1, 31, 2.0);
  }
  fs::copy_file(late, early);
  {
    Store store(late);
    store.set_predicted_ms(default_row, 3.5);
    for (int i = 0; i < 10; ++i) {
      MeasurementRecord m;
      m.run_id = 1, m.context_id = 2, m.status = Status::kCorrect, m.time_ms = 0.5 + 0.01 * i;
      m.samples_ms = {*m.time_ms};
      m.variant_id = store.upsert_variant(1, "late" + std::to_string(i), "{}");
      store.offer_winner(2, store.add_measurement(m));
    }
    store.update_run_progress(1, 41, 3.0);
  }
  const std::string one = (dir / "one.db").string(), two = (dir / "two.db").string();
  merge_shards(one, {early, late});
  merge_shards(two, {late});
  merge_shards(two, {early});
  merge_shards(two, {late});
  EXPECT_EQ(dump(one), dump(two));
  EXPECT_EQ(dump(one), dump(late)) << "the later copy holds everything";
  Store o(one);
  Statement m(o.db(),
              "SELECT count(*), (SELECT done FROM runs), (SELECT count(predicted_ms) "
              "FROM measurements WHERE time_ms=4.0 AND is_default=1) FROM measurements");
  ASSERT_TRUE(m.step());
  EXPECT_EQ(m.int64(0), 41);
  EXPECT_EQ(m.int64(1), 41);
  EXPECT_EQ(m.int64(2), 1);
}

// Schema 9 (before provisional winners), written as gputune 9 wrote it.
void write_schema9_shard(const std::string& path) {
  Database db(path);
  const auto& m = schema_migrations();
  for (int i = 0; i < 9; ++i) db.exec(m[static_cast<std::size_t>(i)]);
  db.exec("PRAGMA application_id=" + std::to_string(Store::kApplicationId));
  db.exec("PRAGMA user_version=9");
  db.exec(
      "INSERT INTO devices VALUES(1,'olddev','Old GPU',8,0,108,1,'driver');"
      "INSERT INTO kernels VALUES(1,'oldkernel','old',NULL);"
      "INSERT INTO jobs VALUES(1,'oldjob','old','old.json','{}');"
      "INSERT INTO runs(id,uid,job_id,strategy,status) VALUES(1,'oldrun',1,'brute_force','done');"
      "INSERT INTO contexts VALUES(1,'oldctx',1,1,'x','[1]','{}','sm_80',0,'','');"
      "INSERT INTO variants VALUES(1,'oldvar',1,'1','{}');"
      "INSERT INTO measurements(id,run_id,context_id,variant_id,status,time_ms,samples) "
      "VALUES(1,1,1,1,'correct',2.5,'[2.5]');"
      "INSERT INTO winners(context_id,measurement_id) VALUES(1,1);");
}

TEST(Merge, AnOlderShardIsMigratedInACopyAndANewerOneIsRefused) {
  test::TempDir dir;
  const std::string old = (dir / "old.db").string(), out = (dir / "out.db").string();
  write_schema9_shard(old);
  const std::string before = read_bytes(old);
  auto rep = merge_shards(out, {old});
  ASSERT_EQ(rep.shards.size(), 1u);
  EXPECT_EQ(rep.shards[0].schema_version, 9);
  EXPECT_TRUE(rep.shards[0].migrated);
  EXPECT_EQ(rep.measurements_added, 1);
  EXPECT_EQ(read_bytes(old), before) << "the shard itself is not migrated";
  {
    Store o(out);
    auto w = o.winners("old");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].time_ms, 2.5);
  }

  const std::string newer = (dir / "newer.db").string();
  add_run(newer, 5, 10);
  Database(newer).exec("PRAGMA user_version=" + std::to_string(Store::kSchemaVersion + 1));
  const std::string out_before = dump(out);
  try {
    merge_shards(out, {newer});
    FAIL() << "a newer schema was merged";
  } catch (const DbError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(newer), std::string::npos) << what;
    EXPECT_NE(what.find("schema version " + std::to_string(Store::kSchemaVersion + 1)),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("newer than this gputune's"), std::string::npos) << what;
    EXPECT_NE(what.find("Fix:"), std::string::npos) << what;
  }
  EXPECT_EQ(dump(out), out_before);
}

TEST(Merge, AForeignFileIsRefusedAndNothingIsWritten) {
  Shards s;
  const std::string text = (s.dir / "notes.txt").string(), other = (s.dir / "other.db").string(),
                    out = (s.dir / "out.db").string(), fresh = (s.dir / "fresh.db").string();
  test::write_file(text, "not a database at all\n");
  Database(other).exec("CREATE TABLE t(x); INSERT INTO t VALUES(1);");
  merge_shards(out, {s.a});
  const std::string out_before = read_bytes(out);
  for (const std::string& bad : {text, other, (s.dir / "missing.db").string()}) {
    for (const std::string& target : {out, fresh}) {
      try {
        merge_shards(target, {s.b, bad, s.c});  // good shards around it: none is merged
        FAIL() << bad << " was merged";
      } catch (const DbError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(bad), std::string::npos) << what;
        EXPECT_NE(what.find("nothing was written"), std::string::npos) << what;
        EXPECT_NE(what.find("Fix:"), std::string::npos) << what;
      }
    }
    EXPECT_EQ(read_bytes(out), out_before);
    EXPECT_FALSE(fs::exists(fresh));
  }
  // OUT itself foreign: refused, untouched.
  try {
    merge_shards(other, {s.a});
    FAIL();
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("not a gputune database"), std::string::npos) << e.what();
  }
  // No copies are left beside OUT.
  for (const auto& e : fs::directory_iterator(s.dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".merge-"), std::string::npos) << e.path();
}

// More shards than SQLite attaches at once (10): staged, with the same result.
TEST(Merge, MoreShardsThanSQLiteAttachesGiveTheSameResult) {
  test::TempDir dir;
  std::vector<std::string> shards;
  for (unsigned i = 0; i < 12; ++i) {
    shards.push_back((dir / ("s" + std::to_string(i) + ".db")).string());
    add_run(shards.back(), 10 + i, 8, i % 3 ? "" : "extra", 0.01 * i);
  }
  const std::string all = (dir / "all.db").string(), one = (dir / "one.db").string();
  auto rep = merge_shards(all, shards);
  EXPECT_EQ(rep.measurements_added, 96);
  EXPECT_EQ(rep.measurements_total, 96);
  for (auto it = shards.rbegin(); it != shards.rend(); ++it) merge_shards(one, {*it});
  EXPECT_EQ(dump(all), dump(one));
}

// kill -9 of `gputune db merge` at points through its run: OUT is as it was or fully merged.
TEST(Merge, AKillDuringTheMergeLeavesOutAsItWasOrFullyMerged) {
  test::TempDir dir;
  const std::string small = (dir / "small.db").string(), big = (dir / "big.db").string(),
                    out = (dir / "out.db").string(), before = (dir / "before.db").string(),
                    after = (dir / "after.db").string();
  add_run(small, 7, 20);
  add_run(big, 8, 40000, "big");
  add_run(big, 9, 20000);
  merge_shards(before, {small});
  const std::string before_dump = dump(before);
  fs::copy_file(before, after);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_gputune("db merge -q '" + after + "' '" + big + "'");
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string after_dump = dump(after);
  ASSERT_NE(after_dump, before_dump);
  int as_before = 0, as_after = 0;
  for (double fraction : {0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 1.5}) {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(out + suffix);
    fs::copy_file(before, out);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      freopen("/dev/null", "w", stdout);
      execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "db", "merge", "-q", out.c_str(), big.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(full * fraction));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(integrity(out), "ok") << fraction;
    const std::string d = dump(out);
    EXPECT_TRUE(d == before_dump || d == after_dump) << "killed at " << fraction << " of the merge";
    as_before += d == before_dump, as_after += d == after_dump;
    // Merging again completes it.
    merge_shards(out, {big});
    EXPECT_EQ(dump(out), after_dump) << fraction;
  }
  std::cout << "kills that left OUT as it was: " << as_before << ", fully merged: " << as_after
            << " (an uninterrupted merge: " << full << " s)\n";
  EXPECT_GE(as_before, 1) << "no kill landed during the merge";
  EXPECT_GE(as_after, 1);
}

}  // namespace
}  // namespace gputune::db
