#include "app/job_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "variants/instantiate.h"

namespace gputune::app {

namespace fs = std::filesystem;

namespace {

fs::path absolute_normal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

std::optional<std::string> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

bool under(const fs::path& p, const fs::path& root) {
  const std::string r = root.lexically_normal().string();
  const std::string s = p.lexically_normal().string();
  return s.size() > r.size() && s.compare(0, r.size(), r) == 0 &&
         (r.back() == '/' || s[r.size()] == '/');
}

/// `path` of the submitting machine under `root`, or nothing when it would not lie under it
/// (a NUL byte would cut the path short where the system reads it: nothing either).
std::optional<fs::path> mirror_of(const fs::path& root, const fs::path& path) {
  if (path.native().find('\0') != std::string::npos || path.relative_path().empty())
    return std::nullopt;
  fs::path m = (root / path.relative_path()).lexically_normal();
  if (!under(m, root)) return std::nullopt;
  return m;
}

/// The folder that holds the worker's folder: created private (0700) when missing, and refused
/// when it is a symbolic link, another user's, or writable by others, any of whom could put a
/// link where a job's file is about to be written.
void check_private_parent(const fs::path& parent) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(parent, ec))) {
    fs::create_directories(parent.parent_path(), ec);
    ::mkdir(parent.c_str(), 0700);
  }
  struct stat st {};
  if (::lstat(parent.c_str(), &st) != 0)
    throw std::runtime_error("cannot create " + parent.string() + ": " + std::strerror(errno));
  const std::string is = S_ISLNK(st.st_mode)        ? "a symbolic link"
                         : !S_ISDIR(st.st_mode)     ? "not a folder"
                         : st.st_uid != ::geteuid() ? "another user's"
                         : (st.st_mode & 022)       ? "writable by others"
                                                    : "";
  if (!is.empty())
    throw std::runtime_error(parent.string() + " is " + is +
                             ": the worker writes jobs' files only under a folder of its own user "
                             "that others cannot write; remove it");
}

/// Writes `bytes` at `p`, which lies under `root`: refused when a folder on the way resolves
/// outside `root` (a symbolic link), and never through a link at `p` itself (O_NOFOLLOW).
void write_file(const fs::path& root, const fs::path& p, const std::string& bytes) {
  std::error_code ec, real_ec;
  fs::create_directories(p.parent_path(), ec);
  const fs::path real_root = fs::canonical(root, real_ec);
  const fs::path real_parent = real_ec ? fs::path() : fs::canonical(p.parent_path(), real_ec);
  if (!real_ec && real_parent != real_root && !under(real_parent, real_root))
    throw std::runtime_error("cannot write " + p.string() + ": its folder leads out of " +
                             root.string());
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot write " + p.string() + " (" +
                             (ec ? ec.message() : std::string(std::strerror(errno))) + ")");
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw std::runtime_error("cannot write " + p.string() + " (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    throw std::runtime_error("cannot write " + p.string() + " (" + std::strerror(errno) + ")");
}

}  // namespace

std::vector<JobFile> job_files(const Job& job, const std::string& kernel_source) {
  std::map<std::string, std::string> files;  // path -> bytes: sorted, each once
  const fs::path kernel = absolute_normal(job.kernel_file);
  // The headers, searched as NVRTC will search them.
  for (const fs::path& header : cuda::own_header_files(kernel_source, job_options(job))) {
    if (header == kernel) continue;
    if (auto bytes = read_bytes(header)) files[header.string()] = std::move(*bytes);
  }
  // The BinaryRaw inputs, resolved as the argument loader resolves them.
  auto add_data = [&](const std::string& source, const std::string& field) {
    if (source.empty()) return;
    const fs::path p = absolute_normal(
        fs::path(source).is_absolute() ? fs::path(source) : job.file.parent_path() / source);
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return;  // the argument check names it where the job runs
    auto bytes = read_bytes(p);
    if (!bytes)
      throw JobError(job.file.string(), field, "cannot read '" + p.string() + "'",
                     "make the file readable, or give a path relative to the job file");
    files[p.string()] = std::move(*bytes);
  };
  for (size_t i = 0; i < job.arguments.size(); ++i)
    if (job.arguments[i].fill_type == "BinaryRaw")
      add_data(job.arguments[i].data_source,
               "KernelSpecification.Arguments[" + std::to_string(i) + "].DataSource");
  for (size_t i = 0; i < job.references.size(); ++i)
    if (job.references[i].fill_type == "BinaryRaw")
      add_data(job.references[i].data_source,
               "KernelSpecification.ReferenceArguments[" + std::to_string(i) + "].DataSource");
  std::vector<JobFile> out;
  for (auto& [path, bytes] : files) out.push_back({path, std::move(bytes)});
  return out;
}

