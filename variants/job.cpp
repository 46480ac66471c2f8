// Reading a T1 job (job.h): the T1 core (General, ConfigurationSpace, KernelSpecification,
// Search, Budget) into a Job through the Reader (job_reader.h), parse_job and load_job, and the
// kernel source's checks. The lists of parameters, conditions and arguments are read by
// job_sections.cpp; the GPUTune extension by job_extension.cpp.
// Must not: build the space or bind a context (space.h, instantiate.h run after it).
#include "variants/job.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "variants/expr.h"
#include "variants/hash.h"
#include "variants/job_reader.h"

namespace gputune {

using nlohmann::json;

JobError::JobError(const std::string& file_, const std::string& field_, const std::string& problem_,
                   const std::string& fix_)
    : std::runtime_error(file_ + ": " + (field_.empty() ? "" : "field '" + field_ + "': ") +
                         problem_ + (fix_.empty() ? "" : ". Fix: " + fix_)),
      file(file_),
      field(field_),
      problem(problem_),
      fix(fix_) {}

Value json_to_value(const json& j) {
  if (j.is_null()) return Value();
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<std::int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (auto& e : j) l.push_back(json_to_value(e));
    return Value(std::move(l));
  }
  throw std::invalid_argument("a JSON object cannot be a parameter value");
}

json value_to_json(const Value& v) {
  if (v.is_none()) return nullptr;
  if (v.is_bool()) return v.truthy();
  if (v.is_int()) return v.as_int();
  if (v.is_float()) return v.as_double();
  if (v.is_str()) return v.as_str();
  json a = json::array();
  for (auto& e : v.as_list()) a.push_back(value_to_json(e));
  return a;
}

std::vector<std::pair<std::string, Value>> context_bindings(const ContextSpec& ctx) {
  std::vector<std::pair<std::string, Value>> b = {{"ProblemSize", Value(ctx.problem_size)}};
  for (auto& kv : ctx.values) b.push_back(kv);
  return b;
}

namespace detail {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

List read_problem_size(Reader& r, const json& j, const std::string& path) {
  if (!j.is_array() || j.empty() || j.size() > 3)
    r.fail(path, "expected a list of 1 to 3 sizes", "write e.g. [4096, 4096]");
  List l;
  for (auto& e : j) {
    if (!e.is_number_integer() || e.get<std::int64_t>() < 0)
      r.fail(path, "sizes must be non-negative integers, got " + e.dump());
    l.push_back(Value(e.get<std::int64_t>()));
  }
  while (l.size() < 3) l.push_back(Value(static_cast<std::int64_t>(1)));
  return l;
}

}  // namespace detail

namespace {

using detail::edit_distance;
using detail::read_arguments;
using detail::read_conditions;
using detail::read_extension;
using detail::read_parameters;
using detail::read_problem_size;
using detail::read_references;
using detail::Reader;

const std::set<std::string> kTopKeys = {
    "General", "ConfigurationSpace", "KernelSpecification", "Search", "Budget", "GPUTune",
    "$schema"};
const std::set<std::string> kGeneralKeys = {"BenchmarkName", "OutputFormat", "FormatVersion",
                                            "LoggingLevel",  "TimeUnit",     "OutputFile"};
const std::set<std::string> kSpaceKeys = {"TuningParameters", "Conditions"};
const std::set<std::string> kKernelKeys = {
    "Language",           "CompilerOptions", "BenchmarkName", "KernelName",      "KernelFile",
    "GlobalSizeType",     "LocalSize",       "GlobalSize",    "GridDivX",        "GridDivY",
    "GridDivZ",           "ProblemSize",     "SharedMemory",  "Stream",          "Arguments",
    "ReferenceArguments", "Device",          "Profiling",     "SimulationInput", "BenchmarkConfig"};
const std::set<std::string> kNonSchemaKernelKeys = {
    "GridDivX",        "GridDivY",      "GridDivZ", "ProblemSize",
    "BenchmarkConfig", "BenchmarkName", "Stream"};
const std::set<std::string> kDimKeys = {"X", "Y", "Z"};

Dim3Expr read_dim3(Reader& r, const json& obj, const std::string& path) {
  if (!obj.is_object()) r.fail(path, "expected an object {X, Y, Z}");
  r.note_unknown_keys(obj, path, kDimKeys);
  Dim3Expr d;
  d.x = r.get_expr(r.require(obj, path, "X", "an expression"), path + ".X");
  if (obj.contains("Y")) d.y = r.get_expr(obj["Y"], path + ".Y");
  if (obj.contains("Z")) d.z = r.get_expr(obj["Z"], path + ".Z");
  return d;
}

}  // namespace

