/** \file app/batch_report.cpp
 * Owns: what `gputune batch` reports: each context of a job's run against the previous finished
 * run of the job, a regression re-measured before it is reported (the run's winner and the
 * previous winner side by side in one `gputune run` of just those configurations), the report
 * without running anything (`--report-only`), and the report as the terminal table
 * (print_batch_report) and as Markdown and JSON files.
 * Must not: tune (a confirmation is a `gputune run` of its own, through BatchOptions::run), or
 * write to the suite's database (a confirmation measures into a temporary one).
 */
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/batch.h"
#include "db/browse.h"
#include "tuner/run/hang_watch.h"

namespace gputune::app {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

/// `v` as a literal of the expressions T1 conditions are written in (Python's).
std::string literal(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) {
    std::string out = "'";
    for (char c : v.get<std::string>()) {
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    return out + "'";
  }
  return v.dump();
}

/// The job's document restricted to `configs` (parameter objects, in the job's parameter order)
/// in the context labelled `label`, searched whole (brute force, no budget): what a confirmation
/// runs.
std::string confirmation_job(const std::string& document, const std::vector<json>& configs,
                             const std::string& label) {
  ordered_json doc = ordered_json::parse(document);
  std::string names, values;
  std::vector<std::string> params;
  const json first = configs.front();
  for (const auto& [name, value] : first.items()) {
    names += (names.empty() ? "" : ", ") + name;
    params.push_back(name);
  }
  for (const json& c : configs) {
    std::string tuple;
    for (const std::string& p : params) tuple += (tuple.empty() ? "" : ", ") + literal(c.at(p));
    values += (values.empty() ? "[" : ", [") + tuple + "]";
  }
  ordered_json& space = doc["ConfigurationSpace"];
  if (!space.contains("Conditions") || !space["Conditions"].is_array())
    space["Conditions"] = ordered_json::array();
  space["Conditions"].push_back(
      {{"Expression", "[" + names + "] in [" + values + "]"}, {"Parameters", params}});
  if (doc.contains("GPUTune") && doc["GPUTune"].is_object()) {
    ordered_json& ext = doc["GPUTune"];
    ext.erase("Budget");
    ext["Search"] = {{"Strategy", "brute_force"}};
    if (ext.contains("Contexts") && ext["Contexts"].is_array()) {
      ordered_json kept = ordered_json::array();
      for (const auto& c : ext["Contexts"])
        if (c.is_object() && c.value("Name", "") == label) kept.push_back(c);
      if (!kept.empty()) ext["Contexts"] = kept;
    }
  }
  return doc.dump(2);
}

/// The run options a confirmation keeps: where the caches are and how to compile and watch, not
/// what to search.
std::vector<std::string> confirmation_args(const std::vector<std::string>& run_args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < run_args.size(); ++i) {
    const std::string& a = run_args[i];
    const bool with_value = a == "--cache-dir" || a == "--threads" || a == "--kernel-timeout";
    if (with_value && i + 1 < run_args.size()) {
      out.insert(out.end(), {a, run_args[i + 1]});
      ++i;
    } else if (a == "--quiet") {
      out.push_back(a);
    } else if (a == "--budget" || a == "--strategy") {
      ++i;  // and its value
    }
  }
  out.push_back("--max-restarts");
  out.push_back("0");
  return out;
}

