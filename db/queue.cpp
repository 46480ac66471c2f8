/** \file db/queue.cpp
 * Owns: the daemon's job queue in the database (Store's queue methods, declared in store.h):
 * enqueueing a submitted job with its files, a worker claiming the next one, cancelling, putting
 * back what a dead worker held, and the variant in flight that a crash or hang is blamed on.
 * Must not: run jobs or know about processes (app/daemon.cpp does).
 */
#include <sqlite3.h>

#include <string>
#include <vector>

#include "db/store.h"

namespace gputune::db {

namespace {
const char* kQueueSelect =
    "SELECT id, uid, name, job_file, document, kernel_file, kernel_source, status, "
    "cancel_requested, run_id, "
    "worker, attempts, message, submitted_at, coalesce(started_at,''), coalesce(finished_at,''), "
    "inflight_context_id, inflight_variant_id, inflight_since, client_cwd FROM queue ";
QueueItem read_queue(Statement& s) {
  QueueItem q;
  q.id = s.int64(0), q.uid = s.text(1), q.name = s.text(2), q.job_file = s.text(3),
  q.document = s.text(4);
  q.kernel_file = s.text(5), q.kernel_source = s.text(6), q.status = queue_status_of(s.text(7)),
  q.cancel_requested = s.int64(8) != 0;
  if (!s.is_null(9)) q.run_id = s.int64(9);
  q.worker = s.text(10), q.attempts = static_cast<int>(s.int64(11)), q.message = s.text(12);
  q.submitted_at = s.text(13), q.started_at = s.text(14), q.finished_at = s.text(15);
  if (!s.is_null(16)) q.inflight_context_id = s.int64(16);
  if (!s.is_null(17)) q.inflight_variant_id = s.int64(17);
  if (!s.is_null(18)) q.inflight_since = s.real(18);
  q.client_cwd = s.text(19);
  return q;
}
}  // namespace

std::int64_t Store::enqueue(const QueueItem& q, const std::vector<QueueFile>& files) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO queue(uid,name,job_file,document,kernel_file,kernel_source,client_cwd,"
              "status) VALUES(?,?,?,?,?,?,?,'queued')");
  std::string uid = q.uid.empty() ? random_uid() : q.uid;
  s.bind(1, uid).bind(2, q.name).bind(3, q.job_file).bind(4, q.document).bind(5, q.kernel_file);
  s.bind(6, q.kernel_source).bind(7, q.client_cwd);
  s.run();
  const std::int64_t id = db_.last_insert_rowid();
  Statement f(db_, "INSERT INTO queue_files(queue_id, path, content) VALUES(?,?,?)");
  for (const QueueFile& file : files) {
    f.bind(1, id).bind(2, file.path).bind_blob(3, file.bytes);
    f.run();
    f.reset();
  }
  t.commit();
  return id;
}

std::vector<QueueFile> Store::queue_files(std::int64_t id) {
  Statement s(db_, "SELECT path, content FROM queue_files WHERE queue_id=? ORDER BY path");
  s.bind(1, id);
  std::vector<QueueFile> out;
  while (s.step()) out.push_back({s.text(0), s.blob(1)});
  return out;
}

std::optional<QueueItem> Store::claim_next(const std::string& worker) {
  Statement s(db_,
              "UPDATE queue SET status='running', worker=?1, attempts=attempts+1, "
              "started_at=coalesce(started_at, strftime('%Y-%m-%dT%H:%M:%fZ','now')) "
              "WHERE id=(SELECT id FROM queue WHERE status='queued' AND cancel_requested=0 ORDER "
              "BY id LIMIT 1) "
              "RETURNING id");
  s.bind(1, worker);
  if (!s.step()) return std::nullopt;
  std::int64_t id = s.int64(0);
  s.run();
  return queue_item(id);
}

std::optional<QueueItem> Store::queue_item(std::int64_t id) {
  Statement s(db_, std::string(kQueueSelect) + "WHERE id=?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_queue(s);
}

std::vector<QueueItem> Store::queue(int limit, bool include_finished) {
  Statement s(db_, std::string(kQueueSelect) +
                       "WHERE ?2 OR status IN ('queued','running') ORDER BY id DESC LIMIT ?1");
  s.bind(1, limit).bind(2, include_finished ? 1 : 0);
  std::vector<QueueItem> out;
  while (s.step()) out.push_back(read_queue(s));
  return out;
}

void Store::set_queue_run(std::int64_t id, std::int64_t run_id) {
  Statement s(db_, "UPDATE queue SET run_id=? WHERE id=?");
  s.bind(1, run_id).bind(2, id);
  s.run();
}

void Store::finish_queue(std::int64_t id, QueueStatus status, const std::string& message) {
  const std::string status_text(text(status));
  Statement s(
      db_,
      "UPDATE queue SET status=?, message=?, inflight_context_id=NULL, inflight_variant_id=NULL, "
      "inflight_since=NULL, finished_at=strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id=?");
  s.bind(1, status_text).bind(2, message).bind(3, id);
  s.run();
  drop_queue_files(id);
}

void Store::drop_queue_files(std::int64_t id) {
  // A finished job never runs again: its copies of headers and inputs (possibly large) go.
  Statement s(db_, "DELETE FROM queue_files WHERE queue_id=?");
  s.bind(1, id);
  s.run();
}

bool Store::request_cancel(std::int64_t id) {
  Statement q(db_,
              "UPDATE queue SET status='cancelled', cancel_requested=1, message='cancelled before "
              "it started', "
              "finished_at=strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id=? AND status='queued'");
  q.bind(1, id);
  q.run();
  if (sqlite3_changes(db_.get()) > 0) {
    drop_queue_files(id);
    return true;
  }
  Statement r(db_, "UPDATE queue SET cancel_requested=1 WHERE id=? AND status='running'");
  r.bind(1, id);
  r.run();
  return sqlite3_changes(db_.get()) > 0;
}

bool Store::cancel_requested(std::int64_t id) {
  Statement s(db_, "SELECT cancel_requested FROM queue WHERE id=?");
  s.bind(1, id);
  return s.step() && s.int64(0) != 0;
}

std::vector<std::int64_t> Store::requeue_running(const std::string& worker, bool count_attempt) {
  Statement s(db_,
              "UPDATE queue SET status='queued', worker='', message='interrupted; resumed', "
              "inflight_context_id=NULL, inflight_variant_id=NULL, inflight_since=NULL, "
              "attempts=max(0, attempts - ?2) "
              "WHERE status='running' AND (?1='' OR worker=?1) RETURNING id");
  s.bind(1, worker).bind(2, count_attempt ? 0 : 1);
  std::vector<std::int64_t> out;
  while (s.step()) out.push_back(s.int64(0));
  return out;
}

void Store::set_in_flight(std::int64_t queue_id, std::int64_t context_id, std::int64_t variant_id) {
  Statement s(db_,
              "UPDATE queue SET inflight_context_id=?, inflight_variant_id=?, "
              "inflight_since=(julianday('now')-2440587.5)*86400.0 WHERE id=?");
  s.bind(1, context_id).bind(2, variant_id).bind(3, queue_id);
  s.run();
}

void Store::clear_in_flight(std::int64_t queue_id) {
  Statement s(db_,
              "UPDATE queue SET inflight_context_id=NULL, inflight_variant_id=NULL, "
              "inflight_since=NULL WHERE id=?");
  s.bind(1, queue_id);
  s.run();
}

}  // namespace gputune::db
