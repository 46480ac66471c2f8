#include "db/sqlite.h"

#include <sqlite3.h>

#include <cstdio>

namespace gputune::db {

namespace {

/// A failed call's message: the file, what failed and SQLite's words; for the failures a user
/// fixes (a full disk, a read-only file or folder, a file that cannot be opened), how.
std::string describe(const std::string& path, int rc, const std::string& what,
                     const std::string& sqlite_says) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return path + ": disk full: " + what +
             " failed: the file system holding the database has no space left (" + sqlite_says +
             "); what was stored before is intact. Fix: free space there (or give another "
             "--db), then resume the run (`gputune run JOB --resume RUN`; `gputune runs` lists "
             "them)";
    case SQLITE_READONLY:
      return path + ": the database is read-only to this process (" + sqlite_says +
             "): the file's mode, its folder's, or a read-only file system; nothing was "
             "changed. Fix: make the file and its folder writable by this user (chmod u+w), or "
             "give another database with --db";
    case SQLITE_CANTOPEN:
      return path + ": cannot open the database, or create its journal beside it (" + path +
             "-wal, " + path + "-shm) (" + sqlite_says +
             "). Fix: the folder must exist and be writable by this user; or give another "
             "database with --db";
    default:
      return path + ": " + what + ": " + sqlite_says;
  }
}

}  // namespace

void Database::Closer::operator()(sqlite3* db) const noexcept {
  if (sqlite3_close(db) != SQLITE_OK)
    std::fprintf(stderr, "gputune: warning: closing the database failed: %s\n", sqlite3_errmsg(db));
}

Database::Database(const std::string& path) : path_(path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK)
    throw DbError(
        describe(path, rc, "cannot open database", raw ? sqlite3_errmsg(raw) : "out of memory"),
        rc);
  sqlite3_busy_timeout(raw, 10000);
  sqlite3_extended_result_codes(raw, 1);
}

Database::~Database() = default;

void Database::check(int rc, const std::string& context) const {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  std::string msg = sqlite3_errmsg(db_.get());
  if ((rc & 0xff) == SQLITE_NOTADB)
    throw DbError(path_ + ": file is not a database (" + msg + ")", rc);
  throw DbError(describe(path_, rc, context, msg), rc);
}

void Database::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_NOTADB) throw DbError(path_ + ": file is not a database", rc);
    if ((rc & 0xff) == SQLITE_FULL || (rc & 0xff) == SQLITE_READONLY ||
        (rc & 0xff) == SQLITE_CANTOPEN)
      throw DbError(describe(path_, rc, "\"" + sql.substr(0, 80) + "\"", msg), rc);
    throw DbError(path_ + ": " + msg + " (in: " + sql.substr(0, 80) + ")", rc);
  }
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

void Statement::Finalizer::operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }

Statement::Statement(Database& db, const std::string& sql) : db_(&db), sql_(sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &raw, nullptr);
  stmt_.reset(raw);
  db.check(rc, "preparing \"" + sql.substr(0, 80) + "\"");
}

Statement::~Statement() = default;

Statement& Statement::bind(int i, std::int64_t v) {
  db_->check(sqlite3_bind_int64(stmt_.get(), i, v), "bind");
  return *this;
}
Statement& Statement::bind(int i, double v) {
  db_->check(sqlite3_bind_double(stmt_.get(), i, v), "bind");
  return *this;
}
Statement& Statement::bind(int i, const std::string& v) {
  db_->check(sqlite3_bind_text(stmt_.get(), i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC),
             "bind");
  return *this;
}
Statement& Statement::bind_blob(int i, const std::string& bytes) {
  db_->check(sqlite3_bind_blob64(stmt_.get(), i, bytes.data(), bytes.size(), SQLITE_STATIC),
             "bind");
  return *this;
}
Statement& Statement::bind_null(int i) {
  db_->check(sqlite3_bind_null(stmt_.get(), i), "bind");
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_.get());
  db_->check(rc, "running \"" + sql_.substr(0, 80) + "\"");
  return rc == SQLITE_ROW;
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

bool Statement::is_null(int c) const { return sqlite3_column_type(stmt_.get(), c) == SQLITE_NULL; }
std::int64_t Statement::int64(int c) const { return sqlite3_column_int64(stmt_.get(), c); }
double Statement::real(int c) const { return sqlite3_column_double(stmt_.get(), c); }
std::string Statement::blob(int c) const {
  auto p = static_cast<const char*>(sqlite3_column_blob(stmt_.get(), c));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), c)))
           : std::string();
}
std::string Statement::text(int c) const {
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), c));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), c)))
           : std::string();
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (done_) return;
  try {
    db_.exec("ROLLBACK");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gputune: warning: rollback failed: %s\n", e.what());
  }
}

void Transaction::commit() {
  if (done_) throw DbError("transaction already committed");
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace gputune::db
