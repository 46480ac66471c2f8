/** \file db/merge.h
 * Owns: merging gputune databases ("shards", e.g. one per SLURM task) into one (`gputune db
 * merge OUT SHARD...`), by the content identities the schema has: devices.uid, kernels.hash,
 * jobs.hash, contexts.hash, variants.hash and runs.uid; integer ids are local and remapped.
 * Consumes: database files. Produces: OUT, and a MergeReport.
 * Must not: modify a shard, write OUT unless every shard was accepted, or leave OUT half-merged:
 * the whole invocation is one write transaction on OUT (a kill -9 leaves OUT as it was or fully
 * merged). The rules (what is the same row, which winner wins) are in merge.cpp's header.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gputune::db {

/// What one shard added to OUT.
struct ShardMergeReport {
  std::string path;
  int schema_version = 0;               ///< the shard's own (user_version)
  bool migrated = false;                ///< an older schema: a copy was migrated, not the shard
  bool skipped = false;                 ///< the shard is OUT itself: nothing to merge
  std::int64_t measurements = 0;        ///< the shard's measurements
  std::int64_t measurements_added = 0;  ///< of them, new to OUT
  std::int64_t runs_added = 0;          ///< runs new to OUT (runs.uid)
  std::int64_t runs_updated = 0;        ///< runs OUT had at an earlier state (merge.cpp)
  std::int64_t calibrations_added = 0;  ///< model_calibrations new to OUT
  std::int64_t plans_added = 0;         ///< run_plans new or changed in OUT
};

struct MergeReport {
  std::vector<ShardMergeReport> shards;
  bool created = false;                 ///< OUT did not exist before
  std::int64_t winners_changed = 0;     ///< contexts whose winner is new or another measurement
  std::int64_t measurements_total = 0;  ///< in OUT after the merge
  std::int64_t measurements_added = 0;  ///< over all shards
};

struct MergeOptions {
  /// Where the shards' snapshot copies go while merging (removed afterwards); "" : a folder
  /// beside OUT (same file system, which OUT's own size already needs).
  std::string temp_dir;
  /// A line per step (a shard checked, copied, merged), for the command's progress on stderr.
  std::function<void(const std::string&)> note;
};

/// Merges every shard into OUT (created when missing, migrated when older), idempotently:
/// merging a shard again, or shards in another order, gives the same rows and winners.
/// Throws DbError naming the file and the fix, with nothing written to OUT, when a shard is
/// missing, not an SQLite file, another application's database, of a newer schema, or damaged.
MergeReport merge_shards(const std::string& out, const std::vector<std::string>& shards,
                         const MergeOptions& options = {});

}  // namespace gputune::db
