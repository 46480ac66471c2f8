// Checking a job's kernels on the CPU: see cpu_check.h.
#include "tuner/emulator/cpu_check.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "pruner/occupancy.h"
#include "tuner/common/exit_codes.h"
#include "tuner/common/tuning_job.h"
#include "tuner/emulator/cpu_emulator.h"
#include "tuner/measure/arguments.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

namespace {

/// A host buffer whose last byte sits right before an inaccessible page: a variant that reads or
/// writes past the end of an array faults (the launch stops with an EmulatorFault, which
/// run_once turns into the argument and element). The bytes around the array that the page
/// layout leaves accessible (the 16-byte padding after it, the rest of its first page before it)
/// hold a pattern, so a write there shows too (`stray_write`).
class GuardedBuffer {
 public:
  static constexpr unsigned char kPattern = 0xa5;
  explicit GuardedBuffer(const std::vector<unsigned char>& data) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t bytes = (data.size() + 15) / 16 * 16;
    size_t pages = (bytes + page_ - 1) / page_ + 1;
    total_ = pages * page_;
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed for an emulated buffer");
    base_ = static_cast<unsigned char*>(p);
    mprotect(base_ + (pages - 1) * page_, page_, PROT_NONE);
    ptr_ = base_ + (pages - 1) * page_ - bytes;
    std::memset(base_, kPattern, (pages - 1) * page_);
    if (!data.empty()) std::memcpy(ptr_, data.data(), data.size());
    size_ = data.size();
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { munmap(base_, total_); }
  void* data() const { return ptr_; }
  std::vector<unsigned char> contents() const { return {ptr_, ptr_ + size_}; }
  /// Byte offset (from the array's start) of a fault address in this buffer's guard page.
  std::optional<std::int64_t> guard_offset(const void* address) const {
    const auto* a = static_cast<const unsigned char*>(address);
    const unsigned char* guard = base_ + total_ - page_;
    if (a < guard || a >= base_ + total_) return std::nullopt;
    return a - ptr_;
  }
  /// Byte offset of the first changed byte of the pattern around the array, if any.
  std::optional<std::int64_t> stray_write() const {
    for (const unsigned char* q = ptr_ - 1; q >= base_; --q)  // nearest the array first
      if (*q != kPattern) return q - ptr_;
    for (const unsigned char* q = ptr_ + size_; q < base_ + total_ - page_; ++q)
      if (*q != kPattern) return q - ptr_;
    return std::nullopt;
  }

 private:
  unsigned char* base_ = nullptr;
  unsigned char* ptr_ = nullptr;
  size_t total_ = 0, size_ = 0, page_ = 4096;
};

/// "'c' at element 1064 (it has 1000)": where byte `offset` of argument `a` lies.
std::string element_at(const HostArgument& a, std::int64_t offset) {
  const auto bytes = static_cast<std::int64_t>(std::max<size_t>(1, a.type.bytes()));
  const std::int64_t e = offset >= 0 ? offset / bytes : -((-offset + bytes - 1) / bytes);
  return "'" + a.name + "' at element " + std::to_string(e) + " (it has " +
         std::to_string(a.elements) + ")";
}

std::array<unsigned, 3> to_u3(const std::array<std::int64_t, 3>& a) {
  return {static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]), static_cast<unsigned>(a[2])};
}