std::string context_label(const List& ps) {
  std::string s;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i && ps[i].as_int() == 1 &&
        std::all_of(ps.begin() + static_cast<long>(i), ps.end(),
                    [](const Value& v) { return v.as_int() == 1; }))
      break;
    s += (i ? "x" : "") + ps[i].str();
  }
  return s;
}

namespace {

void read_search_and_budget(Reader& r, const json& doc, Job& job) {
  if (doc.contains("Search")) {
    const json& s = doc["Search"];
    if (!s.is_object()) r.fail("Search", "expected an object {Name, Attributes}");
    r.note_unknown_keys(s, "Search", {"Name", "Attributes"});
    std::string name =
        r.get_string(r.require(s, "Search", "Name", "BruteForce or Random"), "Search.Name");
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    job.search_named = true;
    if (lower == "bruteforce" || lower == "brute_force" || lower == "exhaustive")
      job.strategy = "brute_force";
    else if (lower == "random" || lower == "random_sample" || lower == "randomsearch")
      job.strategy = "random";
    else if (lower == "model_guided" || lower == "modelguided")
      job.strategy = "model_guided";
    else if (lower == "portfolio")
      job.strategy = "portfolio";
    else {  // another tuner's optimiser (Kernel Tuner's genetic_algorithm, KTT's annealing, ...)
      job.strategy = "portfolio";
      r.note("Search.Name '" + name +
             "' is not one of gputune's searches: it searches with portfolio (its search over "
             "the valid space, ahead of Kernel Tuner's on the community's recorded spaces); "
             "GPUTune.Search.Strategy or --strategy chooses another");
    }
    if (s.contains("Attributes")) {
      if (!s["Attributes"].is_array())
        r.fail("Search.Attributes", "expected a list of {Name, Value}");
      for (auto& a : s["Attributes"]) {
        if (!a.is_object() || !a.contains("Name"))
          r.fail("Search.Attributes", "expected {Name, Value}");
        if (a["Name"] == "Seed" || a["Name"] == "seed") {
          if (!a.contains("Value") || !a["Value"].is_number_integer())
            r.fail("Search.Attributes.Seed", "expected an integer Value");
          job.seed = a["Value"].get<std::uint64_t>();
        } else {
          r.note("Search attribute '" + a["Name"].dump() + "' ignored");
        }
      }
    }
  }
  if (doc.contains("Budget")) {
    const json& b = doc["Budget"];
    if (!b.is_array()) r.fail("Budget", "expected a list of {Type, BudgetValue}");
    for (size_t i = 0; i < b.size(); ++i) {
      std::string path = "Budget[" + std::to_string(i) + "]";
      if (!b[i].is_object()) r.fail(path, "expected {Type, BudgetValue}");
      r.note_unknown_keys(b[i], path, {"Type", "BudgetValue"});
      std::string type =
          r.get_string(r.require(b[i], path, "Type",
                                 "ConfigurationCount, TuningDuration or ConfigurationFraction"),
                       path + ".Type");
      const json& v = r.require(b[i], path, "BudgetValue", "a positive number");
      if (!v.is_number() || v.get<double>() <= 0)
        r.fail(path + ".BudgetValue", "expected a positive number");
      if (type == "ConfigurationCount")
        job.budget.max_configurations = static_cast<std::uint64_t>(v.get<double>());
      else if (type == "TuningDuration")
        job.budget.max_seconds = v.get<double>();
      else if (type == "ConfigurationFraction") {
        if (v.get<double>() > 1) r.fail(path + ".BudgetValue", "a fraction must be in (0, 1]");
        job.budget.fraction = v.get<double>();
      } else
        r.fail(path + ".Type", "unknown budget type '" + type + "'",
               "use ConfigurationCount, TuningDuration or ConfigurationFraction");
    }
  }
}

/// A kernel's parameter list as its source declares it, found by text (no compiler: the source
/// may be OpenCL C): each parameter's text, and where the kernel is defined.
struct SourceSignature {
  std::vector<std::string> parameters;
  std::string where;  ///< file:line
};

std::optional<SourceSignature> signature_in(const std::string& text, const std::string& name,
                                            const std::string& file_name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    if ((p > 0 && word(text[p - 1])) ||
        (p + name.size() < text.size() && word(text[p + name.size()])))
      continue;
    size_t open = p + name.size();
    while (open < text.size() && std::isspace(static_cast<unsigned char>(text[open]))) ++open;
    if (open >= text.size() || text[open] != '(') continue;
    // A kernel: __global__, __kernel or kernel in the declaration before the name.
    const size_t from = text.find_last_of(";}", p);
    const std::string before = text.substr(from == std::string::npos ? 0 : from + 1,
                                           p - (from == std::string::npos ? 0 : from + 1));
    if (before.find("__global__") == std::string::npos &&
        before.find("__kernel") == std::string::npos && before.find("kernel ") == std::string::npos)
      continue;
    SourceSignature sig;
    int depth = 0;
    std::string current;
    size_t i = open;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '(') {
        if (depth++ == 0) continue;
      } else if (c == ')') {
        if (--depth == 0) break;
      } else if (c == ',' && depth == 1) {
        sig.parameters.push_back(current);
        current.clear();
        continue;
      }
      current += c == '\n' || c == '\t' ? ' ' : c;
    }
    if (i >= text.size()) continue;
    size_t b = i + 1;
    while (b < text.size() && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
    if (b >= text.size() || text[b] != '{') continue;  // a declaration, not the definition
    if (current.find_first_not_of(' ') != std::string::npos) sig.parameters.push_back(current);
    for (auto& q : sig.parameters) {
      const size_t f = q.find_first_not_of(' '), l = q.find_last_not_of(' ');
      q = f == std::string::npos ? "" : q.substr(f, l - f + 1);
    }
    if (sig.parameters.size() == 1 && sig.parameters[0] == "void") sig.parameters.clear();
    sig.where =
        file_name + ":" +
        std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<long>(p), '\n'));
    return sig;
  }
  return std::nullopt;
}

