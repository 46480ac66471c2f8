#include "app/batch.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "db/store.h"
#include "tuner/common/command_line.h"
#include "tuner/common/tuning_job.h"
#include "tuner/run/hang_watch.h"
#include "tuner/run/pipeline.h"
#include "variants/job.h"

namespace gputune::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSuiteFix =
    "a suite file is {\"Suite\": \"name\", \"Jobs\": [\"job.json\", \"folder\", ...]} with paths "
    "relative to it";

/// What a .json file is: a job, a suite, or neither (with the parsed document).
enum class Kind { Job, Suite, Other };

std::string read_text(const fs::path& file, const std::string& named_by) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw JobError(named_by, "Jobs", "cannot read " + file.string(),
                   "check the path and its permissions");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Kind kind_of(const fs::path& file, const std::string& text, json& doc) {
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range 406 for 1e400
    throw JobError(file.string(), "", std::string("is not valid JSON: ") + e.what(),
                   "fix the JSON (a job file or a suite file)");
  }
  if (!doc.is_object()) return Kind::Other;
  if (doc.contains("KernelSpecification")) return Kind::Job;
  if (doc.contains("Jobs")) return Kind::Suite;
  return Kind::Other;
}

class Collector {
 public:
  Suite suite;

  /// `path` as named by `named_by` (a suite file, a folder, or "command line").
  void add(const fs::path& path, const std::string& named_by, bool from_folder, int depth) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw JobError(named_by, named_by == "command line" ? "SUITE" : "Jobs",
                     "no such file or folder: " + path.string(),
                     "give a job file, a suite file or a folder of jobs");
    if (depth > 16)
      throw JobError(named_by, "Jobs", "suites nest more than 16 deep at " + path.string(),
                     "a suite may not name itself, directly or through others");
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(path))
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      // Jobs it holds, whether or not they were named before (each runs once either way).
      const size_t before = jobs_found_;
      for (const fs::path& f : files) add(f, path.string(), true, depth + 1);
      if (jobs_found_ == before)
        throw JobError(named_by, named_by == "command line" ? "SUITE" : "Jobs",
                       "the folder " + path.string() +
                           " holds no job files (*.json with "
                           "KernelSpecification)",
                       "name a folder of T1 job files");
      return;
    }
    const fs::path canonical = fs::weakly_canonical(path, ec);
    const std::string text = read_text(path, named_by);
    json doc;
    switch (kind_of(path, text, doc)) {
      case Kind::Job:
        ++jobs_found_;
        if (seen_.insert(canonical).second) suite.jobs.push_back({path, named_by, text, ""});
        return;
      case Kind::Suite:
        if (!suites_.insert(canonical).second) {
          if (depth > 0)
            throw JobError(path.string(), "Jobs",
                           "this suite is named again through " + named_by +
                               " (a suite that names itself never ends)",
                           "remove the entry that leads back to it");
          return;
        }
        add_suite(path, doc, depth);
        suites_.erase(canonical);
        return;
      case Kind::Other:
        if (from_folder) {
          suite.skipped.push_back(path.string() +
                                  ": neither a job (no KernelSpecification) nor a "
                                  "suite (no Jobs)");
          return;
        }
        throw JobError(path.string(), "",
                       "is neither a job (no KernelSpecification) nor a suite (no Jobs)",
                       std::string("give a T1 job file, or ") + kSuiteFix);
    }
  }

 private:
  void add_suite(const fs::path& file, const json& doc, int depth) {
    for (auto it = doc.begin(); it != doc.end(); ++it)
      if (it.key() != "Suite" && it.key() != "Jobs" && it.key() != "Description")
        throw JobError(file.string(), it.key(), "is not a field of a suite file",
                       "a suite file has Suite, Jobs and Description");
    if (doc.contains("Suite") && !doc["Suite"].is_string())
      throw JobError(file.string(), "Suite", "must be a string (the suite's name)", kSuiteFix);
    const json& jobs = doc["Jobs"];
    if (!jobs.is_array() || jobs.empty())
      throw JobError(file.string(), "Jobs", "must be a non-empty list of paths", kSuiteFix);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string field = "Jobs[" + std::to_string(i) + "]";
      if (!jobs[i].is_string() || jobs[i].get<std::string>().empty())
        throw JobError(file.string(), field, "must be a path (a string)", kSuiteFix);
      const fs::path entry = jobs[i].get<std::string>();
      const fs::path resolved = entry.is_absolute() ? entry : file.parent_path() / entry;
      std::error_code ec;
      if (!fs::exists(resolved, ec))
        throw JobError(file.string(), field, "no such file or folder: " + resolved.string(),
                       "paths in a suite are relative to the suite file's folder");
      add(resolved, file.string(), false, depth + 1);
    }
  }

  std::set<fs::path> seen_, suites_;
  size_t jobs_found_ = 0;
};

}  // namespace