/// Runs kernel i of the module on fresh copies of the arguments; returns the outputs by argument.
std::vector<std::vector<unsigned char>> run_once(const CpuModule& m, size_t i,
                                                 const std::vector<HostArgument>& args,
                                                 std::array<unsigned, 3> grid,
                                                 std::array<unsigned, 3> block,
                                                 unsigned long long* vector_loads = nullptr,
                                                 unsigned long long dynamic_smem = 0) {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<void*> ptrs(args.size());
  std::vector<void*> params(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].is_vector) {
      bufs.push_back(std::make_unique<GuardedBuffer>(args[a].data));
      ptrs[a] = bufs.back()->data();
      params[a] = &ptrs[a];
    } else {
      bufs.push_back(nullptr);
      params[a] = const_cast<unsigned char*>(args[a].data.data());
    }
  }
  LaunchStats st;
  try {
    st = m.launch(i, grid, block, params.data(), dynamic_smem);
  } catch (const EmulatorFault& f) {
    if (f.signal != SIGSEGV && f.signal != SIGBUS) throw;
    for (size_t a = 0; a < args.size(); ++a)
      if (auto off = bufs[a] ? bufs[a]->guard_offset(f.address) : std::nullopt)
        throw EmulatorError("accesses " + element_at(args[a], *off) + ", past its end");
    throw;
  }
  if (vector_loads) *vector_loads += st.vector_loads;
  for (size_t a = 0; a < args.size(); ++a)
    if (auto off = bufs[a] ? bufs[a]->stray_write() : std::nullopt)
      throw EmulatorError("writes " + element_at(args[a], *off) + ", " +
                          (*off < 0 ? "before its start" : "past its end"));
  std::vector<CpuModule::BufferBefore> before;
  for (size_t a = 0; a < args.size(); ++a)
    if (bufs[a]) before.push_back({bufs[a]->data(), args[a].data.data(), args[a].data.size()});
  if (const void* at = m.stale_read_only_load(i, before))
    for (size_t a = 0; a < args.size(); ++a)
      if (bufs[a] && at >= bufs[a]->data() &&
          static_cast<const unsigned char*>(at) <
              static_cast<const unsigned char*>(bufs[a]->data()) + args[a].data.size())
        throw EmulatorError(
            "reads " +
            element_at(args[a], static_cast<const unsigned char*>(at) -
                                    static_cast<const unsigned char*>(bufs[a]->data())) +
            " on the read-only path (__ldg) although the launch writes it: on a GPU that load "
            "may return the old value (the read-only cache does not see the launch's stores)");
  std::vector<std::vector<unsigned char>> out(args.size());
  for (size_t a = 0; a < args.size(); ++a)
    if (bufs[a]) out[a] = bufs[a]->contents();
  return out;
}

const char* kind_name(CpuParam::Kind k) {
  return k == CpuParam::Kind::Floating  ? " floating-point"
         : k == CpuParam::Kind::Integer ? " integer"
                                        : "";
}

std::string describe_param(const CpuParam& p) {
  const std::string what = std::to_string(p.bytes) + "-byte" + kind_name(p.kind);
  return p.pointer ? "a pointer to " + what + " elements" : "a " + what + " value";
}

/// The kind of a job argument's scalars, where one value is one scalar.
CpuParam::Kind kind_of(const ElementType& t) {
  if (t.components != 1) return CpuParam::Kind::Other;
  switch (t.kind) {
    case ScalarKind::F16:
    case ScalarKind::F32:
    case ScalarKind::F64:
      return CpuParam::Kind::Floating;
    default:
      return CpuParam::Kind::Integer;
  }
}

/// A kernel's -D values and include folders for the host compiler, spelled as NVRTC spells them
/// (`-DN=4`, `-D N=4`, `--define-macro=N=4`; include folders as `include_options` reads them);
/// what else NVRTC gets (--use_fast_math, ...) is listed in `ignored`, except -std (the host
/// compiles C++17).
void split_options(const std::vector<std::string>& options, CpuKernel& k,
                   std::vector<std::string>& include_dirs, std::set<std::string>& ignored) {
  std::set<size_t> taken;  // indices of the include options and their values
  for (const cuda::IncludeOption& inc : cuda::include_options(options)) {
    taken.insert(inc.index);
    if (inc.prefix.empty()) taken.insert(inc.index - 1);  // "-I" "dir": the flag before it
    if (std::find(include_dirs.begin(), include_dirs.end(), inc.folder) == include_dirs.end())
      include_dirs.push_back(inc.folder);
  }
  for (size_t i = 0; i < options.size(); ++i) {
    if (taken.count(i)) continue;
    const std::string& o = options[i];
    std::optional<std::string> d;
    if ((o == "-D" || o == "--define-macro") && i + 1 < options.size())
      d = options[++i];
    else if (o.rfind("--define-macro=", 0) == 0)
      d = o.substr(15);
    else if (o.rfind("-D", 0) == 0 && o.size() > 2)
      d = o.substr(2);
    if (d) {
      const size_t eq = d->find('=');
      k.defines.emplace_back(d->substr(0, eq), eq == std::string::npos ? "1" : d->substr(eq + 1));
    } else if (o.rfind("-std=", 0) != 0) {  // the host compiles C++17 (the emulator needs it)
      ignored.insert(o);
    }
  }
}