/// What the job's Arguments get wrong about the kernel's signature ("" when they agree or the
/// definition is not found): the kernel file first, then the sources beside it.
std::string signature_mismatch(const Job& job) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files{job.kernel_file};
  std::error_code ec;
  const fs::path folder = job.kernel_file.parent_path();
  std::vector<fs::path> beside;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    static const std::set<std::string> kinds = {".cu", ".cuh", ".h", ".hpp", ".cl", ".opencl"};
    if (it->path() != job.kernel_file && kinds.count(it->path().extension().string()))
      beside.push_back(it->path());
  }
  std::sort(beside.begin(), beside.end());
  files.insert(files.end(), beside.begin(), beside.end());
  const std::string name = job.kernel_name.substr(0, job.kernel_name.find('<'));
  std::optional<SourceSignature> sig;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    const fs::path shown = f.lexically_relative(job.file.parent_path());
    if ((sig = signature_in(ss.str(), name, shown.empty() ? f.string() : shown.string()))) break;
  }
  if (!sig) return "";
  auto pointer = [](const std::string& q) {
    return q.find('*') != std::string::npos || q.find('[') != std::string::npos ||
           q.find("__global ") != std::string::npos;
  };
  std::string out;
  const size_t n = std::max(sig->parameters.size(), job.arguments.size());
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string param =
        i < sig->parameters.size() ? "'" + sig->parameters[i] + "'" : "(no parameter)";
    std::string arg = "(no argument)";
    bool fits = false;
    if (i < job.arguments.size()) {
      const Argument& a = job.arguments[i];
      arg = "'" + a.name + "' (" + a.type + " " + a.memory_type + ")";
      if (i < sig->parameters.size()) {
        const std::string& q = sig->parameters[i];
        const bool vector = a.memory_type == "Vector";
        const bool is_int = a.type.find("int") != std::string::npos;
        const bool param_int = q.find("int") != std::string::npos;
        fits = vector == pointer(q) && (vector || is_int == param_int);
      }
    }
    if (fits) continue;
    if (++wrong > 3) continue;
    out += std::string(out.empty() ? "" : "; ") + "Arguments[" + std::to_string(i) + "] " + arg +
           " is passed for parameter " + std::to_string(i + 1) + " " + param;
  }
  if (out.empty()) return "";
  return "the job's " + std::to_string(job.arguments.size()) + " Arguments do not match kernel '" +
         name + "' (" + std::to_string(sig->parameters.size()) + " parameters, " + sig->where +
         "): " + out + (wrong > 3 ? "; and " + std::to_string(wrong - 3) + " more" : "");
}

