// `gputune replay`'s reading of what was recorded (declared in replay.h): a measurement file
// (a Kernel Tuner cache, a T4 file) or a run of a gputune database, read without changing it, its
// entries keyed like the job's space, the context the file names, and the recording laid over
// the space (read_recording), with what it holds, its optimum and the default's time.
// Must not: score anything (replay.cpp, replay_search.cpp) or write SQL (db/ reads it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include "db/interchange.h"
#include "db/snapshot.h"
#include "db/store.h"
#include "tuner/tools/replay.h"
#include "tuner/tools/replay_search.h"

namespace gputune::tuner {

namespace {

/// Recorded entries keyed like `space` (those without every parameter of the space left out).
std::map<std::string, Recorded> key_entries(const std::vector<db::RecordedEntry>& entries,
                                            const Space& space) {
  std::map<std::string, Recorded> out;
  for (const db::RecordedEntry& e : entries) {
    std::string k;
    bool ours = true;  // holds every parameter of the job's space
    for (size_t i = 0; ours && i < space.names->size(); ++i) {
      const std::string& n = (*space.names)[i];
      ours = e.params.contains(n);
      if (ours) k += (i ? "," : "") + db::kernel_tuner_key_text(e.params[n]);
    }
    if (!ours) continue;
    // A configuration recorded twice (a T4 export keeps a re-measured one): its best time.
    const Recorded rec{e.time_ms, e.failure, e.compile_ms, e.benchmark_ms};
    auto [it, fresh] = out.try_emplace(k, rec);
    if (!fresh && e.time_ms && (!it->second.time_ms || *e.time_ms < *it->second.time_ms))
      it->second = rec;
  }
  return out;
}

}  // namespace

std::map<std::string, Recorded> read_measurements(const std::string& file, const Space& space,
                                                  std::size_t* entries, FileProblem* problem) {
  db::MeasurementFile f = db::read_measurement_file(file);
  if (entries) *entries = f.entries.size();
  // What the file names: a Kernel Tuner cache its kernel, device and problem size; a gputune T4
  // export (metadata.gputune) also its context.
  if (problem) {
    problem->kernel = f.kernel, problem->device = f.device, problem->context = f.context;
    problem->problem_size = db::whole_problem_size(f.problem_size);
  }
  return key_entries(f.entries, space);
}

std::map<std::string, Recorded> read_database_measurements(const std::string& file, const Job& job,
                                                           const Space& space,
                                                           const ReplayOptions& o,
                                                           std::size_t* entries,
                                                           std::string* source) {
  // Read without writing: a colleague's or an archived database is never changed (nor migrated:
  // an older schema is migrated in the copy).
  db::ReadOnlyCopy copy(file);
  db::Store& store = copy.store();
  std::optional<db::RunRow> run;
  if (o.run) {
    run = store.run(*o.run);
    if (!run)
      throw std::runtime_error(file + ": no run " + std::to_string(*o.run) +
                               " (`gputune runs --db " + file + "` lists them)");
  } else {
    // The newest run of this very job that timed something.
    const auto runs = store.runs_of_job(job.document, 0);
    for (auto it = runs.rbegin(); it != runs.rend() && !run; ++it)
      if (store.timed_pairs(it->id) > 0) run = *it;
    if (!run) {
      std::string listing;
      for (const db::RunRow& r : store.runs(10))
        listing += (listing.empty() ? "" : ", ") + std::to_string(r.id) + " (" + r.job_name + ", " +
                   std::string(text(r.status)) + ")";
      throw std::runtime_error(file + ": no run of this job (" + job.file.string() +
                               ", as it is now) timed anything there" +
                               (listing.empty() ? std::string(": the database holds no run")
                                                : "; its newest runs: " + listing) +
                               ". Fix: give --run N for a run of this kernel's space");
    }
  }
  const std::string label = !o.context.empty()      ? o.context
                            : !job.contexts.empty() ? job.contexts.front().name
                                                    : std::string();
  std::vector<db::RecordedEntry> recorded;
  std::map<std::string, size_t> at;  // configuration key -> its entry (a pair timed again)
  std::set<std::string> labels;
  for (const db::MeasurementRow& m : store.measurements(run->id)) {
    labels.insert(m.context_label);
    // Compiled but never launched, or left out by a rule: nothing was measured.
    if (m.context_label != label || m.status == db::Status::kCompiled ||
        m.status == db::Status::kConstraints)
      continue;
    db::RecordedEntry e;
    e.id = "measurement " + std::to_string(m.id);
    e.params = nlohmann::json::parse(m.params_json);
    if (m.status == db::Status::kCorrect)
      e.time_ms = m.time_ms;
    else
      e.failure = m.status.str();
    e.compile_ms = m.compile_ms;
    if (!m.samples_ms.empty())
      e.benchmark_ms = std::accumulate(m.samples_ms.begin(), m.samples_ms.end(), 0.0);
    auto [it, fresh] = at.emplace(m.config_key, recorded.size());
    if (fresh) {
      recorded.push_back(std::move(e));
      continue;
    }
    db::RecordedEntry& before = recorded[it->second];  // the best of the pair's measurements
    if (e.time_ms && (!before.time_ms || *e.time_ms < *before.time_ms)) before = std::move(e);
  }
  if (recorded.empty()) {
    std::string have;
    for (const std::string& l : labels) have += (have.empty() ? "" : ", ") + l;
    throw std::runtime_error(file + ": run " + std::to_string(run->id) +
                             " measured nothing in context '" + label + "'" +
                             (have.empty() ? std::string(" (it holds no measurement)")
                                           : " (its contexts: " + have + ")") +
                             ". Fix: give --context LABEL, or --run N for another run");
  }
  if (entries) *entries = recorded.size();
  if (source)
    *source = "run " + std::to_string(run->id) + " (" + run->job_name + ", " +
              std::string(text(run->status)) + ") of " + file + ", context " + label;
  return key_entries(recorded, space);
}

namespace {

/// Where the pruner predicts for a measurement file: --context; else the job's context the file
/// names (a gputune T4 export's label, else its problem size, as for a Kernel Tuner cache), so
/// that predictions and measurements are of one problem size; else the job's first. `source`
/// receives what the file names. Throws when --context names another context than the file's.
std::string context_for_file(const Job& job, const FileProblem& named, const ReplayOptions& o,
                             const std::string& file, std::string* source) {
  const bool t4 = !named.context.empty();
  if (!t4 && named.problem_size.empty()) return o.context;
  const ContextSpec* match = nullptr;
  for (const ContextSpec& c : job.contexts)
    if (t4 && !match && c.name == named.context) match = &c;
  for (const ContextSpec& c : job.contexts) {
    std::vector<std::int64_t> size;
    for (const Value& v : c.problem_size) size.push_back(v.as_int());
    if (!match && !named.problem_size.empty() && size == named.problem_size) match = &c;
  }
  std::string size;
  for (std::int64_t n : named.problem_size) size += (size.empty() ? "" : ", ") + std::to_string(n);
  if (!size.empty()) size = "problem size [" + size + "]";
  const std::string what =
      (t4 ? "context '" + named.context + "'" + (size.empty() ? "" : " (" + size + ")") : size) +
      (match && match->name != named.context ? ", the job's context '" + match->name + "'" : "");
  if (match && !o.context.empty() && o.context != match->name)
    throw std::runtime_error(
        file + ": its measurements are of " + what + ", and --context " + o.context +
        " would score predictions for another problem size against them. Fix: drop --context" +
        (t4 ? ", or replay an export of that context (`gputune export --t4 --context " + o.context +
                  "`)"
            : std::string()));
  *source = (t4 ? "T4 export of " : "Kernel Tuner cache of ") +
            (named.kernel.empty() ? "a kernel" : named.kernel) +
            (t4 ? ", context " + named.context : std::string()) +
            (named.device.empty() ? "" : " on " + named.device) +
            (size.empty() ? "" : ", " + size) +
            (named.kernel.empty() || named.kernel == job.kernel_name
                 ? ""
                 : " (this job tunes " + job.kernel_name + ")");
  if (match) {
    if (match->name != named.context) *source += ", the job's context " + match->name;
    return match->name;
  }
  if (!job.contexts.empty())
    *source += std::string(" (none of the job's contexts has that ") +
               (!t4            ? "size"
                : size.empty() ? "name"
                               : "name or size") +
               ": the pruner predicts at " +
               (o.context.empty() ? job.contexts.front().name : o.context) + ")";
  return o.context;
}

}  // namespace

Recording read_recording(const Job& job, const Space& space, const std::string& file,
                         const ReplayOptions& o, ReplayReport& rep) {
  const bool database = db::is_sqlite_file(file);
  if (o.run && !database)
    throw std::runtime_error(file + ": --run " + std::to_string(*o.run) +
                             " names a run of a gputune database, and this file is not one. Fix: "
                             "drop --run, or give the database the run is in");
  FileProblem named;
  auto rec = database ? read_database_measurements(file, job, space, o, &rep.recorded, &rep.source)
                      : read_measurements(file, space, &rep.recorded, &named);
  Recording r;
  r.context = database ? o.context : context_for_file(job, named, o, file, &rep.source);
  // Per space index: the recorded time (or failure); configurations without a record are left out.
  std::vector<std::optional<double>> time(space.size());
  std::vector<char> present(space.size(), 0);
  r.compile_s.assign(space.size(), 0);
  r.benchmark_s.assign(space.size(), 0);
  rep.optimum_ms = INFINITY;
  for (size_t i = 0; i < space.size(); ++i) {
    auto it = rec.find(space.config(i).key());
    if (it == rec.end()) continue;
    present[i] = 1;
    ++rep.matched;
    time[i] = it->second.time_ms;
    r.compile_s[i] = it->second.compile_ms.value_or(0) / 1000;
    r.benchmark_s[i] = it->second.benchmark_ms.value_or(0) / 1000;
    r.costed += it->second.compile_ms || it->second.benchmark_ms;
    if (!time[i])
      ++rep.failed;
    else if (*time[i] < rep.optimum_ms)
      rep.optimum_ms = *time[i], rep.optimum_key = it->first;
  }
  if (rep.matched == 0)
    throw std::runtime_error(file + ": none of its " + std::to_string(rep.recorded) +
                             " configurations is in the job's space of " +
                             std::to_string(space.size()) + " (different parameters or values?)");
  if (!std::isfinite(rep.optimum_ms))
    throw std::runtime_error(file + ": all " + std::to_string(rep.matched) +
                             " of its configurations in the job's space failed: there is no "
                             "optimum to score against. Fix: replay measurements with at least "
                             "one correct time");
  // `run` measures the job's default configuration first, whatever the strategy: so does every
  // replayed search, when the record holds it.
  if (long d = space.find(default_key(job)); d >= 0 && present[static_cast<size_t>(d)]) {
    r.def = static_cast<size_t>(d);
    rep.default_key = space.config(*r.def).key();
    rep.default_ms = time[*r.def];
  }
  r.time = std::move(time);
  r.present = std::move(present);
  r.optimum_ms = rep.optimum_ms;
  return r;
}

}  // namespace gputune::tuner