int suite_exit_code(const BatchReport& r) {
  if (r.interrupted) return tuner::kExitInterrupted;
  for (int code : {tuner::kExitInternal, tuner::kExitBadInput, tuner::kExitNoCorrect,
                   tuner::kExitInterrupted, tuner::kExitNoDevice})
    for (const BatchItem& item : r.items)
      if (item.ran && item.exit_code == code) return code;
  for (const BatchItem& item : r.items)
    if (item.ran && item.exit_code != tuner::kExitOk)
      return tuner::kExitInternal;  // a code `run` never gives
  return r.regressions ? tuner::kExitRegression : tuner::kExitOk;
}

std::optional<double> BatchContext::change() const {
  if (!best_ms || !previous_ms || !(*previous_ms > 0)) return std::nullopt;
  return *best_ms / *previous_ms - 1;
}

Suite collect_suite(const std::vector<std::string>& args) {
  if (args.empty())
    throw JobError("command line", "SUITE", "no suite was given",
                   "name job files, suite files or folders of jobs");
  Collector c;
  for (const std::string& a : args) c.add(a, "command line", false, 0);
  // Every job must load now: a broken one is found in seconds, not after hours of tuning.
  for (SuiteJob& j : c.suite.jobs) {
    const Job job = tuner::load_tuning_job(j.file);
    j.strategy = job.strategy, j.search_named = job.search_named;
  }
  return std::move(c.suite);
}

BatchReport run_batch(const std::vector<SuiteJob>& jobs, const BatchOptions& o, std::ostream& log) {
  BatchReport rep;
  rep.db_path = o.db_path, rep.regression = o.regression;
  db::Store store(o.db_path);  // a file that is not ours is refused before anything runs
  auto run = o.run ? o.run : [&](const std::vector<std::string>& words) {
    return tuner::run_restarting(words, o.max_restarts, log, true);
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    BatchItem& item = rep.items.emplace_back();
    item.job = jobs[i];
    if (rep.interrupted || (o.should_stop && o.should_stop())) {
      rep.interrupted = true;
      continue;
    }
    const auto newest = store.runs(1);
    const std::int64_t before = newest.empty() ? 0 : newest[0].id;
    log << "gputune batch: job " << i + 1 << " of " << jobs.size() << ": " << jobs[i].file.string()
        << "\n";
    log.flush();
    std::vector<std::string> words = {"run", jobs[i].file.string(), "--db", o.db_path};
    words.insert(words.end(), o.run_args.begin(), o.run_args.end());
    item.exit_code = run(words);
    item.ran = true;
    if (o.should_stop && o.should_stop()) rep.interrupted = true;
    const auto runs = store.runs_of_job(jobs[i].document, before);
    if (runs.empty() && item.exit_code == 0) {  // --skip-unchanged: its last run stands
      // The newest finished run with the strategy this run would have used (what run skipped on).
      const std::string& strategy = o.strategy.empty() ? jobs[i].strategy : o.strategy;
      const auto all = store.runs_of_job(jobs[i].document);
      for (auto it = all.rbegin(); it != all.rend(); ++it)
        if (it->status == db::RunStatus::kDone && it->strategy == strategy) {
          item.unchanged = true, item.run_id = it->id, item.run_status = it->status;
          break;
        }
      continue;
    }
    if (runs.empty()) continue;  // refused before it stored a run (its message says why)
    item.run_id = runs.back().id, item.run_status = runs.back().status;
    item.run_message = runs.back().message;
    // A tuning process killed by a signal (a crashing driver) left its run "running": it ended.
    if (item.exit_code > 128 && item.run_status == db::RunStatus::kRunning) {
      const int sig = item.exit_code - 128;
      store.stop_run(item.run_id, db::RunStatus::kFailed,
                     "the tuning process was killed by signal " + std::to_string(sig) + " (" +
                         strsignal(sig) + "); `gputune run " +
                         tuner::shell_quote(jobs[i].file.string()) + " --db " +
                         tuner::shell_quote(o.db_path) + " --resume " +
                         std::to_string(item.run_id) + "` goes on from what it stored");
      item.run_status = db::RunStatus::kFailed;
      if (auto ended = store.run(item.run_id)) item.run_message = ended->message;
    }
    compare_contexts(store, item, o, log);
    for (const BatchContext& c : item.contexts) rep.regressions += c.regression;
  }
  rep.exit_code = suite_exit_code(rep);
  return rep;
}

}  // namespace gputune::app