/// KernelName and KernelFile (relative to the job's folder; a missing .hip port of a CUDA
/// source that is there becomes that source, with a note).
void read_kernel_file(Reader& r, const json& ks, const std::filesystem::path& file, Job& job) {
  job.kernel_name = r.get_string(
      r.require(ks, "KernelSpecification", "KernelName", "the __global__ function's name"),
      "KernelSpecification.KernelName");
  std::string kf =
      r.get_string(r.require(ks, "KernelSpecification", "KernelFile", "the path of the .cu file"),
                   "KernelSpecification.KernelFile");
  job.kernel_file =
      std::filesystem::path(kf).is_absolute() ? std::filesystem::path(kf) : file.parent_path() / kf;
  if (std::error_code ec;
      job.kernel_file.extension() == ".hip" && !std::filesystem::exists(job.kernel_file, ec)) {
    // The benchmark hub names the HIP port of a CUDA kernel (dedispersion.cu.hip) that it does
    // not ship; the CUDA source it was made from is what gputune compiles.
    std::filesystem::path cuda = job.kernel_file;
    cuda.replace_extension();
    if (std::filesystem::exists(cuda, ec)) {
      r.note("KernelSpecification.KernelFile '" + kf + "' does not exist; the CUDA source '" +
             cuda.filename().string() + "' beside it does, and gputune compiles that");
      job.kernel_file = cuda;
    }
  }
}

/// The compiler's options and the launch: LocalSize (generated for a naive job), GlobalSize and
/// its type, Kernel Tuner's GridDivX/Y/Z, SharedMemory, and ProblemSize (the job's one context).
void read_compile_and_launch(Reader& r, const json& ks, Job& job) {
  if (ks.contains("CompilerOptions")) {
    if (!ks["CompilerOptions"].is_array())
      r.fail("KernelSpecification.CompilerOptions", "expected a list of strings");
    for (auto& o : ks["CompilerOptions"])
      job.compiler_options.push_back(r.get_string(o, "KernelSpecification.CompilerOptions"));
  }
  if (!job.naive || ks.contains("LocalSize"))  // a naive job's block is generated
    job.local_size = read_dim3(
        r, r.require(ks, "KernelSpecification", "LocalSize", "{\"X\": \"block_size_x\", ...}"),
        "KernelSpecification.LocalSize");
  if (ks.contains("GlobalSize"))
    job.global_size = read_dim3(r, ks["GlobalSize"], "KernelSpecification.GlobalSize");
  if (ks.contains("GlobalSizeType")) {
    job.global_size_type = r.get_string(ks["GlobalSizeType"], "KernelSpecification.GlobalSizeType");
    if (job.global_size_type != "CUDA" && job.global_size_type != "OpenCL")
      r.fail("KernelSpecification.GlobalSizeType",
             "'" + job.global_size_type + "' is not supported",
             "use CUDA (GlobalSize counts blocks) or OpenCL (counts threads)");
  }
  const char* div_keys[3] = {"GridDivX", "GridDivY", "GridDivZ"};
  for (int d = 0; d < 3; ++d) {
    if (!ks.contains(div_keys[d])) continue;
    std::string path = std::string("KernelSpecification.") + div_keys[d];
    if (!ks[div_keys[d]].is_array()) r.fail(path, "expected a list of expressions");
    for (auto& e : ks[div_keys[d]])
      job.grid_div[static_cast<size_t>(d)].push_back(r.get_expr(e, path));
    job.use_grid_div = true;
  }
  if (ks.contains("SharedMemory"))
    job.shared_memory_expr = r.get_expr(ks["SharedMemory"], "KernelSpecification.SharedMemory");
  if (ks.contains("ProblemSize"))
    job.contexts.push_back(
        {"", read_problem_size(r, ks["ProblemSize"], "KernelSpecification.ProblemSize"), {}});
}

}  // namespace

