/** \file tuner/common/tuning_job.h
 * Owns: loading a job to tune, as every command that tunes, checks or ranks one does: the T1 file
 * (variants/job.h), and for a naive job (GPUTune.Naive) the analysis of its kernel and the space
 * and geometry generated from it (variants/naive/naive.h), or the fall-back to block shape only
 * with the reason when the kernel is outside the generator's subset.
 * Runs before: every command's own stages (run/pipeline.h, tools/, emulator/cpu_check.h).
 * Must not: compile, launch or touch the database. */
#pragma once

#include <filesystem>

#include "variants/job.h"

namespace gputune::tuner {

/// For a naive job: analyses the kernel and applies the generated space (naive::apply_to_job);
/// for a kernel outside the subset, sets job.naive_fallback and tunes block shape only.
/// Nothing for other jobs.
void prepare_naive(Job& job);

/// load_job + prepare_naive: what every command that tunes uses.
Job load_tuning_job(const std::filesystem::path& file);

}  // namespace gputune::tuner
