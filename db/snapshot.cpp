#include "db/snapshot.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "db/sqlite.h"
#include "db/store.h"

namespace gputune::db {

namespace fs = std::filesystem;

namespace {

/// A read-only connection of SQLite's C API (a shard is opened only so).
struct ReadOnly {
  sqlite3* db = nullptr;
  ~ReadOnly() { sqlite3_close(db); }
};

std::string hex(std::int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::int64_t pragma_int(sqlite3* db, const std::string& sql, const std::string& shard,
                        const SnapshotWording& w) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  std::int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  std::string msg = sqlite3_errmsg(db);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW)
    throw DbError(
        shard + ": cannot be read as a database (" + msg + ")" + w.consequence + ". Fix: " + w.give,
        rc);
  return v;
}

}  // namespace

int snapshot_database(const std::string& shard, const std::string& copy, const SnapshotWording& w) {
  std::error_code ec;
  if (!fs::is_regular_file(shard, ec))
    throw DbError(shard + ": no such file" + w.consequence + ". Fix: " + w.give);
  if (!is_sqlite_file(shard))
    throw DbError(shard + ": not an SQLite database, so not a gputune database" + w.consequence +
                  ". Fix: " + w.give);
  ReadOnly src;
  int rc = sqlite3_open_v2(shard.c_str(), &src.db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK)
    throw DbError(shard + ": cannot open (" + (src.db ? sqlite3_errmsg(src.db) : "out of memory") +
                      ")" + w.consequence + ". Fix: check the file's permissions",
                  rc);
  sqlite3_busy_timeout(src.db, 10000);
  const std::int64_t app = pragma_int(src.db, "PRAGMA application_id", shard, w);
  const std::int64_t tables = pragma_int(src.db, "SELECT count(*) FROM sqlite_master", shard, w);
  const std::int64_t version = pragma_int(src.db, "PRAGMA user_version", shard, w);
  if (app != Store::kApplicationId)
    throw DbError(shard + ": not a gputune database (application_id " + hex(app) + ", " +
                  std::to_string(tables) + " tables; gputune's is " + hex(Store::kApplicationId) +
                  ")" + w.consequence + ". Fix: " + w.give);
  if (version > Store::kSchemaVersion)
    throw DbError(shard + ": schema version " + std::to_string(version) +
                  " is newer than this gputune's (" + std::to_string(Store::kSchemaVersion) + ")" +
                  w.consequence + ". Fix: " + w.newer);
  if (version < 1)
    throw DbError(shard + ": a gputune database without a schema (user_version " +
                  std::to_string(version) + ")" + w.consequence +
                  ". Fix: give a database gputune has written to");
  {
    ReadOnly dst;
    rc =
        sqlite3_open_v2(copy.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    sqlite3_backup* b =
        rc == SQLITE_OK ? sqlite3_backup_init(dst.db, "main", src.db, "main") : nullptr;
    if (b) {
      rc = sqlite3_backup_step(b, -1);
      sqlite3_backup_finish(b);
    }
    if (!b || rc != SQLITE_DONE)
      throw DbError(shard + ": copying it to " + copy + " failed (" +
                        (dst.db ? sqlite3_errmsg(dst.db) : "out of memory") + ")" + w.consequence +
                        ". Fix: " + w.room,
                    rc);
    sqlite3_stmt* st = nullptr;
    std::string result = "(no answer)";
    if (sqlite3_prepare_v2(dst.db, "PRAGMA quick_check", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      result = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (result != "ok")
      throw DbError(shard + ": the database is damaged (quick_check: " + result + ")" +
                    w.consequence + ". Fix: recover it (sqlite3 .recover) first");
  }
  if (version < Store::kSchemaVersion) Store migrated(copy);  // the copy, never the original
  return static_cast<int>(version);
}

ReadOnlyCopy::ReadOnlyCopy(const std::string& path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = (fs::path(tmp && *tmp ? tmp : "/tmp") / "gputune-read-XXXXXX").string();
  if (!mkdtemp(templ.data()))
    throw DbError(path + ": cannot make a folder for its read-only copy in " +
                  fs::path(templ).parent_path().string() +
                  " (nothing was read). Fix: set TMPDIR to a writable folder");
  folder_ = templ;
  try {
    const std::string copy = (fs::path(folder_) / "copy.db").string();
    version_ = snapshot_database(path, copy,
                                 {" (nothing was read or written)",
                                  "give a gputune database (a run's --db file), a Kernel Tuner "
                                  "cache or a T4 file",
                                  "read it with the gputune that wrote it (or a newer one)",
                                  "free space in TMPDIR for the copy"});
    store_ = std::make_unique<Store>(copy);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(folder_, ec);
    throw;
  }
}

ReadOnlyCopy::~ReadOnlyCopy() {
  store_.reset();
  std::error_code ec;
  fs::remove_all(folder_, ec);
}

}  // namespace gputune::db
