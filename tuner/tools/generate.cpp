// Naive-kernel entry points of the tuner: see generate.h.
#include "tuner/tools/generate.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tuner/common/command_line.h"
#include "tuner/emulator/cpu_check.h"
#include "tuner/emulator/cpu_emulator.h"
#include "tuner/measure/arguments.h"
#include "tuner/run/pipeline.h"
#include "variants/instantiate.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

namespace fs = std::filesystem;

namespace {

/// The position of --config's configuration in the space, or -1 after saying why on stderr.
long find_config(const Space& space, const std::string& text) {
  const std::vector<std::string>& names = *space.names;
  std::string order;
  for (const std::string& n : names) order += (order.empty() ? "" : ", ") + n;
  std::string key = text;
  if (!text.empty() && text.front() == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "gputune: --config: not a JSON object (" << e.what()
                << "). Fix: give a line of `gputune space JOB --list`, or the key `gputune best` "
                   "prints\n";
      return -1;
    }
    Config c;
    c.names = space.names;
    std::string missing, unknown;
    for (const std::string& n : names)
      if (j.contains(n))
        c.values.push_back(json_to_value(j[n]));
      else
        missing += (missing.empty() ? "" : ", ") + n;
    for (auto it = j.begin(); it != j.end(); ++it)
      if (std::find(names.begin(), names.end(), it.key()) == names.end())
        unknown += (unknown.empty() ? "" : ", ") + it.key();
    if (!missing.empty() || !unknown.empty()) {
      std::cerr << "gputune: --config: " << (missing.empty() ? "" : "missing " + missing)
                << (!missing.empty() && !unknown.empty() ? "; " : "")
                << (unknown.empty() ? "" : "not parameters of this space: " + unknown)
                << ". Fix: give every parameter of the space: " << order << "\n";
      return -1;
    }
    key = c.key();
  }
  const long at = space.find(key);
  if (at < 0)
    std::cerr << "gputune: --config " << text << ": no configuration of the space (" << space.size()
              << " valid) has these values. Fix: give the values in the order " << order
              << " (the key `gputune best`, `show` and `prune` print), or a line of `gputune "
                 "space JOB --list`\n";
  return at;
}

/// What the analysis read in the naive kernel and what each array and output may become.
void print_analysis(const naive::NaiveKernel& k, const fs::path& kernel_file, std::ostream& info) {
  info << "naive kernel '" << k.name << "': " << k.dims << "-D, thread index " << k.index_names[0]
       << (k.dims == 2 ? ", " + k.index_names[1] : std::string()) << ", " << k.loops
       << " loop(s) every thread runs alike, " << k.guard.size() << " bounds check(s)\n";
  for (const std::string& r : k.rewrites)
    info << "  " << kernel_file.filename().string() << " " << r << "\n";
  const std::vector<std::string> halos = naive::halo_windows(k);
  for (const naive::ArrayOptions& a : naive::array_options(k)) {
    info << "  " << a.array << ":";
    for (naive::Cache c : a.allowed) info << " " << naive::cache_name(c);
    info << "\n";
    for (const std::string& h : halos)
      if (h.rfind(a.array + ":", 0) == 0)
        info << "    shared: a halo window per block (" << h.substr(a.array.size() + 2)
             << "), in dynamic shared memory sized at launch\n";
    for (const std::string& r : a.reasons) info << "    " << r << "\n";
  }
  for (const naive::OutputOptions& out : naive::output_options(k)) {
    info << "  " << out.array << " (written):" << (out.stage ? " write direct|shared" : "")
         << (out.reduce ? " reduce atomic|block" : "") << (out.stage || out.reduce ? "" : " direct")
         << "\n";
    for (const std::string& r : out.reasons) info << "    " << r << "\n";
  }
  if (const naive::SplitOption sp = naive::split_loop(k); sp.loop >= 0) {
    std::string acc;
    for (int id : sp.locals)
      acc += (acc.empty() ? "" : ", ") + k.locals[static_cast<size_t>(id)].name;
    info << "  split: 1-32 threads per output share the loop adding to " << acc
         << (sp.across_warps ? " (lanes along threadIdx.y, so each warp still reads "
                               "consecutive outputs; parts added in shared memory)"
                             : " (lanes within a warp; parts added by warp shuffles)")
         << ", in variants without shared tiles\n";
  } else {
    info << "  split: not offered: " << sp.reason << "\n";
  }
  for (const std::string& n : k.notes) info << "  note: " << n << "\n";
}

}  // namespace