/// Re-measures the run's winner and the previous run's winner of a regressed context.
Confirmation confirm(db::Store& store, const BatchItem& item, const BatchContext& c,
                     const BatchOptions& o, std::ostream& log) {
  Confirmation f;
  const auto now = store.fastest_correct(item.run_id, c.context_id);
  const auto before = store.fastest_correct(c.previous_run, c.previous_context_id);
  if (!now || !before) {
    f.note = "not re-measured: a winner's measurement is missing";
    return f;
  }
  f.winner_config = now->config_key, f.previous_config = before->config_key;
  std::vector<json> configs = {json::parse(now->params_json)};
  if (before->config_key != now->config_key) {
    const json previous = json::parse(before->params_json);
    // The previous winner must be a configuration of this job's space (same parameters).
    bool same_parameters = previous.size() == configs.front().size();
    for (const auto& [name, v] : configs.front().items())
      same_parameters = same_parameters && previous.contains(name);
    if (same_parameters) configs.push_back(previous);
  }
  // Beside the job file (its relative paths hold), removed after.
  const fs::path job_file =
      item.job.file.parent_path() / (".gputune-confirm-" + std::to_string(getpid()) + ".json");
  const fs::path dir = fs::temp_directory_path() / ("gputune-confirm-" + std::to_string(getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  {
    std::ofstream out(job_file);
    out << confirmation_job(item.job.document, configs, c.label);
    if (!out) {
      f.note = "not re-measured: cannot write " + job_file.string();
      fs::remove(job_file, ec);
      return f;
    }
  }
  const std::string db = (dir / "confirm.db").string();
  fs::remove(db, ec);
  std::vector<std::string> words = {"run", job_file.string(), "--db", db};
  for (const std::string& a : confirmation_args(o.run_args)) words.push_back(a);
  log << "gputune batch: re-measuring " << c.label << " of " << item.job.file.string()
      << ": the winner " << f.winner_config
      << (configs.size() > 1 ? " beside the previous winner " + f.previous_config : "") << "\n";
  log.flush();
  auto run = o.run ? o.run : [&](const std::vector<std::string>& w) {
    return tuner::run_restarting(w, 0, log, true);
  };
  const int code = run(words);
  fs::remove(job_file, ec);
  std::map<std::string, double> fresh;
  try {
    db::Store confirm_db(db);
    for (const auto& m : confirm_db.measurements(0))
      if (m.status == db::Status::kCorrect && m.time_ms) {
        auto [it, added] = fresh.emplace(m.config_key, *m.time_ms);
        if (!added) it->second = std::min(it->second, *m.time_ms);
      }
  } catch (const std::exception& e) {
    f.note = std::string("not re-measured: ") + e.what();
  }
  fs::remove_all(dir, ec);
  if (auto it = fresh.find(f.winner_config); it != fresh.end()) f.winner_ms = it->second;
  if (auto it = fresh.find(f.previous_config); it != fresh.end()) f.previous_config_ms = it->second;
  if (!f.winner_ms) {
    if (f.note.empty())
      f.note = "not re-measured: the confirmation run exited " + std::to_string(code) +
               (code == tuner::kExitNoDevice ? " (no GPU here)" : "");
    return f;
  }
  f.ran = true;
  f.confirmed = *f.winner_ms > *c.previous_ms * (1 + o.regression);
  std::ostringstream note;
  note << std::fixed << std::setprecision(4) << "the winner re-measured " << *f.winner_ms
       << " ms against the previous run's best " << *c.previous_ms << " ms";
  if (!f.confirmed) {
    note << ": within the threshold now, so the run's time was noise";
  } else if (f.previous_config != f.winner_config && f.previous_config_ms) {
    note << "; the previous winner re-measured beside it " << *f.previous_config_ms << " ms"
         << (*f.previous_config_ms * (1 + o.regression) < *f.winner_ms
                 ? ": faster, so the new winner is the wrong choice"
                 : ": as slow, so the kernel, driver or device got slower");
  } else if (f.previous_config == f.winner_config) {
    note << ": the same configuration got slower (kernel, driver or device)";
  } else {
    note << " (the previous winner is not in this job's space any more)";
  }
  f.note = note.str();
  return f;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string verdict(const BatchContext& c) {
  if (!c.regression) {
    if (c.confirmation && c.confirmation->ran) return "noise (re-measured)";
    return c.previous_ms ? "ok" : "first run";
  }
  if (!c.best_ms) return "REGRESSION (nothing correct)";
  if (c.confirmation && c.confirmation->confirmed) return "REGRESSION (confirmed)";
  return "REGRESSION (not confirmed)";
}

}  // namespace

void compare_contexts(db::Store& store, BatchItem& item, const BatchOptions& o, std::ostream& log) {
  db::Browser browser(store);
  auto run_json = browser.run(item.run_id);
  if (!run_json) return;
  for (const json& ctx : (*run_json)["contexts"]) {
    BatchContext& c = item.contexts.emplace_back();
    c.label = ctx["label"], c.device = ctx["device"];
    c.context_id = ctx["id"].get<std::int64_t>();
    if (ctx["best_ms"].is_number()) c.best_ms = ctx["best_ms"].get<double>();
    if (auto prev = store.previous_best(item.run_id, c.context_id))
      c.previous_run = prev->run_id, c.previous_ms = prev->best_ms,
      c.previous_context_id = prev->context_id;
    // Slower than before, or no correct variant where there was one: both need a look. A run
    // that did not time (no GPU) or stopped early is not compared.
    if (c.previous_ms && item.run_status == db::RunStatus::kDone)
      c.regression = !c.best_ms || *c.change() > o.regression;
    if (c.regression && c.best_ms && o.confirm) {
      c.confirmation = confirm(store, item, c, o, log);
      if (c.confirmation->ran && !c.confirmation->confirmed) c.regression = false;
    }
  }
}

BatchReport report_batch(const std::vector<SuiteJob>& jobs, const BatchOptions& o,
                         std::ostream& log) {
  BatchReport rep;
  rep.db_path = o.db_path, rep.regression = o.regression;
  db::Store store(o.db_path);
  for (const SuiteJob& job : jobs) {
    BatchItem& item = rep.items.emplace_back();
    item.job = job;
    item.ran = true;
    const auto runs = store.runs_of_job(job.document);
    if (runs.empty()) {
      item.exit_code = tuner::kExitBadInput;
      item.run_message = "no run of this job in " + o.db_path;
      continue;
    }
    const db::RunRow& newest = runs.back();
    item.run_id = newest.id, item.run_status = newest.status, item.run_message = newest.message;
    item.exit_code = newest.status == db::RunStatus::kDone          ? tuner::kExitOk
                     : newest.status == db::RunStatus::kNoDevice    ? tuner::kExitNoDevice
                     : newest.status == db::RunStatus::kInterrupted ? tuner::kExitInterrupted
                                                                    : tuner::kExitInternal;
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
    const bool has_times = item.run_status == db::RunStatus::kDone ||
                           item.run_status == db::RunStatus::kInterrupted ||
                           item.run_status == db::RunStatus::kNoDevice;
    if (!has_times || item.contexts.empty()) {
      std::string message = item.run_message.substr(0, item.run_message.find('\n'));
      if (message.size() > 100) message = message.substr(0, 97) + "...";
      out << item.status_text() << (message.empty() ? "" : ": " + message) << "\n";
      continue;
    }
    for (size_t k = 0; k < item.contexts.size(); ++k) {
      const BatchContext& c = item.contexts[k];
      if (k) out << std::string(indent, ' ');
      out << std::left << std::setw(14) << c.label << std::right << std::setw(12)
          << (c.best_ms                                        ? fixed(*c.best_ms, 4)
              : item.run_status == db::RunStatus::kNoDevice    ? std::string("not timed")
              : item.run_status == db::RunStatus::kInterrupted ? std::string("stopped")
                                                               : std::string("none correct"))
          << std::setw(22)
          << (c.previous_ms ? fixed(*c.previous_ms, 4) + " (" + std::to_string(c.previous_run) + ")"
                            : std::string("first run"));
      std::string change = "";
      if (auto ch = c.change()) change = (*ch >= 0 ? "+" : "") + fixed(100 * *ch, 1) + "%";
      out << std::setw(10) << change << (c.regression ? "  REGRESSION" : "");
      if (item.run_status == db::RunStatus::kInterrupted) out << "  (stopped early: not compared)";
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

std::string batch_report_markdown(const BatchReport& r) {
  std::ostringstream out;
  out << "# gputune batch report\n\n- database: `" << r.db_path << "`\n- jobs: " << r.items.size()
      << "\n- regression threshold: " << fixed(100 * r.regression, 1) << "% slower\n"
      << "- regressions: " << r.regressions << "\n- exit code: " << r.exit_code << "\n\n"
      << "| job | run | status | context | device | best ms | previous ms (run) | change | "
         "verdict |\n|---|---|---|---|---|---|---|---|---|\n";
  std::vector<std::string> notes;
  auto cell = [](std::string s) {
    for (size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2)
      s.replace(at, 1, "\\|");
    return s;
  };
  for (const BatchItem& item : r.items) {
    const std::string job = cell(item.job.file.filename().string());
    const std::string run = item.run_id ? std::to_string(item.run_id) : "-";
    if (!item.ran || item.contexts.empty()) {
      std::string why = !item.ran        ? "not run (the suite was stopped)"
                        : item.unchanged ? "unchanged: not re-tuned"
                                         : item.run_message.substr(0, item.run_message.find('\n'));
      out << "| " << job << " | " << run << " | " << cell(item.status_text()) << " | | | | | | "
          << cell(why) << " |\n";
      continue;
    }
    for (const BatchContext& c : item.contexts) {
      std::string change;
      if (auto ch = c.change()) change = (*ch >= 0 ? "+" : "") + fixed(100 * *ch, 1) + "%";
      out << "| " << job << " | " << run << " | " << item.status_text() << " | " << cell(c.label)
          << " | " << cell(c.device) << " | " << (c.best_ms ? fixed(*c.best_ms, 4) : "-") << " | "
          << (c.previous_ms ? fixed(*c.previous_ms, 4) + " (" + std::to_string(c.previous_run) + ")"
                            : "-")
          << " | " << change << " | " << verdict(c) << " |\n";
      if (c.confirmation) notes.push_back(job + ", " + c.label + ": " + c.confirmation->note);
    }
  }
  if (!notes.empty()) {
    out << "\n## Re-measured\n\n";
    for (const std::string& n : notes) out << "- " << n << "\n";
  }
  return out.str();
}

std::string batch_report_json(const BatchReport& r) {
  ordered_json jobs = ordered_json::array();
  for (const BatchItem& item : r.items) {
    ordered_json contexts = ordered_json::array();
    for (const BatchContext& c : item.contexts) {
      ordered_json j = {
          {"label", c.label},
          {"device", c.device},
          {"best_ms", c.best_ms ? ordered_json(*c.best_ms) : ordered_json()},
          {"previous_ms", c.previous_ms ? ordered_json(*c.previous_ms) : ordered_json()},
          {"previous_run", c.previous_run ? ordered_json(c.previous_run) : ordered_json()},
          {"change", c.change() ? ordered_json(*c.change()) : ordered_json()},
          {"regression", c.regression},
          {"verdict", verdict(c)}};
      if (c.confirmation) {
        const Confirmation& f = *c.confirmation;
        j["confirmation"] = {
            {"ran", f.ran},
            {"confirmed", f.confirmed},
            {"winner_config", f.winner_config},
            {"previous_config", f.previous_config},
            {"winner_ms", f.winner_ms ? ordered_json(*f.winner_ms) : ordered_json()},
            {"previous_config_ms",
             f.previous_config_ms ? ordered_json(*f.previous_config_ms) : ordered_json()},
            {"note", f.note}};
      }
      contexts.push_back(std::move(j));
    }
    jobs.push_back({{"job", item.job.file.string()},
                    {"exit_code", item.exit_code},
                    {"ran", item.ran},
                    {"run", item.run_id ? ordered_json(item.run_id) : ordered_json()},
                    {"status", item.status_text()},
                    {"message", item.run_message},
                    {"unchanged", item.unchanged},
                    {"contexts", contexts}});
  }
  ordered_json out = {{"database", r.db_path},        {"regression_threshold", r.regression},
                      {"regressions", r.regressions}, {"interrupted", r.interrupted},
                      {"exit_code", r.exit_code},     {"jobs", jobs}};
  return out.dump(2) + "\n";
}

}  // namespace gputune::app