/// Per variant of a naive kernel: empty when it agrees with the kernel, else what differs.
std::vector<std::string> naive_problems(const Job& job, const std::string& naive_source,
                                        const naive::NaiveKernel& k,
                                        const std::vector<naive::Choice>& variants,
                                        const ContextSpec& ctx, int jobs,
                                        unsigned long long* vector_loads, double timeout_s,
                                        bool* interrupted = nullptr) {
  if (vector_loads) *vector_loads = 0;
  std::vector<CpuKernel> kernels;
  kernels.push_back({naive_source, k.name, {}, job.kernel_file.filename().string()});
  // Headers beside the kernel and in the job's -I folders are found as NVRTC finds them; the
  // job's -D values hold for the kernel and every variant.
  std::vector<std::string> include_dirs;
  std::set<std::string> ignored;
  split_options(job_options(job), kernels.front(), include_dirs, ignored);
  for (const naive::Choice& c : variants)
    kernels.push_back({naive::emit_variant(k, c), k.name, kernels.front().defines,
                       naive::choice_label(k, c) + ".cu"});
  const std::vector<HostArgument> args = make_arguments(job, ctx);  // bad sizes: before compiling
  CpuModule m = CpuModule::build(kernels, jobs, include_dirs);
  m.set_time_limit(timeout_s);
  if (SignatureMismatch s = signature_mismatch(m, 0, args, k.name); !s.why.empty())
    throw JobError(job.file.string(), s.field, s.why, kArgumentListFix);
  std::array<std::int64_t, 3> threads{};
  for (int d = 0; d < 3; ++d)
    threads[d] =
        eval_in_context(job, job.naive_threads[d], "KernelSpecification.GlobalSize", nullptr, ctx)
            .as_int();
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  std::array<unsigned, 3> nb{k.dims == 2 ? 16u : 64u, k.dims == 2 ? 4u : 1u, 1};
  std::array<std::int64_t, 3> ng{ceil_div(threads[0], nb[0]), ceil_div(threads[1], nb[1]),
                                 threads[2]};
  auto expected = run_once(m, 0, args, to_u3(ng), nb);
  const std::map<std::string, double> scalars = naive_scalars(job, k, ctx);
  std::vector<std::string> problems(variants.size());
  for (size_t v = 0; v < variants.size(); ++v) {
    const naive::Choice& c = variants[v];
    int by = k.dims == 2 ? c.block_y : 1, my = k.dims == 2 ? c.merge_y : 1;
    std::array<std::int64_t, 3> g{ceil_div(threads[0], c.block_x * c.merge_x),
                                  ceil_div(threads[1], by * my), threads[2]};
    std::string& problem = problems[v];
    try {
      const auto smem = static_cast<unsigned long long>(naive::dynamic_shared_bytes(k, c, scalars));
      const std::array<int, 2> block = naive::launch_block(k, c);
      auto got = run_once(m, v + 1, args, to_u3(g),
                          {static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]), 1},
                          vector_loads, smem);
      for (size_t a = 0; a < args.size(); ++a) {
        if (!args[a].is_vector || !k.params[a].written) continue;
        Comparison cmp =
            compare_output(args[a], got[a], expected[a], job.abs_tolerance, job.rel_tolerance);
        if (!cmp.ok) problem += (problem.empty() ? "" : "; ") + cmp.describe(args[a].name);
      }
    } catch (const EmulatorInterrupted&) {
      if (!interrupted) throw;
      *interrupted = true;
      problems.resize(v);  // what was checked before the interrupt
      break;
    } catch (const EmulatorError& e) {
      problem = e.what();
    } catch (const naive::NaiveError& e) {
      problem = e.what();
    }
  }
  return problems;
}

}  // namespace

