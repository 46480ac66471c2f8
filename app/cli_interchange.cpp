/** \file app/cli_interchange.cpp
 * Owns: the interchange commands: export (T4, decision files, Kernel Launcher wisdom files),
 * import (Kernel Tuner cache, T4) and db merge (shards into one database). The formats live in
 * db/interchange.h, select/decision_table.h and select/wisdom.h; merging in db/merge.h.
 * Must not: read or write any format itself.
 */
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "app/cli.h"
#include "db/interchange.h"
#include "db/merge.h"
#include "select/decision_table.h"
#include "select/wisdom.h"

namespace gputune::app {
namespace {

std::string ratio_text(const select::LooFigures& f) {
  if (f.contexts == f.unknown) return "unknown";
  char buf[64];
  std::snprintf(buf, sizeof buf, "median %.3fx, worst %.3fx", f.median, f.worst);
  return buf;
}

/// `export --decisions FILE`: the decision table of the stored winners (select/), and on stderr
/// what each device's rule is and how it did in leave-one-out.
int export_decisions(db::Store& store, const cxxopts::ParseResult& r) {
  const std::string file = r["decisions"].as<std::string>();
  select::DecisionTable t = select::table_from_store(store, string_option(r, "kernel"));
  if (t.kernels.empty()) {
    std::cerr << "gputune: no winner stored"
              << (r.count("kernel") ? " for kernel '" + string_option(r, "kernel") + "'" : "")
              << " in " << db_of(r) << ": nothing to decide. Fix: tune it first (`gputune run "
              << "JOB`).\n";
    return tuner::kExitBadInput;
  }
  t.origin = db_of(r), t.generated = today_utc();
  const std::string text = select::to_json(t, !r.count("no-source")).dump() + "\n";
  if (file == "-")
    std::cout << text;
  else if (!write_file_atomically(file, text))
    return tuner::kExitBadInput;
  for (const select::KernelTable& k : t.kernels)
    for (const select::DeviceTable& d : k.devices) {
      std::cerr << "gputune: " << k.name << " on " << d.name << ": " << d.inputs.size()
                << " context(s), untuned inputs by " << select::to_string(d.method);
      if (d.loo)
        std::cerr << " (leave-one-out: nearest " << ratio_text(d.loo->nearest) << "; learned "
                  << ratio_text(d.loo->learned) << "; largest input's winner "
                  << ratio_text(d.loo->largest) << ")";
      std::cerr << "\n";
    }
  if (file != "-") std::cerr << "gputune: wrote " << file << " (" << text.size() << " bytes)\n";
  return 0;
}

/// `export --wisdom DIR`: one Kernel Launcher wisdom file per tuned kernel (select/wisdom.h).
int export_wisdom(const cxxopts::ParseResult& r) {
  db::Store store = existing_store(r);
  const std::string kernel = string_option(r, "kernel");
  const std::filesystem::path dir = r["wisdom"].as<std::string>();
  // Kernel Launcher's writer keeps each context's 5 fastest: keep as many candidates.
  const select::DecisionTable table = select::table_from_store(store, kernel, 5);
  if (table.kernels.empty()) {
    std::cerr << "gputune: no winner stored"
              << (kernel.empty() ? "" : " for kernel '" + kernel + "'") << " in " << db_of(r)
              << ". Fix: tune it first (`gputune run`), or name a kernel `gputune best` lists.\n";
    return tuner::kExitBadInput;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::cerr << "gputune: --wisdom " << dir.string() << ": cannot create the folder ("
              << ec.message() << "). Fix: give a folder you can write to.\n";
    return tuner::kExitBadInput;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  for (const select::WisdomFile& f : select::to_wisdom(table, {5, date})) {
    const std::string path = (dir / f.file_name).string();
    if (!write_file_atomically(path, f.text)) return tuner::kExitBadInput;
    std::cerr << "gputune: wrote " << path << " (" << f.records << " records of kernel '"
              << f.kernel << "')\n";
    for (const std::string& note : f.notes) std::cerr << "gputune: note: " << note << "\n";
  }
  return 0;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  auto o = command_options("gputune export", "Export results");
  o.add_options()("t4", "T4 results of runs")(
      "decisions", "decision file of the winners for gputune::select, to FILE ('-': stdout)",
      cxxopts::value<std::string>())("no-source", "--decisions without the kernels' sources")(
      "wisdom", "Kernel Launcher wisdom files (<kernel>.wisdom) into folder DIR",
      cxxopts::value<std::string>())("run", "run id (default: all runs)",
                                     cxxopts::value<long>()->default_value("0"))(
      "context", "context label (where the run measured several; a T4 file holds one)",
      cxxopts::value<std::string>())("kernel", "kernel name (where the runs tuned several kernels)",
                                     cxxopts::value<std::string>())(
      "o,output", "output file (default: stdout)", cxxopts::value<std::string>())(
      "db", "database file", cxxopts::value<std::string>())("h,help", "help");
  auto r = o.parse(argc, argv);
  if (!r.count("help") && r.count("wisdom")) return export_wisdom(r);
  if (auto rc = help_or_missing(o, r, r.count("decisions") ? nullptr : "t4")) return *rc;
  db::Store store = existing_store(r);
  if (r.count("decisions")) return export_decisions(store, r);
  long run = r["run"].as<long>();
  if (run && !store.run(run)) {
    std::cerr << "gputune: no run " << run << " in " << db_of(r) << "\n";
    return 2;
  }
  std::string doc =
      db::export_t4(store, run, string_option(r, "context"), string_option(r, "kernel"));
  if (r.count("output")) {
    if (!write_file_atomically(r["output"].as<std::string>(), doc + "\n"))
      return tuner::kExitBadInput;
  } else {
    std::cout << doc << "\n";
  }
  return 0;
}

int cmd_import(int argc, char** argv) {
  auto o = command_options("gputune import",
                           "Import a Kernel Tuner cache file or a T4 results file as measurements");
  o.add_options()("file", "Kernel Tuner cache or T4 file (.json or .json.gz)",
                  cxxopts::value<std::string>())(
      "kernel", "kernel name (a T4 file from elsewhere names none)", cxxopts::value<std::string>())(
      "device", "the GPU it ran on, as the driver names it (a T4 file from elsewhere names none)",
      cxxopts::value<std::string>())("context",
                                     "context label (default: the file's, else its problem size)",
                                     cxxopts::value<std::string>())(
      "db", "database file", cxxopts::value<std::string>())("h,help", "help");
  o.parse_positional({"file"});
  o.positional_help("FILE");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "file")) return *rc;
  db::Store store(db_of(r));
  db::ImportSummary s;
  try {
    s = db::import_measurements(
        store, r["file"].as<std::string>(),
        {string_option(r, "kernel"), string_option(r, "device"), string_option(r, "context")});
  } catch (const db::DbError&) {
    throw;
  } catch (const std::runtime_error& e) {
    std::cerr << "gputune: error: " << e.what() << " (nothing was imported)\n";
    return tuner::kExitBadInput;
  }
  std::cout << "imported " << s.measurements << " measurements (" << s.correct << " correct, "
            << s.failed << " failed) of " << s.kernel << " on " << s.device << ", context "
            << s.context << ", as run " << s.run_id << "; best " << s.best_ms << " ms at "
            << s.best_key
            << (s.parameter_order.empty() ? "" : "; parameters in " + s.parameter_order) << "\n";
  return 0;
}

namespace {

/// `db merge OUT SHARD...`: db::merge_shards, its report on stdout, its progress on stderr.
int db_merge(int argc, char** argv) {
  auto o = command_options("gputune db merge",
                           "Merge gputune databases (shards) into OUT, idempotently, in one "
                           "transaction");
  o.add_options()("out", "the database to merge into (created when missing)",
                  cxxopts::value<std::string>())("shards", "the databases to merge (never changed)",
                                                 cxxopts::value<std::vector<std::string>>())(
      "temp-dir", "folder for the shards' copies while merging (default: beside OUT)",
      cxxopts::value<std::string>())("q,quiet", "no progress on stderr")("h,help", "help");
  o.parse_positional({"out", "shards"});
  o.positional_help("OUT SHARD...");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "shards")) return *rc;
  db::MergeOptions options;
  options.temp_dir = string_option(r, "temp-dir");
  if (!r.count("quiet"))
    options.note = [](const std::string& line) { std::cerr << "gputune: " << line << "\n"; };
  const std::string out = r["out"].as<std::string>();
  const auto start = std::chrono::steady_clock::now();
  db::MergeReport rep = db::merge_shards(out, r["shards"].as<std::vector<std::string>>(), options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const db::ShardMergeReport& s : rep.shards) {
    if (s.skipped) {
      std::cout << s.path << ": OUT itself, skipped\n";
      continue;
    }
    std::cout << s.path << ": schema " << s.schema_version << (s.migrated ? " (migrated copy)" : "")
              << ", " << s.measurements_added << " of " << s.measurements << " measurements new, "
              << s.runs_added << " runs new, " << s.runs_updated << " runs further along, "
              << s.calibrations_added << " calibrations and " << s.plans_added << " plans new\n";
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  std::cout << (rep.created ? "created " : "merged into ") << out << ": " << rep.measurements_added
            << " measurements added (" << rep.measurements_total << " in all), "
            << rep.winners_changed << " winners new or changed, in " << secs << " s\n";
  return 0;
}

}  // namespace

int cmd_db(int argc, char** argv) {
  const std::string sub = argc > 1 ? argv[1] : "";
  if (sub == "merge") return db_merge(argc - 1, argv + 1);
  std::cerr << (sub.empty() || sub == "-h" || sub == "--help"
                    ? ""
                    : "gputune db: unknown subcommand '" + sub + "'\n")
            << "usage: gputune db merge OUT SHARD...   merge gputune databases into OUT "
               "(`gputune db merge --help`)\n";
  return sub == "-h" || sub == "--help" ? 0 : tuner::kExitBadInput;
}

}  // namespace gputune::app
