#include "app/job_files.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "tuner/compile.h"
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

/// `path` of the submitting machine under `root`, or nothing when it would not lie under it.
std::optional<fs::path> mirror_of(const fs::path& root, const fs::path& path) {
  fs::path m = (root / path.relative_path()).lexically_normal();
  if (!under(m, root)) return std::nullopt;
  return m;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + p.string() +
                             (ec ? " (" + ec.message() + ")" : std::string()));
}

}  // namespace

std::vector<JobFile> job_files(const Job& job, const std::string& kernel_source) {
  std::map<std::string, std::string> files;  // path -> bytes: sorted, each once
  const fs::path kernel = absolute_normal(job.kernel_file);
  // The headers, searched as NVRTC will search them.
  for (const fs::path& header : tuner::own_header_files(kernel_source, job_options(job))) {
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
  std::error_code ec;
  fs::remove_all(root, ec);  // nothing of the job before may be found by this one
  const fs::path client_job = fs::path(job.job_file).is_absolute()
                                  ? fs::path(job.job_file).lexically_normal()
                                  : fs::path("/submitted") / fs::path(job.job_file).filename();
  const fs::path job_path = mirrored(root, client_job.string());
  auto doc = nlohmann::json::parse(job.document);
  if (doc.contains("GPUTune") && doc["GPUTune"].is_object()) doc["GPUTune"].erase("Database");
  write_file(job_path, doc.dump(1));
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
    write_file(mirrored(root, client_kernel.string()), job.kernel_source);
  }
  for (const JobFile& f : job.files) {
    if (!fs::path(f.path).is_absolute())
      throw std::runtime_error("file path '" + f.path + "' is not absolute");
    write_file(mirrored(root, f.path), f.bytes);
  }
  return job_path;
}

void use_copies(Job& job, const fs::path& root, const std::string& client_cwd) {
  auto copy_of = [&](const fs::path& client) -> std::optional<fs::path> {
    if (!client.is_absolute()) return std::nullopt;
    auto m = mirror_of(root, client);
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
  auto opts = tuner::include_options(job.compiler_options);
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
