/** \file tuner/run/pipeline.h
 * Owns: the order of the stages of `gputune run`, in one place (like Halide's Lower.cpp):
 * job -> space -> the run's row -> the default configuration compiled and measured at once while
 * the model plans and analyses on other cores -> per context, a stream: the strategy proposes,
 * the NVRTC pool compiles a bounded look-ahead, each cubin is measured (GPU) as soon as it is
 * ready and its outcome reported back -> every outcome stored as it comes (the fastest so far is
 * the provisional winner) -> re-measure the top few -> winners. The stages live in the files
 * tuner/run/run_stages.h names. Each is logged; with GPUTUNE_TIME_STAGES set, timed.
 * Consumes: Job, RunOptions (run_options.h). Produces: RunReport (run_report.h) and rows in
 * the database.
 * Runs after: the command line (app/cli_tuning.cpp) and the job's loading (common/tuning_job.h);
 * before: nothing in tuner/ (export, batch reports and the dashboard read what it stored).
 * Must not: parse command lines (main.cpp does) or write SQL (db/ does). */
#pragma once

#include "tuner/run/run_options.h"
#include "tuner/run/run_report.h"
#include "variants/job.h"

namespace gputune::tuner {

/// Runs the whole pipeline. Throws JobError (bad input) and db::DbError (bad database) before
/// anything is written; other failures are recorded per variant.
RunReport run_job(const Job& job, const RunOptions& options);

}  // namespace gputune::tuner