SignatureMismatch signature_mismatch(const CpuModule& m, size_t i,
                                     const std::vector<HostArgument>& args,
                                     const std::string& kernel) {
  const std::vector<CpuParam>& params = m.params(i);
  if (params.size() != args.size())
    return {"KernelSpecification.Arguments", "the job lists " + std::to_string(args.size()) +
                                                 " arguments, kernel '" + kernel + "' takes " +
                                                 std::to_string(params.size())};
  for (size_t a = 0; a < args.size(); ++a) {
    const HostArgument& h = args[a];
    const CpuParam& p = params[a];
    const auto bytes = static_cast<unsigned long long>(h.type.bytes());
    const CpuParam::Kind kind = kind_of(h.type);
    const bool kinds_differ =
        kind != CpuParam::Kind::Other && p.kind != CpuParam::Kind::Other && kind != p.kind;
    // A buffer read through a pointer to vectors of its elements (float2*, float4* over floats,
    // as CLBlast's kernels take them) is the same memory: what the kernel means.
    const bool vector_of_elements = p.pointer && h.is_vector && p.kind == CpuParam::Kind::Other &&
                                    bytes != 0 && p.bytes > bytes && p.bytes % bytes == 0;
    if (p.pointer != h.is_vector ||
        (p.bytes != 0 && !vector_of_elements && (p.bytes != bytes || kinds_differ)))
      return {"KernelSpecification.Arguments[" + std::to_string(a) + "] (" + h.name + ")",
              "'" + h.name + "' is " + (h.is_vector ? "a Vector of " : "a Scalar ") +
                  std::to_string(bytes) + "-byte" + kind_name(kind) +
                  (h.is_vector ? " elements" : " value") + ", but parameter " + std::to_string(a) +
                  " of kernel '" + kernel + "' is " + describe_param(p)};
  }
  return {};
}

ContextSpec context_of_size(const Job& job, const std::vector<std::int64_t>& size) {
  ContextSpec ctx = job.contexts.front();
  if (size.empty()) return ctx;
  ctx.problem_size.clear();
  ctx.name.clear();
  for (std::int64_t v : size) {
    ctx.problem_size.emplace_back(v);
    ctx.name += (ctx.name.empty() ? "" : "x") + std::to_string(v);
  }
  return ctx;
}

std::vector<std::string> check_on_cpu(const Job& job, const std::string& naive_source,
                                      const naive::NaiveKernel& k,
                                      const std::vector<naive::Choice>& variants,
                                      const ContextSpec& ctx, int jobs,
                                      unsigned long long* vector_loads) {
  std::vector<std::string> lines;
  const std::vector<std::string> problems =
      naive_problems(job, naive_source, k, variants, ctx, jobs, vector_loads, kCheckTimeout);
  for (size_t v = 0; v < variants.size(); ++v)
    if (!problems[v].empty())
      lines.push_back(naive::choice_label(k, variants[v]) + ": " + problems[v]);
  return lines;
}

size_t CheckReport::failures() const {
  return static_cast<size_t>(std::count_if(
      checked.begin(), checked.end(), [](const ConfigCheck& c) { return !c.problem.empty(); }));
}

std::vector<std::int64_t> small_naive_size(const ContextSpec& ctx) {
  static constexpr std::int64_t kSmall[] = {37, 29, 23};  // primes: no block or tile divides them
  std::vector<std::int64_t> out;
  bool smaller = false;
  size_t next = 0;
  for (const Value& v : ctx.problem_size) {
    if (!v.is_int()) return {};  // not a size this can shrink: the job's own
    const std::int64_t n = v.as_int();
    if (n > 64) {
      out.push_back(kSmall[next++ % 3]);
      smaller = true;
    } else {
      out.push_back(n);  // a filter width or a count: kept as the job has it
    }
  }
  return smaller ? out : std::vector<std::int64_t>{};
}

