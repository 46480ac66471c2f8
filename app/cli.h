/** \file app/cli.h
 * Owns: the command line's internal interface: one function per command (`gputune COMMAND`,
 * defined in cli_tuning.cpp, cli_inspect.cpp, cli_interchange.cpp and cli_service.cpp by command
 * group) and the option helpers they share (cli_common.cpp). main.cpp dispatches to them.
 * Internal to app/: nothing outside app/ includes it.
 * Must not: hold what a command does; each command parses its options, calls one library entry
 * point and prints its result.
 */
#pragma once

#include <cstdint>
#include <cxxopts.hpp>
#include <optional>
#include <string>

#include "db/store.h"
#include "tuner/common/exit_codes.h"
#include "variants/job.h"

namespace gputune::app {

// Tuning (cli_tuning.cpp).
int cmd_run(int argc, char** argv);
int cmd_batch(int argc, char** argv);
int cmd_space(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_prune(int argc, char** argv);
int cmd_replay(int argc, char** argv);
// Inspection (cli_inspect.cpp).
int cmd_best(int argc, char** argv);
int cmd_show(int argc, char** argv);
int cmd_runs(int argc, char** argv);
int cmd_cache(int argc, char** argv);
int cmd_devices();
// Interchange (cli_interchange.cpp).
int cmd_export(int argc, char** argv);
int cmd_import(int argc, char** argv);
/// `db merge OUT SHARD...` (the `db` command's subcommands).
int cmd_db(int argc, char** argv);
// Service (cli_service.cpp).
int cmd_serve(int argc, char** argv);
int cmd_worker(int argc, char** argv);
int cmd_submit(int argc, char** argv);
int cmd_cancel(int argc, char** argv);

// Shared by several commands (cli_common.cpp).

/// --help, or a missing required option: print the command's help; the exit code to return.
std::optional<int> help_or_missing(const cxxopts::Options& o, const cxxopts::ParseResult& r,
                                   const char* required);
/// A string option's value, or "" when it was not given.
std::string string_option(const cxxopts::ParseResult& r, const std::string& name);
/// --db, else $GPUTUNE_DB, else ./gputune.db.
std::string db_of(const cxxopts::ParseResult& r);
/// --gpu N: the CUDA device to use instead of the job's GPUTune.Device.Index.
void apply_gpu_option(const cxxopts::ParseResult& r, Job& job);
/// --budget N of `run` and `batch`: configurations measured, at least 1.
std::uint64_t budget_option(const cxxopts::ParseResult& r);
/// --model-analyses N of `run` and `prune`.
std::uint64_t model_analyses_option(const cxxopts::ParseResult& r);
/// --max-restarts N of `run` and `batch`.
int max_restarts_option(const cxxopts::ParseResult& r);
/// --compile-nice N (run, batch, serve): how far below normal the compile threads run
/// (tuner::set_compile_nice), set now; the value given, to pass on to child processes.
std::optional<int> apply_compile_nice(const cxxopts::ParseResult& r);
extern const char* const kCompileNiceHelp;
/// What loading the job noted, on stderr.
void print_job_notes(const Job& job);
/// Replaces `file` whole or not at all; false (with the reason on stderr) when it cannot.
bool write_file_atomically(const std::string& file, const std::string& text);
/// `text` to `file` (whole or not at all, then "gputune: wrote FILE" on stderr), or to stdout
/// when `file` is "-"; the exit code (kExitBadInput, with the reason on stderr, when it cannot).
int write_output(const std::string& file, const std::string& text);
/// Today's date in UTC, as 2026-11-24.
std::string today_utc();
/// The database a reading command looks in; it must exist already.
db::Store existing_store(const cxxopts::ParseResult& r);

/// The help text of --model-analyses (`run` and `prune`).
extern const char* const kModelAnalysesHelp;

/// Every command's options: one line each in `--help` (descriptions longer than a line are
/// cut by cxxopts' wrapping otherwise). The details are in docs/commands.md.
cxxopts::Options command_options(const std::string& command, const std::string& description);

}  // namespace gputune::app
