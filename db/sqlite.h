/** \file db/sqlite.h
 * Owns: RAII over SQLite: Database (one connection), Statement (prepared, move-only), Transaction
 * (rolls back unless committed), and DbError carrying SQLite's codes.
 * Must not: know about CUDA or jobs. Only db/ includes this header. */
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace gputune::db {

class DbError : public std::runtime_error {
 public:
  DbError(const std::string& what, int code = 0) : std::runtime_error(what), code(code) {}
  int code;
};

/// One connection. Use from one thread at a time.
class Database {
 public:
  /// Opens (creating if needed) with foreign keys on and a busy timeout.
  explicit Database(const std::string& path);
  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;
  ~Database();

  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }
  /// Runs SQL without results; throws DbError naming the statement.
  void exec(const std::string& sql);
  std::int64_t last_insert_rowid() const;
  /// Throws DbError(context + SQLite's message) when rc is not OK/ROW/DONE.
  void check(int rc, const std::string& context) const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept;
  };
  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
};

/// A prepared statement. Binding indices start at 1, columns at 0.
class Statement {
 public:
  Statement(Database& db, const std::string& sql);
  Statement(Statement&&) noexcept = default;
  ~Statement();

  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, const std::string& v);
  Statement& bind(int i, std::string&&) = delete;  // would dangle: bind a named string
  Statement& bind(int i, const char* v) = delete;
  Statement& bind_null(int i);
  /// Binds bytes as a BLOB (any byte values).
  Statement& bind_blob(int i, const std::string& bytes);
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }
  /// Steps once; true when a row is available.
  bool step();
  /// Steps to completion (for statements without results).
  void run();
  void reset();

  bool is_null(int col) const;
  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const noexcept;
  };
  Database* db_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  std::string sql_;
};

/// BEGIN IMMEDIATE on construction; ROLLBACK in the destructor unless commit() ran.
class Transaction {
 public:
  explicit Transaction(Database& db);
  Transaction(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace gputune::db