Job parse_job(const json& doc, const std::filesystem::path& file) {
  Job job;
  job.file = file;
  job.document = doc.dump();
  Reader r(file.string(), job);
  if (!doc.is_object())
    r.fail("", "the document is not a JSON object",
           "a T1 job is an object with ConfigurationSpace and KernelSpecification");
  const bool naive_only =
      doc.contains("GPUTune") && doc["GPUTune"].is_object() && doc["GPUTune"].contains("Naive");
  if (!doc.contains("ConfigurationSpace") && !doc.contains("KernelSpecification") && !naive_only) {
    // Not a T1 job at all: say what it looks like instead.
    std::string what = "it has neither ConfigurationSpace nor KernelSpecification";
    if (doc.contains("cache") && doc.contains("tune_params_keys"))
      what = "it is a Kernel Tuner cache file";
    else if (doc.contains("results") && doc.contains("schema_version"))
      what = "it is a T4 results file";
    r.fail("", "not a T1 job: " + what,
           "give the T1 job (ConfigurationSpace, KernelSpecification); recorded measurements go "
           "to `gputune replay JOB --measurements FILE` or `gputune import`");
  }
  r.note_unknown_keys(doc, "", kTopKeys);
  if (doc.contains("General")) {
    r.note_unknown_keys(doc["General"], "General", kGeneralKeys);
    if (doc["General"].contains("BenchmarkName"))
      job.name = r.get_string(doc["General"]["BenchmarkName"], "General.BenchmarkName");
    if (doc["General"].contains("OutputFile"))
      job.output_file = r.get_string(doc["General"]["OutputFile"], "General.OutputFile");
  }
  if (doc.contains("GPUTune") && doc["GPUTune"].is_object() && doc["GPUTune"].contains("Naive")) {
    const json& nv = doc["GPUTune"]["Naive"];
    if (!nv.is_boolean())
      r.fail(
          "GPUTune.Naive", "expected true or false",
          "true when the kernel is naive (one thread per output) and gputune generates variants");
    job.naive = nv.get<bool>();
  }
  if (job.naive && !doc.contains("ConfigurationSpace")) {
    // The space is generated from the kernel (variants/naive/naive.h).
  } else {
    const json& space = r.require(doc, "", "ConfigurationSpace", "an object with TuningParameters");
    if (!space.is_object()) r.fail("ConfigurationSpace", "expected an object");
    r.note_unknown_keys(space, "ConfigurationSpace", kSpaceKeys);
    read_parameters(r, space, job);
    read_conditions(r, space, job);
  }

  const json& ks = r.require(doc, "", "KernelSpecification",
                             "an object with KernelName, KernelFile, LocalSize, GlobalSize");
  if (!ks.is_object()) r.fail("KernelSpecification", "expected an object");
  r.note_unknown_keys(ks, "KernelSpecification", kKernelKeys);
  for (auto& k : kNonSchemaKernelKeys)
    if (ks.contains(k))
      r.note("KernelSpecification." + k + " is not in the T1 schema (Kernel Tuner key, accepted)");
  if (ks.contains("Language"))
    job.language = r.get_string(ks["Language"], "KernelSpecification.Language");
  read_kernel_file(r, ks, file, job);
  if (job.name.empty() && ks.contains("BenchmarkName"))
    job.name = r.get_string(ks["BenchmarkName"], "KernelSpecification.BenchmarkName");
  if (job.name.empty()) job.name = file.stem().string();
  read_compile_and_launch(r, ks, job);
  read_arguments(r, ks, job);
  read_references(r, ks, job);
  read_search_and_budget(r, doc, job);
  if (doc.contains("GPUTune")) read_extension(r, doc["GPUTune"], job);
  // A naive job's space is gputune's own, often hundreds of thousands of variants (mm: 576,460,
  // days of brute force), and a budget measures part of a space: unless the job names a search,
  // the model guides it (apply_default_strategy).
  apply_default_strategy(job);
  if (!ks.contains("GlobalSize") && !job.use_grid_div)
    r.fail("KernelSpecification.GlobalSize", Reader::missing(ks, "GlobalSize"),
           "add GlobalSize {X, Y, Z} (or Kernel Tuner's GridDivX with ProblemSize)");
  if (job.use_grid_div && job.contexts.empty())
    r.fail("KernelSpecification.ProblemSize", "GridDivX/Y/Z need a ProblemSize",
           "add ProblemSize or GPUTune.Contexts");
  if (job.use_grid_div && ks.contains("GlobalSize"))
    r.note(
        "both GlobalSize and GridDivX/Y/Z given: the grid is ProblemSize / GridDiv, as Kernel "
        "Tuner computes it");
  if (job.contexts.empty())
    job.contexts.push_back({"default", List{Value(1), Value(1), Value(1)}, {}});
  for (auto& c : job.contexts)
    if (c.name.empty()) c.name = context_label(c.problem_size);
  if (job.language != "CUDA") {
    // Said once, with everything else wrong that the kernel's signature shows, before anything
    // is compiled: the language, then the arguments.
    const std::string mismatch = signature_mismatch(job);
    r.fail("KernelSpecification.Language",
           "'" + job.language + "' is not a language gputune compiles" +
               (mismatch.empty() ? "" : "; and " + mismatch),
           "gputune tunes CUDA: OpenCL C compiles as CUDA through a shim (the benchmark hub's "
           "cl_to_cuda.h) from a small wrapper .cu that includes it and the sources, with "
           "\"Language\": \"CUDA\" (configs/community/benchmark-hub/gemm_milo_cuda.json is "
           "the hub's gemm so)" +
               std::string(mismatch.empty() ? "" : "; write the Arguments the signature takes"));
  }
  return job;
}