int generate(const GenerateOptions& o) {
  if (o.check && o.out_dir.empty()) {
    std::cerr << "gputune: --check runs the variants it writes: give --out DIR\n";
    return kExitBadInput;
  }
  std::ifstream in(o.kernel_file);
  if (!in) {
    std::cerr << "gputune: cannot read " << o.kernel_file.string() << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  naive::NaiveKernel k;
  try {
    k = naive::analyse_naive(
        source, o.kernel, o.kernel_file.filename().string(),
        {"-I" + fs::absolute(o.kernel_file).parent_path().lexically_normal().string()},
        o.as_written);
  } catch (const naive::NaiveSourceError& e) {
    std::cerr << "gputune: " << e.what() << "\n";
    return 2;
  } catch (const naive::NaiveError& e) {
    std::cerr << "gputune: " << e.what() << "\n"
              << "gputune: this kernel can still be tuned over its block shape: a job with "
                 "\"GPUTune\": {\"Naive\": true} falls back to block_size_x/y only\n";
    return kExitBadInput;
  }
  // One configuration's source to stdout: everything else goes to stderr, so it can be redirected.
  const bool source_only = !o.config.empty() && o.out_dir.empty();
  std::ostream& info = source_only ? std::cerr : std::cout;
  print_analysis(k, o.kernel_file, info);
  // The space, through a job (the given one, or a minimal one for the kernel alone).
  Job job;
  if (!o.job_file.empty()) {
    job = load_job(o.job_file);
    if (!job.naive) {
      std::cerr << "gputune: " << o.job_file.string()
                << ": field GPUTune.Naive: the job is not marked naive. Fix: add "
                   "\"GPUTune\": {\"Naive\": true}\n";
      return 2;
    }
  } else {
    job.file = o.kernel_file;
    job.kernel_name = k.name;
    job.global_size_type = "OpenCL";
    job.global_size.x = "1024";
    job.global_size.y = k.dims == 2 ? "1024" : "1";
  }
  naive::apply_to_job(job, k);
  Space space = build_space(job);
  info << space.size() << " variants in the generated space (" << space.cartesian_size
       << " before conditions)\n";
  std::vector<size_t> picks;
  if (!o.config.empty()) {
    const long at = find_config(space, o.config);
    if (at < 0) return kExitBadInput;
    picks.push_back(static_cast<size_t>(at));
    if (source_only) {
      std::cout << naive::emit_variant(k, naive::choice_from_config(k, space.config(picks[0])));
      return 0;
    }
  }
  if (o.out_dir.empty()) return 0;
  fs::create_directories(o.out_dir);
  // When only some are written, they show every value of every dimension as soon as they can.
  if (picks.empty()) picks = spread(space, o.limit ? o.limit : space.size());
  const size_t n = picks.size();
  std::vector<naive::Choice> written;
  for (size_t at : picks) {
    naive::Choice c = naive::choice_from_config(k, space.config(at));
    std::ofstream(o.out_dir / (k.name + "_" + naive::choice_label(k, c) + ".cu"))
        << naive::emit_variant(k, c);
    written.push_back(c);
  }
  std::cout << "wrote " << n << " of " << space.size() << " variants to " << o.out_dir.string()
            << (n < space.size() ? " (--limit 0 writes all)" : "") << "\n";
  if (!o.check) return 0;
  if (o.job_file.empty()) {
    std::cerr << "gputune: --check needs --job (the arguments and sizes to run with)\n";
    return 2;
  }
  // As `check`: without --size, a size the CPU runs in seconds (the variants guard every size).
  std::vector<std::int64_t> size = o.check_size;
  if (size.empty() && !job.contexts.empty()) size = small_naive_size(job.contexts.front());
  const ContextSpec ctx = context_of_size(job, size);
  std::vector<std::string> bad;
  try {
    bad = check_on_cpu(job, source, k, written, ctx);
  } catch (const EmulatorInterrupted& e) {
    std::cerr << "gputune: check " << e.what() << ": the variants were written, not checked\n";
    return kExitInterrupted;
  }
  for (const std::string& b : bad) std::cout << "MISMATCH " << b << "\n";
  std::cout << (bad.empty() ? "all " + std::to_string(written.size()) +
                                  " variants agree with the naive kernel on the CPU (context " +
                                  ctx.name + ")"
                            : std::to_string(bad.size()) + " variants differ")
            << "\n";
  return bad.empty() ? kExitOk : kExitCheckFailed;
}

std::optional<std::string> generate_command(const std::string& job_document,
                                            const std::string& job_file, const std::string& key) {
  const nlohmann::json doc =
      nlohmann::json::parse(job_document, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  const auto naive = doc.find("GPUTune");
  if (naive == doc.end() || !naive->is_object() || !naive->contains("Naive") ||
      (*naive)["Naive"] != true)
    return std::nullopt;
  const auto spec = doc.find("KernelSpecification");
  if (spec == doc.end() || !spec->is_object()) return std::nullopt;
  auto text = [&](const char* field) {
    const auto it = spec->find(field);
    return it != spec->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string kernel_file = text("KernelFile"), kernel = text("KernelName");
  if (kernel_file.empty() || kernel.empty()) return std::nullopt;
  // The kernel file as the job names it: relative to the job's folder.
  const fs::path file = fs::path(job_file).parent_path() / kernel_file;
  // --job: the space the run built (its parameters may narrow the generated one).
  return "gputune generate " + shell_quote(file.lexically_normal().string()) + " --kernel " +
         shell_quote(kernel) + " --job " + shell_quote(job_file) + " --config " + shell_quote(key);
}

}  // namespace gputune::tuner
