/** \file app/cli_interchange.cpp
 * Owns: the interchange commands: export (T4) and import (Kernel Tuner cache, T4). The formats
 * live in db/interchange.h.
 * Must not: read or write any format itself.
 */
#include <iostream>

#include "app/cli.h"
#include "db/interchange.h"

namespace gputune::app {
int cmd_export(int argc, char** argv) {
  auto o = command_options("gputune export", "Export results");
  o.add_options()("t4", "T4 format (the only one so far)")(
      "run", "run id (default: all runs)", cxxopts::value<long>()->default_value("0"))(
      "context", "context label (where the run measured several; a T4 file holds one)",
      cxxopts::value<std::string>())("kernel", "kernel name (where the runs tuned several kernels)",
                                     cxxopts::value<std::string>())(
      "o,output", "output file (default: stdout)", cxxopts::value<std::string>())(
      "db", "database file", cxxopts::value<std::string>())("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "t4")) return *rc;
  db::Store store = existing_store(r);
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

}  // namespace gputune::app
