/** \file db/snapshot.h
 * Owns: reading a gputune database without writing it: a snapshot copy through SQLite's backup
 * API from a read-only connection (so what its write-ahead log holds is in the copy), checked to
 * be a gputune database SQLite can read, and migrated in the copy when its schema is older. The
 * merge (db/merge.h) reads its shards so, and `replay --measurements DB` a colleague's or an
 * archived database.
 * Must not: open the original for writing, or leave a copy behind (ReadOnlyCopy). */
#pragma once

#include <memory>
#include <string>

namespace gputune::db {

class Store;

/// How the errors of a snapshot end: what was (not) done, and the fix's wording.
struct SnapshotWording {
  std::string consequence;  ///< "; nothing was written to OUT"
  std::string give;         ///< "give gputune database files as shards (a run's --db file)"
  std::string newer;        ///< the fix for a newer schema
  std::string room;         ///< the fix when the copy cannot be written
};

/// Checks `path` (opened read only) and copies it to `copy` (created), migrating the copy when
/// its schema is older; returns the original's schema version. Throws DbError naming `path` and
/// the fix when it is missing, not SQLite, another application's, newer, damaged, or the copy
/// cannot be written.
int snapshot_database(const std::string& path, const std::string& copy, const SnapshotWording& w);

/// A database opened for reading only: its snapshot in a temporary folder, open as a Store,
/// removed with this object. The original is never written (nor migrated).
class ReadOnlyCopy {
 public:
  explicit ReadOnlyCopy(const std::string& path);
  ~ReadOnlyCopy();
  ReadOnlyCopy(const ReadOnlyCopy&) = delete;
  ReadOnlyCopy& operator=(const ReadOnlyCopy&) = delete;
  Store& store() { return *store_; }
  int original_version() const { return version_; }

 private:
  std::string folder_;
  std::unique_ptr<Store> store_;
  int version_ = 0;
};

}  // namespace gputune::db
