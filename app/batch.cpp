#include "app/batch.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "db/browse.h"
#include "db/store.h"
#include "tuner/command_line.h"
#include "tuner/hang_watch.h"
#include "tuner/pipeline.h"
#include "tuner/tuning_job.h"
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

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

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
  for (SuiteJob& j : c.suite.jobs) j.strategy = tuner::load_tuning_job(j.file).strategy;
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
        if (it->status == "done" && it->strategy == strategy) {
          item.unchanged = true, item.run_id = it->id, item.run_status = it->status;
          break;
        }
      continue;
    }
    if (runs.empty()) continue;  // refused before it stored a run (its message says why)
    item.run_id = runs.back().id, item.run_status = runs.back().status;
    item.run_message = runs.back().message;
    // A tuning process killed by a signal (a crashing driver) left its run "running": it ended.
    if (item.exit_code > 128 && item.run_status == "running") {
      const int sig = item.exit_code - 128;
      store.stop_run(item.run_id, "failed",
                     "the tuning process was killed by signal " + std::to_string(sig) + " (" +
                         strsignal(sig) + "); `gputune run " +
                         tuner::shell_quote(jobs[i].file.string()) + " --db " +
                         tuner::shell_quote(o.db_path) + " --resume " +
                         std::to_string(item.run_id) + "` goes on from what it stored");
      item.run_status = "failed";
      if (auto ended = store.run(item.run_id)) item.run_message = ended->message;
    }
    compare_contexts(store, item, o, log);
    for (const BatchContext& c : item.contexts) rep.regressions += c.regression;
  }
  rep.exit_code = suite_exit_code(rep);
  return rep;
}

void print_batch_report(const BatchReport& r, std::ostream& out) {
  out << "\nbatch: " << r.items.size() << " job" << (r.items.size() == 1 ? "" : "s")
      << ", database " << r.db_path << "\n";
  // Jobs by the path they were named with, relative to here when they are under it.
  std::vector<std::string> names;
  size_t width = 4;
  for (const BatchItem& item : r.items) {
    std::error_code ec;
    const fs::path rel = fs::relative(item.job.file, fs::current_path(ec), ec);
    const bool under = !ec && !rel.empty() && *rel.begin() != "..";
    names.push_back(under ? rel.string() : item.job.file.string());
    width = std::max(width, names.back().size() + 2);
  }
  const size_t indent = width + 6 + 7;
  out << std::left << std::setw(static_cast<int>(width)) << "job" << std::setw(6) << "exit"
      << std::setw(7) << "run" << std::setw(14) << "context" << std::right << std::setw(12)
      << "best ms" << std::setw(22) << "previous ms (run)" << std::setw(10) << "change"
      << "\n";
  for (size_t i = 0; i < r.items.size(); ++i) {
    const BatchItem& item = r.items[i];
    out << std::left << std::setw(static_cast<int>(width)) << names[i];
    if (!item.ran) {
      out << "not run (the suite was stopped)\n";
      continue;
    }
    out << std::setw(6) << item.exit_code << std::setw(7)
        << (item.run_id ? std::to_string(item.run_id) : "-");
    if (!item.run_id) {
      out << "no run stored (its message is above)\n";
      continue;
    }
    if (item.unchanged) {
      out << "unchanged since this run: not re-tuned (--skip-unchanged)\n";
      continue;
    }
    const bool has_times = item.run_status == "done" || item.run_status == "interrupted" ||
                           item.run_status == "no_device";
    if (!has_times || item.contexts.empty()) {
      std::string message = item.run_message.substr(0, item.run_message.find('\n'));
      if (message.size() > 100) message = message.substr(0, 97) + "...";
      out << item.run_status << (message.empty() ? "" : ": " + message) << "\n";
      continue;
    }
    for (size_t k = 0; k < item.contexts.size(); ++k) {
      const BatchContext& c = item.contexts[k];
      if (k) out << std::string(indent, ' ');
      out << std::left << std::setw(14) << c.label << std::right << std::setw(12)
          << (c.best_ms                          ? fixed(*c.best_ms, 4)
              : item.run_status == "no_device"   ? std::string("not timed")
              : item.run_status == "interrupted" ? std::string("stopped")
                                                 : std::string("none correct"))
          << std::setw(22)
          << (c.previous_ms ? fixed(*c.previous_ms, 4) + " (" + std::to_string(c.previous_run) + ")"
                            : std::string("first run"));
      std::string change = "";
      if (auto ch = c.change()) change = (*ch >= 0 ? "+" : "") + fixed(100 * *ch, 1) + "%";
      out << std::setw(10) << change << (c.regression ? "  REGRESSION" : "");
      if (item.run_status == "interrupted") out << "  (stopped early: not compared)";
      out << "\n";
    }
  }
  if (r.interrupted) {
    out << "batch: stopped (Ctrl-C or SIGTERM); the job in hand stored what it measured\n";
  } else if (r.regressions) {
    out << "batch: " << r.regressions << " context" << (r.regressions == 1 ? "" : "s")
        << " regressed: the best time is more than " << fixed(100 * r.regression, 1)
        << "% slower than the previous finished run's on the same device (or nothing was "
           "correct); `gputune show RUN` has the measurements\n";
  }
  out << "batch: exit " << r.exit_code << "\n";
}

}  // namespace gputune::app