Job load_job(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw JobError(file.string(), "", "cannot open the job file", "check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  json doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    // e.byte is the offset; turn it into line:column.
    std::string text = ss.str();
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    throw JobError(file.string(), "",
                   "malformed JSON at line " + std::to_string(line) + ", column " +
                       std::to_string(col) + " (" + e.what() + ")",
                   "fix the JSON syntax there");
  } catch (const json::exception& e) {  // a number beyond a double (1e400): out_of_range 406
    throw JobError(file.string(), "", std::string("malformed JSON (") + e.what() + ")",
                   "write numbers a double can hold");
  }
  Job job = parse_job(doc, file);
  job.document = ss.str();
  return job;
}

std::string kernel_hash(const Job& job, const std::string& source) {
  return sha256_hex(job.kernel_name + "\n" + source);
}

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// Whether `word` occurs in `text` as a whole identifier.
bool contains_word(const std::string& text, const std::string& word) {
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
    const bool starts = p == 0 || !is_word_char(text[p - 1]);
    const size_t end = p + word.size();
    if (starts && (end == text.size() || !is_word_char(text[end]))) return true;
  }
  return false;
}

/// The names of the __global__ functions a source defines: after each `__global__`, the
/// identifier right before the first '(' that does not open __launch_bounds__'s arguments.
std::vector<std::string> global_function_names(const std::string& src) {
  std::vector<std::string> names;
  const std::string key = "__global__";
  for (size_t p = src.find(key); p != std::string::npos; p = src.find(key, p + 1)) {
    size_t i = p + key.size();
    std::string last;
    while (i < src.size() && src[i] != ';' && src[i] != '{') {
      if (is_word_char(src[i])) {
        const size_t b = i;
        while (i < src.size() && is_word_char(src[i])) ++i;
        last = src.substr(b, i - b);
        continue;
      }
      if (src[i] == '(') {
        if (last != "__launch_bounds__") {
          if (!last.empty() && std::find(names.begin(), names.end(), last) == names.end())
            names.push_back(last);
          break;
        }
        const size_t close = src.find(')', i);
        if (close == std::string::npos) break;
        i = close;
        last.clear();
      }
      ++i;
    }
  }
  return names;
}

}  // namespace

void check_kernel_name(const Job& job, const std::string& source) {
  std::string base = job.kernel_name.substr(0, job.kernel_name.find('<'));  // reduce<float>
  if (const size_t q = base.rfind("::"); q != std::string::npos) base = base.substr(q + 2);
  while (!base.empty() && std::isspace(static_cast<unsigned char>(base.back()))) base.pop_back();
  // Defined here, or perhaps in a header of the job's own (quoted, or in angle brackets from an
  // include folder the job names): nothing to say.
  const bool own_include_folder = std::any_of(
      job.compiler_options.begin(), job.compiler_options.end(),
      [](const auto& o) { return o.rfind("-I", 0) == 0 || o.rfind("--include-path", 0) == 0; });
  if (base.empty() || contains_word(source, base) ||
      source.find("#include \"") != std::string::npos ||
      (own_include_folder && source.find("#include <") != std::string::npos))
    return;
  std::vector<std::string> names = global_function_names(source);
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return edit_distance(a, base) < edit_distance(b, base);
  });
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
  throw JobError(job.file.string(), "KernelSpecification.KernelName",
                 "'" + base + "' does not occur in " + job.kernel_file.filename().string() +
                     (names.empty() ? ", which defines no __global__ function"
                                    : ", whose __global__ functions are: " + listed),
                 names.empty() ? "name the kernel to tune, or point KernelFile at its file"
                               : "use \"KernelName\": \"" + names[0] + "\" if that is the one");
}

std::string load_kernel_source(const Job& job) {
  std::ifstream in(job.kernel_file);
  if (!in)
    throw JobError(job.file.string(), "KernelSpecification.KernelFile",
                   "cannot read kernel file '" + job.kernel_file.string() + "'",
                   "give a path relative to the job file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string source = ss.str();
  check_kernel_name(job, source);
  return source;
}

}  // namespace gputune
