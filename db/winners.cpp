/** \file db/winners.cpp
 * Owns: the winners table: a context's winner offered as a run measures (provisional until the
 * run re-measures its top variants) and the winners read back, by kernel, context and device.
 * The rule itself, a context's fastest correct measurement, is the schema's (schema 14's views).
 * Must not: decide what is measured.
 */
#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "db/store.h"

namespace gputune::db {

bool Store::offer_winner(std::int64_t context_id, std::int64_t measurement_id, bool provisional) {
  Statement m(db_, "SELECT status, time_ms, run_id FROM measurements WHERE id=?");
  m.bind(1, measurement_id);
  if (!m.step() || status_of(m.text(0)) != Status::kCorrect) return false;
  const double t = m.real(1);
  const std::int64_t run = m.int64(2);
  // The current winner: its time, whether a run named it provisionally (and which run), and
  // the winner it replaced then.
  Statement cur(db_,
                "SELECT m.time_ms, w.provisional, m.run_id, w.replaced_measurement_id, "
                "w.measurement_id FROM winners w JOIN measurements m ON m.id=w.measurement_id "
                "WHERE w.context_id=?");
  cur.bind(1, context_id);
  const bool has = cur.step();
  const bool own_provisional = has && cur.int64(1) != 0 && cur.int64(2) == run;
  std::optional<std::int64_t> replaced;  // what the new row keeps as the winner it replaced
  if (own_provisional) {
    // This run's own provisional winner: its later word (a faster first pass, or the re-measured
    // winner) takes its place, against the winner that one replaced.
    if (!cur.is_null(3)) {
      Statement before(db_, "SELECT time_ms, status FROM measurements WHERE id=?");
      before.bind(1, cur.int64(3));
      if (before.step() && status_of(before.text(1)) == Status::kCorrect) {
        if (!provisional && before.real(0) <= t) {
          // The winner before this run stays: the re-measured time does not beat it.
          Statement back(db_,
                         "UPDATE winners SET measurement_id=?, provisional=0, "
                         "replaced_measurement_id=NULL, updated_at=strftime('%Y-%m-%dT%H:%M:%fZ',"
                         "'now') WHERE context_id=?");
          back.bind(1, cur.int64(3)).bind(2, context_id);
          back.run();
          return false;
        }
        replaced = cur.int64(3);
      }
    }
    if (provisional && cur.real(0) <= t) return false;  // a slower first pass changes nothing
  } else if (has && cur.real(0) <= t) {
    return false;
  } else if (has && provisional) {
    replaced = cur.int64(4);
  }
  Statement up(db_,
               "INSERT INTO winners(context_id,measurement_id,provisional,replaced_measurement_id) "
               "VALUES(?,?,?,?) ON CONFLICT(context_id) DO UPDATE SET "
               "measurement_id=excluded.measurement_id, provisional=excluded.provisional, "
               "replaced_measurement_id=excluded.replaced_measurement_id, "
               "updated_at=strftime('%Y-%m-%dT%H:%M:%fZ','now')");
  up.bind(1, context_id).bind(2, measurement_id).bind(3, provisional ? 1 : 0);
  if (replaced && provisional)
    up.bind(4, *replaced);
  else
    up.bind_null(4);
  up.run();
  return true;
}

std::vector<WinnerRow> Store::winners(const std::string& kernel, const std::string& label,
                                      const std::string& device) {
  Statement s(db_,
              "SELECT k.name, c.label, d.name, v.config_key, v.params, m.time_ms, m.run_id, m.id, "
              "m.gflops, m.gbps, m.registers, m.occupancy, c.id, k.hash, w.provisional "
              "FROM winners w "
              "JOIN measurements m ON m.id=w.measurement_id JOIN contexts c ON c.id=w.context_id "
              "JOIN kernels k ON k.id=c.kernel_id JOIN devices d ON d.id=c.device_id "
              "JOIN variants v ON v.id=m.variant_id "
              "WHERE (k.name=?1 OR k.hash LIKE ?1 || '%') AND (?2='' OR c.label=?2) AND (?3='' OR "
              "d.name=?3) "
              "ORDER BY c.label, d.name");
  s.bind(1, kernel).bind(2, label).bind(3, device);
  std::vector<WinnerRow> out;
  while (s.step()) {
    WinnerRow w;
    w.kernel = s.text(0), w.context_label = s.text(1), w.device = s.text(2);
    w.config_key = s.text(3), w.params_json = s.text(4), w.time_ms = s.real(5);
    w.run_id = s.int64(6), w.measurement_id = s.int64(7);
    if (!s.is_null(8)) w.gflops = s.real(8);
    if (!s.is_null(9)) w.gbps = s.real(9);
    if (!s.is_null(10)) w.registers = static_cast<int>(s.int64(10));
    if (!s.is_null(11)) w.occupancy = s.real(11);
    w.context_id = s.int64(12), w.kernel_hash = s.text(13);
    w.provisional = s.int64(14) != 0;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace gputune::db