fs::path mirrored(const fs::path& root, const std::string& path) {
  if (auto m = mirror_of(root, path)) return *m;
  throw std::runtime_error("'" + path + "' does not lie under " + root.string());
}

fs::path write_out(const fs::path& root, const SubmittedJob& job) {
  check_private_parent(root.parent_path());
  std::error_code ec;
  fs::remove_all(root, ec);  // nothing of the job before may be found by this one (links included)
  if (::mkdir(root.c_str(), 0700) != 0)
    throw std::runtime_error("cannot create " + root.string() + ": " + std::strerror(errno));
  const fs::path client_job = fs::path(job.job_file).is_absolute()
                                  ? fs::path(job.job_file).lexically_normal()
                                  : fs::path("/submitted") / fs::path(job.job_file).filename();
  const fs::path job_path = mirrored(root, client_job.string());
  auto doc = nlohmann::json::parse(job.document);
  if (doc.contains("GPUTune") && doc["GPUTune"].is_object()) doc["GPUTune"].erase("Database");
  write_file(root, job_path, doc.dump(1));
  // The kernel where KernelFile points from the submitted job file.
  const auto* kf = doc.contains("KernelSpecification") && doc["KernelSpecification"].is_object() &&
                           doc["KernelSpecification"].contains("KernelFile") &&
                           doc["KernelSpecification"]["KernelFile"].is_string()
                       ? &doc["KernelSpecification"]["KernelFile"]
                       : nullptr;
  if (kf) {
    const fs::path k(kf->get<std::string>());
    const fs::path client_kernel =
        (k.is_absolute() ? k : client_job.parent_path() / k).lexically_normal();
    write_file(root, mirrored(root, client_kernel.string()), job.kernel_source);
  }
  for (const JobFile& f : job.files) {
    if (!fs::path(f.path).is_absolute())
      throw std::runtime_error("file path '" + f.path + "' is not absolute");
    write_file(root, mirrored(root, f.path), f.bytes);
  }
  return job_path;
}

void use_copies(Job& job, const fs::path& root, const std::string& client_cwd) {
  auto copy_of = [&](const fs::path& client) -> std::optional<fs::path> {
    if (!client.is_absolute()) return std::nullopt;
    // Normal first: a path that climbs above the worker's folder with `..` (a KernelFile past
    // the submitting machine's /) stops at its /, as it did there, where write_out put the copy.
    auto m = mirror_of(root, client.lexically_normal());
    std::error_code ec;
    if (!m || !fs::exists(*m, ec)) return std::nullopt;
    return m;
  };
  if (job.kernel_file.is_absolute() && !under(job.kernel_file, root))
    if (auto m = copy_of(job.kernel_file)) job.kernel_file = *m;
  for (auto& a : job.arguments)
    if (fs::path(a.data_source).is_absolute())
      if (auto m = copy_of(a.data_source)) a.data_source = m->string();
  for (auto& r : job.references)
    if (fs::path(r.data_source).is_absolute())
      if (auto m = copy_of(r.data_source)) r.data_source = m->string();
  // Include folders: the copies first, then the folder named (for headers that were not sent:
  // the toolkit's and the system's). From the back, so that inserting keeps earlier indices.
  auto opts = cuda::include_options(job.compiler_options);
  for (auto it = opts.rbegin(); it != opts.rend(); ++it) {
    fs::path folder(it->folder);
    if (!folder.is_absolute()) {
      if (client_cwd.empty()) continue;
      folder = fs::path(client_cwd) / folder;
    }
    auto m = copy_of(folder);
    std::error_code ec;
    if (!m || !fs::is_directory(*m, ec)) continue;
    auto& o = job.compiler_options;
    if (it->prefix.empty())  // "-I" "dir": the flag is the option before
      o.insert(o.begin() + static_cast<std::ptrdiff_t>(it->index - 1),
               {o[it->index - 1], m->string()});
    else
      o.insert(o.begin() + static_cast<std::ptrdiff_t>(it->index), it->prefix + m->string());
  }
}

}  // namespace gputune::app
