/** \file app/job_files.h
 * Owns: the files a job reads besides its JSON and its kernel (its own headers, BinaryRaw
 * inputs), gathered where the job is submitted and written out, each at its submitting
 * machine's path under a folder of the daemon's worker, where the job then loads as it did there.
 * Must not: queue, send or store anything (db/ and web/ do), or compile. */
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "variants/job.h"

namespace gputune::app {

struct JobFile {
  std::string path;  ///< absolute and normal, on the machine that submitted the job
  std::string bytes;
};

/// What `job` reads besides its JSON and its kernel: the job's own headers `kernel_source`
/// includes (own_header_files: quoted ones, and angle-bracket ones from -I folders that are not
/// the system's; and what they include), found as the compiler finds them, and the BinaryRaw
/// DataSources of its arguments and references; sorted by path. A file that cannot be found is
/// left out (the compile or the argument check says so where the job runs). Throws JobError
/// naming the field when a DataSource exists but cannot be read.
std::vector<JobFile> job_files(const Job& job, const std::string& kernel_source);

/// An absolute path of the submitting machine, under `root`. Throws std::runtime_error when it
/// would not lie under `root`.
std::filesystem::path mirrored(const std::filesystem::path& root, const std::string& path);

/// A queued job as the worker receives it.
struct SubmittedJob {
  std::string job_file;  ///< absolute on the submitting machine (else a name: under /submitted)
  std::string document;  ///< the T1 JSON as submitted
  std::string kernel_source;
  std::vector<JobFile> files;
  std::string client_cwd;  ///< where relative -I folders were meant; "" if unknown
};

/// Empties `root` and writes the job, its kernel and its files there, each at its submitting
/// machine's path (`GPUTune.Database` left out: the worker stores in the daemon's database).
/// Nothing is written outside `root`: `..` cannot climb above it, a link left in it is removed
/// with it, a file is never written through a link, and `root`'s parent (created 0700 when
/// missing) must be a folder of this user's that others cannot write, so none can put one there.
/// Returns the job file written. Throws std::runtime_error naming a path that cannot be written
/// or that is not absolute, or the parent that is not private.
std::filesystem::path write_out(const std::filesystem::path& root, const SubmittedJob& job);

/// Points a job loaded from what write_out wrote at the copies under `root`: an absolute
/// KernelFile or DataSource, and each -I folder that has copies (searched before the folder it
/// names, which stays for headers that were not sent). The document is not changed, so a resume
/// compares the job as it was submitted.
void use_copies(Job& job, const std::filesystem::path& root, const std::string& client_cwd);

}  // namespace gputune::app
