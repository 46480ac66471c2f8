// The cache folder's housekeeping: sizes, the limit, least-recently-used trimming, and that a
// cache hit renews an entry's last use.
#include "cuda/cache_admin.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>

#include "cuda/nvrtc.h"
#include "pruner/traffic.h"
#include "test_util.h"
#include "tuner/model/predict.h"
#include "variants/hash.h"
#include "variants/job.h"

namespace gputune::tuner {
namespace {

namespace fs = std::filesystem;

TEST(CacheAdmin, SizesReadAndWrite) {
  EXPECT_EQ(cuda::parse_size("0"), 0u);
  EXPECT_EQ(cuda::parse_size("123"), 123u);
  EXPECT_EQ(cuda::parse_size("64k"), 64u << 10);
  EXPECT_EQ(cuda::parse_size("500M"), 500ull << 20);
  EXPECT_EQ(cuda::parse_size("500MB"), 500ull << 20);
  EXPECT_EQ(cuda::parse_size("10G"), 10ull << 30);
  EXPECT_EQ(cuda::parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(cuda::parse_size("2t"), 2ull << 40);
  for (const char* bad : {"", "G", "-1", "1.2.3", "10Q", "10 G", "ten", "1e3", "."})
    EXPECT_FALSE(cuda::parse_size(bad)) << bad;
  EXPECT_EQ(cuda::format_size(1000), "1000 B");
  EXPECT_EQ(cuda::format_size(1536), "1.5 KiB");
  EXPECT_EQ(cuda::format_size(10ull << 30), "10.0 GiB");
}

/// A fake cache folder: entries with the names the caches write, their ages set by hand.
struct FakeCache {
  test::TempDir dir;
  int next = 0;
  std::string key() {
    return sha256_hex("entry " + std::to_string(next++));  // 64 lowercase hex digits
  }
  static void age(const fs::path& f, int seconds_ago) {
    fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
  }
  /// A cubin entry (.cubin + .json) of about `kib` KiB, last used `seconds_ago`.
  std::string cubin(int kib, int seconds_ago) {
    const std::string k = key();
    for (const char* ext : {".cubin", ".json"}) {
      const fs::path f = dir / k.substr(0, 2) / (k + ext);
      fs::create_directories(f.parent_path());
      test::write_file(f, std::string(static_cast<size_t>(kib) * 512, 'c'));
      age(f, seconds_ago);
    }
    return k;
  }
  std::string traffic(int kib, int seconds_ago) {
    const std::string k = key();
    const fs::path f = dir / "traffic" / k.substr(0, 2) / (k + ".json");
    fs::create_directories(f.parent_path());
    test::write_file(f, std::string(static_cast<size_t>(kib) * 1024, 't'));
    age(f, seconds_ago);
    return k;
  }
  bool has_cubin(const std::string& k) const {
    return fs::exists(dir / k.substr(0, 2) / (k + ".cubin")) ||
           fs::exists(dir / k.substr(0, 2) / (k + ".json"));
  }
  bool has_traffic(const std::string& k) const {
    return fs::exists(dir / "traffic" / k.substr(0, 2) / (k + ".json"));
  }
};

TEST(CacheAdmin, TrimRemovesAbandonedWritesThenTheLeastRecentlyUsedAndNothingElse) {
  FakeCache c;
  const std::string old_cubin = c.cubin(64, 5000), old_traffic = c.traffic(64, 4000),
                    mid_cubin = c.cubin(64, 3000), new_traffic = c.traffic(64, 100),
                    new_cubin = c.cubin(64, 10);
  // Temporary files of writes: one abandoned two hours ago, one in progress.
  const std::string k = c.key();
  const fs::path shard = c.dir / k.substr(0, 2);
  fs::create_directories(shard);
  const fs::path abandoned = shard / (k + ".cubin.tmp123-456"),
                 writing = shard / (k + ".json.tmp7-8");
  test::write_file(abandoned, std::string(4096, 'a'));
  FakeCache::age(abandoned, 7200);
  test::write_file(writing, std::string(4096, 'w'));
  // Files that are not the caches': a user's file, an entry-like name in a folder not ours, a
  // name of the wrong shard, an upper-case key. None of them is ever touched or counted.
  const fs::path mine = c.dir / "notes.txt", foreign = c.dir / "src" / (k + ".cubin"),
                 wrong_shard = c.dir / "ff" / (std::string("00") + k.substr(2) + ".cubin"),
                 upper = shard / (k.substr(0, 2) + std::string(62, 'A') + ".json");
  fs::create_directories(foreign.parent_path());
  fs::create_directories(wrong_shard.parent_path());
  for (const fs::path& f : {mine, foreign, wrong_shard, upper}) {
    test::write_file(f, std::string(100000, 'u'));
    FakeCache::age(f, 99999);
  }

  const cuda::CacheUsage u = cuda::cache_usage(c.dir.path());
  EXPECT_EQ(u.cubins.entries, 3u);
  EXPECT_EQ(u.traffic.entries, 2u);
  EXPECT_EQ(u.abandoned.entries, 1u);  // the write in progress is not counted
  EXPECT_EQ(u.other_files, 4u);
  EXPECT_GE(u.cubins.bytes, 3u * 64 * 1024);  // disk usage: at least the bytes written
  EXPECT_LT(u.cubins.bytes, 3u * 64 * 1024 + 6 * 8192);
  EXPECT_LT(u.oldest_use, u.newest_use);
  EXPECT_NEAR(static_cast<double>(u.newest_use - u.oldest_use), 4990, 5);

  // Room for three entries: the abandoned write, the oldest cubin and the oldest report go.
  const cuda::TrimResult r = cuda::trim_cache(c.dir.path(), 3 * 64 * 1024 + 3 * 8192);
  EXPECT_EQ(r.removed_entries, 3u);
  EXPECT_EQ(r.before.bytes(), u.bytes());
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(writing));
  EXPECT_FALSE(c.has_cubin(old_cubin));
  EXPECT_FALSE(c.has_traffic(old_traffic));
  EXPECT_TRUE(c.has_cubin(mid_cubin));
  EXPECT_TRUE(c.has_traffic(new_traffic));
  EXPECT_TRUE(c.has_cubin(new_cubin));
  for (const fs::path& f : {mine, foreign, wrong_shard, upper}) EXPECT_TRUE(fs::exists(f)) << f;
  const cuda::CacheUsage after = cuda::cache_usage(c.dir.path());
  EXPECT_EQ(after.bytes(), r.after.bytes());
  EXPECT_EQ(after.cubins.entries, 2u);
  EXPECT_EQ(after.traffic.entries, 1u);
  EXPECT_EQ(r.removed_bytes + after.bytes(), u.bytes());

  // Under the target already: nothing goes. Target 0 (`gputune cache --clear`): every entry.
  EXPECT_EQ(cuda::trim_cache(c.dir.path(), 1ull << 30).removed_entries, 0u);
  EXPECT_EQ(cuda::trim_cache(c.dir.path(), 0).removed_entries, 3u);
  EXPECT_EQ(cuda::cache_usage(c.dir.path()).bytes(), 0u);
  for (const fs::path& f : {mine, foreign, wrong_shard, upper, writing})
    EXPECT_TRUE(fs::exists(f)) << f;
}

TEST(CacheAdmin, AHitRenewsTheEntrysLastUse) {
  test::TempDir dir;
  cuda::CubinCache cache(dir.path());
  cuda::CompiledVariant v;
  v.ok = true;
  v.cubin = "not really an ELF";
  v.cubin_hash = sha256_hex(v.cubin);
  v.key = sha256_hex("a variant");
  v.lowered_name = "k";
  cache.put(v);
  const fs::path cubin = dir / v.key.substr(0, 2) / (v.key + ".cubin");
  const fs::path json = dir / v.key.substr(0, 2) / (v.key + ".json");
  FakeCache::age(cubin, 5000);
  FakeCache::age(json, 5000);
  const auto before = cuda::cache_usage(dir.path()).newest_use;
  ASSERT_TRUE(cache.get(v.key));
  EXPECT_GT(cuda::cache_usage(dir.path()).newest_use, before + 4000);

  TrafficCache traffic{dir.path()};
  pruner::TrafficReport report;
  report.parsed = true;
  const std::string key = sha256_hex("a traffic input");
  traffic.put(key, report);
  const fs::path file = dir / "traffic" / key.substr(0, 2) / (key + ".json");
  ASSERT_TRUE(fs::exists(file));
  FakeCache::age(file, 9000);
  FakeCache::age(cubin, 9000);
  FakeCache::age(json, 9000);
  ASSERT_TRUE(traffic.get(key));
  // The report just read is the newest; the cubin, not read since, is the oldest.
  const cuda::CacheUsage u = cuda::cache_usage(dir.path());
  EXPECT_NEAR(static_cast<double>(u.newest_use - u.oldest_use), 9000, 5);
  EXPECT_EQ(cuda::trim_cache(dir.path(), u.traffic.bytes).removed_entries, 1u);
  EXPECT_TRUE(fs::exists(file));
  EXPECT_FALSE(fs::exists(cubin));
}

struct Env {
  explicit Env(const char* value) {
    if (value)
      setenv("GPUTUNE_CACHE_MAX_SIZE", value, 1);
    else
      unsetenv("GPUTUNE_CACHE_MAX_SIZE");
  }
  ~Env() { unsetenv("GPUTUNE_CACHE_MAX_SIZE"); }
};

TEST(CacheAdmin, TheLimitComesFromTheEnvironmentThenTheFolderThenTheDefault) {
  test::TempDir dir;
  {
    Env env(nullptr);
    EXPECT_EQ(cuda::cache_limit(dir.path()).bytes, cuda::kDefaultCacheLimitBytes);
    EXPECT_EQ(cuda::cache_limit(dir.path()).source, "default");
    cuda::set_cache_limit(dir.path(), 3 << 20);
    EXPECT_EQ(cuda::cache_limit(dir.path()).bytes, 3u << 20);
    EXPECT_EQ(cuda::cache_limit(dir.path()).source, (dir / cuda::kCacheLimitFile).string());
    test::write_file(dir / cuda::kCacheLimitFile, "lots\n");
    try {
      (void)cuda::cache_limit(dir.path());
      ADD_FAILURE() << "a max-size file that is not a size was accepted";
    } catch (const JobError& e) {
      EXPECT_EQ(e.file, (dir / cuda::kCacheLimitFile).string());
      EXPECT_NE(e.problem.find("'lots'"), std::string::npos) << e.problem;
      EXPECT_NE(e.fix.find("gputune cache --max-size"), std::string::npos) << e.fix;
    }
  }
  {
    Env env("2G");
    EXPECT_EQ(cuda::cache_limit(dir.path()).bytes, 2ull << 30);  // over the file
    EXPECT_EQ(cuda::cache_limit(dir.path()).source, "GPUTUNE_CACHE_MAX_SIZE");
  }
  {
    Env env("big");
    try {
      (void)cuda::cache_limit(dir.path());
      ADD_FAILURE() << "GPUTUNE_CACHE_MAX_SIZE=big was accepted";
    } catch (const JobError& e) {
      EXPECT_EQ(e.field, "GPUTUNE_CACHE_MAX_SIZE");
    }
  }
}

// After a command: only when this process wrote to the cache, only when over the limit, down to
// 90% of it; a bad limit is reported, not thrown, and removes nothing.
TEST(CacheAdmin, TheTrimAfterACommandLooksOnlyWhenItWroteAndKeepsTenPercentRoom) {
  FakeCache c;
  for (int i = 0; i < 10; ++i) c.cubin(64, 1000 - i);  // 64 KiB each, the first the oldest
  const std::uint64_t full = cuda::cache_usage(c.dir.path()).bytes();
  Env env(std::to_string(full / 2).c_str());
  std::ostringstream log;
  if (cuda::cache_bytes_written() == 0) {  // this test's process, on its own under ctest
    cuda::trim_cache_after_use(c.dir.path(), log);
    EXPECT_EQ(cuda::cache_usage(c.dir.path()).cubins.entries, 10u) << "trimmed without a write";
  }
  cuda::count_cache_write(1);
  cuda::trim_cache_after_use(fs::path(), log);  // caching off: nothing to do
  EXPECT_EQ(log.str(), "");
  cuda::trim_cache_after_use(c.dir.path(), log);
  const cuda::CacheUsage u = cuda::cache_usage(c.dir.path());
  EXPECT_LE(u.bytes(), full / 2 / 10 * 9);
  EXPECT_EQ(u.cubins.entries, 4u);  // 5 fit in half, 4 in 90% of it
  EXPECT_NE(log.str().find("removed 6 entries"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("GPUTUNE_CACHE_MAX_SIZE"), std::string::npos) << log.str();

  Env bad("half");
  std::ostringstream bad_log;
  cuda::trim_cache_after_use(c.dir.path(), bad_log);
  EXPECT_NE(bad_log.str().find("not trimmed"), std::string::npos) << bad_log.str();
  EXPECT_NE(bad_log.str().find("'half' is not a size"), std::string::npos) << bad_log.str();
  EXPECT_EQ(cuda::cache_usage(c.dir.path()).cubins.entries, 4u);
}

}  // namespace
}  // namespace gputune::tuner