namespace {

/// A parametric kernel (or a naive one outside the subset, tuned over block shape): the source
/// with each configuration's -D values, launched on the CPU as the GPU run would launch it, each
/// compared with the reference (the ReferenceArguments, or the first configuration that runs).
void check_parametric(const Job& job, const std::string& source, const Space& space,
                      const std::vector<size_t>& order, const CheckOptions& o, CheckReport& rep) {
  std::vector<Variant> variants;
  std::vector<CpuKernel> kernels;
  std::vector<std::string> include_dirs{
      std::filesystem::absolute(job.kernel_file).parent_path().string()};
  std::set<std::string> ignored;
  for (size_t i : order) {
    variants.push_back(instantiate(job, source, space.config(i), rep.context));
    CpuKernel k{variants.back().source,
                job.kernel_name,
                {},
                job.kernel_file.filename().string() + " (" + variants.back().config.key() + ")"};
    split_options(variants.back().options, k, include_dirs, ignored);
    kernels.push_back(std::move(k));
  }
  if (!ignored.empty()) {
    std::string list;
    for (const std::string& s : ignored) list += (list.empty() ? "" : " ") + s;
    rep.notes.push_back("compiler options the host compiler does not get: " + list);
  }
  // Bad input is reported before the host compiler runs (tens of seconds for a large space).
  const std::vector<HostArgument> args = make_arguments(job, rep.context);
  if (std::none_of(args.begin(), args.end(), [](const HostArgument& a) { return a.output; }))
    throw JobError(job.file.string(), "KernelSpecification.Arguments",
                   "no argument is an output, so there is nothing to check",
                   "mark what the kernel writes with \"Output\": 1");
  CpuModule m = CpuModule::build(kernels, o.jobs, include_dirs);
  m.set_time_limit(o.timeout_s);
  for (size_t v = 0; v < variants.size(); ++v)
    if (SignatureMismatch s = signature_mismatch(m, v, args, job.kernel_name); !s.why.empty())
      throw JobError(job.file.string(), s.field,
                     s.why + " (configuration " + variants[v].config.key() + ")", kArgumentListFix);
  const bool by_reference = std::all_of(args.begin(), args.end(), [](const HostArgument& a) {
    return !a.output || !a.reference.empty();
  });
  rep.reference =
      by_reference ? "the ReferenceArguments" : "the default configuration " + default_key(job);
  std::vector<std::vector<unsigned char>> expected;  // outputs of the reference configuration
  // A launch the GPU would refuse for its shape, threads or dynamic shared memory is reported,
  // not emulated: the limits of the job's target (Device.Arch, else sm_90).
  pruner::DeviceLimits limits;  // sm_90's, for an architecture the tables lack
  try {
    limits = pruner::limits_for_arch(job.target_arch.empty() ? "sm_90" : job.target_arch);
  } catch (const std::invalid_argument&) {
  }
  for (size_t v = 0; v < variants.size(); ++v) {
    const LaunchGeometry& g = variants[v].geometry;
    ConfigCheck c{variants[v].config.key(), {}};
    if (const pruner::Occupancy refused =
            pruner::compute_occupancy(pruner::Resources{}, g.grid, g.block, g.dynamic_smem, limits);
        !refused.feasible) {
      c.problem =
          "a GPU (" + limits.arch() + ") would refuse this launch: " + refused.infeasible_reason;
      rep.checked.push_back(std::move(c));
      continue;
    }
    try {
      auto got = run_once(m, v, args, to_u3(g.grid), to_u3(g.block), nullptr,
                          static_cast<unsigned long long>(g.dynamic_smem));
      const bool is_reference = !by_reference && expected.empty();
      for (size_t a = 0; a < args.size() && !is_reference; ++a) {
        const std::vector<unsigned char>* want = expected_output(args, a, &expected);
        if (!args[a].output || !want) continue;
        Comparison cmp =
            compare_output(args[a], got[a], *want, job.abs_tolerance, job.rel_tolerance);
        if (!cmp.ok) c.problem += (c.problem.empty() ? "" : "; ") + cmp.describe(args[a].name);
      }
      if (is_reference) {
        expected = std::move(got);
        if (v != 0)
          rep.reference = "configuration " + c.key + " (the default configuration failed)";
      }
    } catch (const EmulatorInterrupted&) {
      rep.interrupted = true;
      break;
    } catch (const EmulatorError& e) {
      c.problem = e.what();
    }
    rep.checked.push_back(std::move(c));
  }
}

}  // namespace

