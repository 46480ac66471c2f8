/** \file cuda/header_digest.h
 * Owns: finding a kernel's own headers (those its source includes from the job's folders, not
 * the toolkit's or the system's) and their digest, which the cubin cache and the pruner's
 * analysis cache put in their keys, so that editing a header compiles again.
 * Consumes: a source and its compile options. Produces: a digest and the files it read.
 * Runs before: CubinCache::key (cuda/cubin_cache.h), the analysis cache (pruner/).
 * Must not: compile, launch, or touch the database. */
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace gputune::cuda {

/// An include folder named by compile options: `options[index]` is `prefix + folder` (`-Idir`,
/// `--include-path=dir`; the prefix is empty when the folder follows `-I` or `--include-path`
/// as an option of its own).
struct IncludeOption {
  size_t index = 0;
  std::string prefix, folder;
};
std::vector<IncludeOption> include_options(const std::vector<std::string>& options);

/// A digest of the job's own headers: those a source includes with quotes (`#include "x.h"`),
/// searched in the including file's folder, then the `-I`/`--include-path` folders of `options`,
/// then the working directory (a file not found counts as missing), and those it includes with
/// angle brackets that lie in an `-I` folder that is not the toolkit's or the system's; then
/// what those include, in turn. Each by the name it is included as and its content, not by
/// where it lies. The cubin and analysis caches put it in their keys, so editing a header
/// compiles again. Memoized per source and options.
std::string own_headers_digest(const std::string& source, const std::vector<std::string>& options);

/// The files the digest above reads (the job's own headers), absolute and normal, in include
/// order.
std::vector<std::filesystem::path> own_header_files(const std::string& source,
                                                    const std::vector<std::string>& options);

}  // namespace gputune::cuda
