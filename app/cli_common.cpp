/** \file app/cli_common.cpp
 * Owns: what every command of the command line shares: --help and missing options, the database a
 * command uses, the options several commands take (--gpu, --budget, --model-analyses,
 * --max-restarts), and writing an output file whole or not at all.
 * Must not: tune, compile or store anything itself.
 */
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "app/cli.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "tuner/measure/device_info.h"
#include "tuner/run/pipeline.h"

namespace gputune::app {

/// Wide enough for every option and its one-line description on one line of `--help`.
constexpr std::size_t kHelpWidth = 118;

cxxopts::Options command_options(const std::string& command, const std::string& description) {
  cxxopts::Options o(command, description);
  o.set_width(kHelpWidth);
  return o;
}

const char* const kModelAnalysesHelp =
    "search a space larger than N by the model; 0: analyse it all (default: job's, else 20000)";

/// --help, or a missing required option: print the command's help; the exit code to return.
std::optional<int> help_or_missing(const cxxopts::Options& o, const cxxopts::ParseResult& r,
                                   const char* required) {
  bool help = r.count("help") > 0;
  if (!help && (!required || r.count(required))) return std::nullopt;
  std::cout << o.help() << "\n";
  return help ? 0 : tuner::kExitBadInput;
}

std::string string_option(const cxxopts::ParseResult& r, const std::string& name) {
  return r.count(name) ? r[name].as<std::string>() : std::string();
}

std::string db_of(const cxxopts::ParseResult& r) {
  return r.count("db") ? r["db"].as<std::string>() : db::default_database_path();
}

// Ctrl-C or SIGTERM (tuner/common/stop_signals.h) during `run`: the run stops before the next
// variant is measured and stores what it has as an interrupted run (exit 5; it can be resumed).
// During `check` and `generate --check`: the launch on the CPU stops at once, and what was checked
// before is reported (exit 5). A second one ends the process at once.

/// --gpu N: the CUDA device to use instead of the job's GPUTune.Device.Index, checked now when a
/// driver is present (the error names --gpu and the devices there are).
void apply_gpu_option(const cxxopts::ParseResult& r, Job& job) {
  if (!r.count("gpu")) return;
  job.device_index = r["gpu"].as<int>();
  if (cuda::Driver::instance().available()) (void)tuner::job_device(job, "command line", "--gpu");
}

/// --budget N of `run` and `batch`: configurations measured, at least 1.
std::uint64_t budget_option(const cxxopts::ParseResult& r) {
  const auto n = r["budget"].as<std::uint64_t>();
  if (n == 0)
    throw JobError("command line", "--budget", "a budget of 0 configurations measures nothing",
                   "give a positive number of configurations");
  return n;
}

/// --model-analyses N of `run` and `prune`: a space larger than N is searched by the model
/// (tuner/model/space_search.h); 0: never, the whole space is analysed.
std::uint64_t model_analyses_option(const cxxopts::ParseResult& r) {
  const std::int64_t n = r["model-analyses"].as<std::int64_t>();
  if (n < 0 || n == 1)
    throw JobError("command line", "--model-analyses", std::to_string(n) + " analyses",
                   "give 0 (analyse the whole space) or at least 2");
  return n == 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(n);
}

/// --max-restarts N of `run` and `batch`.
int max_restarts_option(const cxxopts::ParseResult& r) {
  const int n = r["max-restarts"].as<int>();
  if (n < 0 || n > 1000000)
    throw JobError("command line", "--max-restarts", std::to_string(n) + " restarts",
                   "give a number from 0 (stop at the first hung kernel) to 1000000");
  return n;
}

const char* const kCompileNiceHelp =
    "nice steps the compile threads run below normal, 0..19 (default 10; 0: normal priority)";

std::optional<int> apply_compile_nice(const cxxopts::ParseResult& r) {
  if (!r.count("compile-nice")) return std::nullopt;
  const int n = r["compile-nice"].as<int>();
  try {
    cuda::set_compile_nice(n);  // checks the range
  } catch (const std::invalid_argument&) {
    throw JobError("command line", "--compile-nice", std::to_string(n) + " steps",
                   "give a number from 0 (compile at normal priority) to 19 (the lowest)");
  }
  return n;
}

/// What loading the job noted (keys outside the T1 schema, a naive kernel tuned over block shape
/// only), on stderr; `run` prints the same through the pipeline's log.
void print_job_notes(const Job& job) {
  for (const std::string& n : job.notes) std::cerr << "gputune: note: " << n << "\n";
}

/// Writes `text` to `file` through a temporary file beside it and a rename, so an existing file
/// is replaced whole or not at all. False (with the reason on stderr) when it cannot.
bool write_file_atomically(const std::string& file, const std::string& text) {
  const std::string tmp = file + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::cerr << "gputune: cannot write " << file << ": " << std::strerror(errno) << "\n";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    std::cerr << "gputune: cannot write " << file << ": " << std::strerror(errno) << "\n";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

/// Today's date in UTC, as 2026-11-24.
int write_output(const std::string& file, const std::string& text) {
  if (file == "-") {
    std::cout << text;
    return 0;
  }
  if (!write_file_atomically(file, text)) return tuner::kExitBadInput;
  std::cerr << "gputune: wrote " << file << "\n";
  return 0;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

/// The database a reading command (best, show, runs, export) looks in: it must exist already, so
/// a mistyped --db is an error instead of a new, empty database.
db::Store existing_store(const cxxopts::ParseResult& r) {
  const std::string path = db_of(r);
  if (!std::filesystem::exists(path))
    throw JobError("command line", r.count("db") ? "--db" : "$GPUTUNE_DB / ./gputune.db",
                   "there is no database at " + path,
                   "give the database a run stored to (gputune run creates it)");
  return db::Store(path);
}

}  // namespace gputune::app