CheckReport check_job(const Job& original, const CheckOptions& o) {
  CheckReport rep;
  Job job = original;
  std::vector<std::int64_t> size = o.size;
  // A naive kernel's variants guard every size: without --size, a size the CPU runs in seconds.
  if (size.empty() && job.naive_kernel && !job.contexts.empty()) {
    size = small_naive_size(job.contexts.front());
    if (!size.empty())
      rep.notes.push_back("checking at " + context_of_size(job, size).name + ", not the job's " +
                          job.contexts.front().name +
                          ": the generated variants guard every size, and this one runs on a "
                          "CPU in seconds (--size chooses another)");
  }
  rep.context = context_of_size(job, size);
  if (!size.empty() && !job.references.empty()) {
    // ReferenceArguments hold the outputs of the job's own sizes: at another size the default
    // configuration is the reference, for the same arguments.
    for (const ReferenceArgument& r : job.references)
      for (Argument& a : job.arguments)
        if (a.name == r.target) a.output = true;
    job.references.clear();
    rep.notes.push_back("ReferenceArguments belong to the job's sizes: at " + rep.context.name +
                        " the default configuration is the reference");
  }
  const std::string source = load_kernel_source(job);
  const Space space = build_space(job);
  rep.space_size = space.size();
  if (space.empty())
    throw JobError(job.file.string(), "ConfigurationSpace", space.explain_empty(),
                   "relax the conditions");
  // `limit` configurations spread over the space (0: all), the default configuration first.
  const std::vector<size_t> order =
      spread(space, o.limit == 0 ? space.size() : o.limit, space.find(default_key(job)));

  if (job.naive_kernel) {
    std::vector<naive::Choice> choices;
    for (size_t i : order)
      choices.push_back(naive::choice_from_config(*job.naive_kernel, space.config(i)));
    rep.reference = "the naive kernel " + job.kernel_name;
    const std::vector<std::string> problems =
        naive_problems(job, source, *job.naive_kernel, choices, rep.context, o.jobs, nullptr,
                       o.timeout_s, &rep.interrupted);
    for (size_t v = 0; v < problems.size(); ++v)
      rep.checked.push_back({space.config(order[v]).key(), problems[v]});
    return rep;
  }

  check_parametric(job, source, space, order, o, rep);
  return rep;
}

int check_command(const std::filesystem::path& job_file, const CheckOptions& o, std::ostream& out,
                  std::ostream& err) {
  Job job = load_tuning_job(job_file);
  if (!job.naive_fallback.empty())
    err << "gputune: note: " << job.naive_fallback << "; checking block shapes only\n";
  CheckReport rep;
  try {
    rep = check_job(job, o);
  } catch (const EmulatorInterrupted& e) {
    err << "gputune: check " << e.what() << "; nothing was checked\n";
    return kExitInterrupted;
  }
  for (const std::string& n : rep.notes) err << "gputune: note: " << n << "\n";
  for (const ConfigCheck& c : rep.checked)
    if (!c.problem.empty()) out << "DIFFERS " << c.key << ": " << c.problem << "\n";
  const size_t bad = rep.failures();
  out << "checked " << rep.checked.size() << " of " << rep.space_size
      << " configurations on the CPU at ProblemSize " << rep.context.name << " against "
      << rep.reference << ": " << (bad == 0 ? "all agree" : std::to_string(bad) + " differ or fail")
      << (rep.interrupted                       ? " (interrupted: the rest were not checked)"
          : rep.checked.size() < rep.space_size ? " (spread over the space; --limit 0 checks all)"
                                                : "")
      << "\n";
  if (rep.interrupted) return kExitInterrupted;
  return bad == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace gputune::tuner
