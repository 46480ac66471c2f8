// `gputune check`: a job's configurations on the CPU against the reference
// (tuner/emulator/cpu_check.h).
#include "tuner/emulator/cpu_check.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "cuda/nvrtc.h"
#include "test_util.h"
#include "tuner/common/command_line.h"
#include "tuner/common/tuning_job.h"
#include "tuner/tools/generate.h"
#include "variants/instantiate.h"
#include "variants/naive/naive.h"
#include "variants/space.h"

using namespace gputune;
using namespace gputune::test;

namespace {

/// Keys of the configurations a report says differ.
std::set<std::string> failing(const tuner::CheckReport& r) {
  std::set<std::string> keys;
  for (const tuner::ConfigCheck& c : r.checked)
    if (!c.problem.empty()) keys.insert(c.key);
  return keys;
}

/// A copy of an example job and its kernel in `dir`, the kernel text changed by `edit`.
std::filesystem::path edited_example(const TempDir& dir, const std::string& name,
                                     const std::function<std::string(std::string)>& edit,
                                     const std::function<void(nlohmann::json&)>& edit_job = {}) {
  write_file(dir / (name + ".cu"), edit(read_file(examples_dir() / (name + ".cu"))));
  nlohmann::json j = nlohmann::json::parse(read_file(examples_dir() / (name + ".json")));
  if (edit_job) edit_job(j);
  write_file(dir / (name + ".json"), j.dump(1));
  return dir / (name + ".json");
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

tuner::CheckOptions all_at(std::vector<std::int64_t> size) {
  tuner::CheckOptions o;
  o.size = std::move(size);
  o.limit = 0;
  return o;
}

}  // namespace

// Every configuration of every shipped example computes what its default configuration does,
// at sizes that are no multiple of any tile: the examples are right before a GPU ever runs them.
TEST(CpuCheck, EveryConfigurationOfTheExamplesAgreesWithTheDefault) {
  const std::map<std::string, size_t> sizes{
      {"matmul", 726}, {"convolution", 286}, {"transpose", 171}, {"vector_add", 24}};
  for (const auto& [name, count] : sizes) {
    Job job = tuner::load_tuning_job(examples_dir() / (name + ".json"));
    tuner::CheckReport r = tuner::check_job(job, all_at({37, 29}));
    EXPECT_EQ(r.space_size, count) << name;
    EXPECT_EQ(r.checked.size(), count) << name;
    EXPECT_EQ(r.context.name, "37x29");
    EXPECT_EQ(r.checked.front().key, default_key(job)) << name;
    EXPECT_EQ(r.reference, "the default configuration " + default_key(job));
    EXPECT_EQ(r.failures(), 0u) << name << ": " << *failing(r).begin();
  }
}

// The check finds the mistakes tuning kernels have: a missing barrier (a race only the shared
// variants have) and a tile that drops outputs. Exactly the affected configurations differ.
TEST(CpuCheck, FindsARaceAndAWrongTileAndOnlyWhereTheyAre) {
  TempDir dir;
  const std::filesystem::path race = edited_example(dir, "matmul", [](std::string s) {
    return replace_once(s, "    __syncthreads();\n  }\n#else", "  }\n#else");
  });
  Job job = tuner::load_tuning_job(race);
  Space space = build_space(job);
  tuner::CheckReport r = tuner::check_job(job, all_at({37}));
  ASSERT_EQ(r.checked.size(), space.size());
  std::set<std::string> shared;
  for (size_t i = 0; i < space.size(); ++i)
    if (space.config(i).values[5].as_int() == 1) shared.insert(space.config(i).key());
  EXPECT_EQ(failing(r), shared);
  EXPECT_GT(shared.size(), 400u);

  TempDir dir2;
  const std::filesystem::path tile = edited_example(dir2, "matmul", [](std::string s) {
    return replace_once(s, "if (r < n && c < n) C[r * n + c] = acc[i][j];",
                        "if (r < n && c < n && !(tile_size_x == 4 && j == 1 && r == 5)) "
                        "C[r * n + c] = acc[i][j];");
  });
  Job job2 = tuner::load_tuning_job(tile);
  tuner::CheckReport r2 = tuner::check_job(job2, all_at({37}));
  // Output j = 1 of a thread is column tx + block_size_x: inside n = 37 only for 16 and 32.
  std::set<std::string> wide;
  for (size_t i = 0; i < space.size(); ++i)
    if (space.config(i).values[2].as_int() == 4 && space.config(i).values[0].as_int() < 37)
      wide.insert(space.config(i).key());
  EXPECT_GT(wide.size(), 50u);
  EXPECT_EQ(failing(r2), wide);
  for (const tuner::ConfigCheck& c : r2.checked) {
    if (!c.problem.empty()) {
      EXPECT_NE(c.problem.find("output 'C' differs"), std::string::npos) << c.problem;
    }
  }
}

// Arguments the kernel does not take are bad input, named by field, before anything runs: on a
// GPU they give garbage or a fault.
TEST(CpuCheck, ArgumentsThatDoNotMatchTheKernelAreBadInputNamingTheField) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string field, says;
  };
  const std::vector<Case> cases{
      {[](nlohmann::json& j) { j["KernelSpecification"]["Arguments"][3]["Type"] = "float"; },
       "KernelSpecification.Arguments[3] (n)",
       "'n' is a Scalar 4-byte floating-point value, but parameter 3 of kernel 'matmul' is a "
       "4-byte integer value"},
      {[](nlohmann::json& j) { j["KernelSpecification"]["Arguments"][1]["Type"] = "double"; },
       "KernelSpecification.Arguments[1] (A)", "pointer to 4-byte floating-point elements"},
      {[](nlohmann::json& j) { j["KernelSpecification"]["Arguments"].erase(3); },
       "KernelSpecification.Arguments", "the job lists 3 arguments, kernel 'matmul' takes 4"},
      {[](nlohmann::json& j) {
         auto& a = j["KernelSpecification"]["Arguments"][3];
         a["MemoryType"] = "Vector";
         a["Size"] = "1";
       },
       "KernelSpecification.Arguments[3] (n)", "is a Vector of 4-byte integer elements"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const auto file = edited_example(
        dir, "matmul", [](std::string s) { return s; }, c.edit);
    Job job = tuner::load_tuning_job(file);
    tuner::CheckOptions o = all_at({20});
    o.limit = 3;
    try {
      tuner::check_job(job, o);
      ADD_FAILURE() << c.field << ": no error";
    } catch (const JobError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("field '" + c.field + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << what;
      EXPECT_NE(what.find("matmul.json"), std::string::npos) << what;
    }
  }
}

// A naive job's variants are compared with the naive kernel itself; a limit spreads the checked
// configurations over the space and keeps the default among them.
TEST(CpuCheck, NaiveJobsAreCheckedAgainstTheNaiveKernel) {
  Job job = tuner::load_tuning_job(source_dir() / "configs" / "naive" / "transpose.json");
  tuner::CheckOptions o;
  o.size = {37, 29};
  o.limit = 25;
  tuner::CheckReport r = tuner::check_job(job, o);
  EXPECT_EQ(r.reference, "the naive kernel transpose");
  ASSERT_EQ(r.checked.size(), 25u);
  EXPECT_GT(r.space_size, 1000u);
  EXPECT_EQ(r.checked.front().key, default_key(job));
  std::set<std::string> distinct;
  for (const tuner::ConfigCheck& c : r.checked) distinct.insert(c.key);
  EXPECT_EQ(distinct.size(), 25u);
  EXPECT_EQ(r.failures(), 0u) << *failing(r).begin();
}

// A naive kernel that uses its file's macros, a helper from a guarded header beside it and is
// followed by another kernel: every variant keeps that text around the kernel it generates, the
// header is found from any working directory, and each variant is checked in a unit of its own
// (a second kernel in one unit would not see the guarded header's helper).
TEST(CpuCheck, ANaiveKernelKeepsItsHeadersMacrosAndHelpers) {
  TempDir dir;
  test::write_file(dir / "scale.h",
                   "#pragma once\n__device__ inline float scaled(float v) { return 2.0f * v; }\n");
  test::write_file(dir / "mv.cu", R"(// y = 2 A x
#include "scale.h"
#define ZERO 0.0f
extern "C" __global__ void mv(float* y, const float* a, const float* x, int m, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < m) {
    float sum = ZERO;
    for (int i = 0; i < n; i++) sum += a[idx * n + i] * x[i];
    y[idx] = scaled(sum);
  }
}
__global__ void other(float* p) { p[0] = scaled(ZERO); }
)");
  test::write_file(dir / "mv.json",
                   test::read_file(source_dir() / "configs" / "naive" / "mv.json"));
  ASSERT_NE(std::filesystem::current_path(), dir.path());
  Job job = tuner::load_tuning_job(dir / "mv.json");
  ASSERT_TRUE(job.naive_kernel) << job.naive_fallback;
  const Space space = build_space(job);
  const std::string v = naive::emit_variant(
      *job.naive_kernel, naive::choice_from_config(*job.naive_kernel, space.config(0)));
  const size_t include = v.find("#include \"scale.h\""), macro = v.find("#define ZERO"),
               kernel = v.find("extern \"C\" __global__ void"), other = v.find("void other(");
  ASSERT_NE(include, std::string::npos) << v;
  EXPECT_LT(include, macro);
  EXPECT_LT(macro, kernel);
  EXPECT_LT(kernel, other);
  EXPECT_EQ(v.find("extern \"C\""), kernel) << "the naive kernel's own definition is replaced";
  EXPECT_EQ(v.rfind("// Generated by gputune", 0), 0u);
  tuner::CheckOptions o;
  o.size = {37, 29};
  o.limit = 6;
  tuner::CheckReport r = tuner::check_job(job, o);
  ASSERT_EQ(r.checked.size(), 6u);
  EXPECT_EQ(r.failures(), 0u) << *failing(r).begin();
  // NVRTC compiles the variants too (the GPU path), from this working directory.
  Variant var = instantiate(job, test::read_file(dir / "mv.cu"), space.config(0), job.contexts[0]);
  const cuda::CompiledVariant c = cuda::compile_variant(var, "sm_90");
  EXPECT_TRUE(c.ok) << c.log;
}

// Include folders and macros reach the host compiler in every spelling NVRTC takes
// (`-Idir`, `-I dir`, `--include-path=dir`, `--include-path dir`; `-DX`, `-D X`,
// `--define-macro=X`, `--define-macro X`), and only the options it does not get are listed.
TEST(CpuCheck, IncludeFoldersAndMacrosInEveryNvrtcSpellingReachTheHostCompiler) {
  TempDir dir;
  const std::vector<std::string> folders{"i1", "i2", "i3", "i4"};
  for (size_t f = 0; f < folders.size(); ++f) {
    std::filesystem::create_directories(dir / folders[f] / "lib");
    write_file(
        dir / folders[f] / "lib" / ("h" + std::to_string(f + 1) + ".h"),
        "#pragma once\n#define H" + std::to_string(f + 1) + " " + std::to_string(f + 1) + "\n");
  }
  const std::filesystem::path job_file = edited_example(
      dir, "vector_add",
      [](std::string s) {
        return "#include <lib/h1.h>\n#include <lib/h2.h>\n#include <lib/h3.h>\n"
               "#include <lib/h4.h>\n"
               "static_assert(H1 + H2 * 10 + H3 * 100 + H4 * 1000 == 4321, \"headers\");\n"
               "static_assert(M1 + M2 * 10 + M3 * 100 + M4 * 1000 == 1321, \"macros\");\n" +
               s;
      },
      [&](nlohmann::json& j) {
        const std::string d = dir.path().string() + "/";
        j["KernelSpecification"]["CompilerOptions"] = {"-std=c++17",
                                                       "-I" + d + "i1",
                                                       "-I",
                                                       d + "i2",
                                                       "--include-path=" + d + "i3",
                                                       "--include-path",
                                                       d + "i4",
                                                       "-DM1=1",
                                                       "-D",
                                                       "M2=2",
                                                       "--define-macro=M3=3",
                                                       "--define-macro",
                                                       "M4",
                                                       "--use_fast_math"};
      });
  Job job = tuner::load_tuning_job(job_file);
  tuner::CheckOptions o;
  o.size = {1000};
  o.limit = 3;
  const tuner::CheckReport r = tuner::check_job(job, o);
  ASSERT_EQ(r.checked.size(), 3u);
  EXPECT_EQ(r.failures(), 0u) << *failing(r).begin();
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "compiler options the host compiler does not get: --use_fast_math");
}

// Without --size a naive job is checked at a small size no tile divides (its variants guard every
// size; 4096 x 4096 would take minutes per configuration), a filter width kept, and a note says so.
TEST(CpuCheck, ANaiveJobWithoutASizeIsCheckedAtASmallOne) {
  Job job = tuner::load_tuning_job(source_dir() / "configs" / "naive" / "conv2d.json");
  ASSERT_EQ(job.contexts.front().name, "4096x4096 f17");
  EXPECT_EQ(tuner::small_naive_size(job.contexts.front()), (std::vector<std::int64_t>{37, 29, 17}));
  tuner::CheckOptions o;
  o.limit = 3;
  tuner::CheckReport r = tuner::check_job(job, o);
  EXPECT_EQ(r.context.name, "37x29x17");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("checking at 37x29x17, not the job's 4096x4096 f17"), std::string::npos)
      << r.notes[0];
  ASSERT_EQ(r.checked.size(), 3u);
  EXPECT_EQ(r.failures(), 0u) << *failing(r).begin();
  // Small sizes stay as they are; a parametric job keeps its own (its kernel may not guard).
  ContextSpec small;
  small.problem_size = {Value(64), Value(3)};
  EXPECT_TRUE(tuner::small_naive_size(small).empty());
  Job add = tuner::load_tuning_job(source_dir() / "configs" / "examples" / "vector_add.json");
  o.limit = 1;
  const tuner::CheckReport own = tuner::check_job(add, o);
  EXPECT_EQ(own.context.name, "1M");
  EXPECT_TRUE(own.notes.empty());
}

// ReferenceArguments are the reference at the job's own sizes; at another size (their data
// belongs to the job's) the default configuration is, and the report says so.
TEST(CpuCheck, ReferenceArgumentsAtTheJobsSizeTheDefaultConfigurationElsewhere) {
  TempDir dir;
  write_file(dir / "fill.cu", R"(
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * block_size_x + threadIdx.x;
  if (i < n) out[i] = 2.0f;
  if (i < n && step == 4 && i == n - 1) out[i] = 3.0f;
}
)");
  auto job_text = [](double expected) {
    nlohmann::json j = {{"ConfigurationSpace",
                         {{"TuningParameters",
                           {{{"Name", "block_size_x"}, {"Type", "int"}, {"Values", "[32, 64]"}},
                            {{"Name", "step"}, {"Type", "int"}, {"Values", "[1, 4]"}}}}}},
                        {"KernelSpecification",
                         {{"Language", "CUDA"},
                          {"KernelName", "fill"},
                          {"KernelFile", "fill.cu"},
                          {"LocalSize", {{"X", "block_size_x"}, {"Y", "1"}, {"Z", "1"}}},
                          {"GlobalSize", {{"X", "ProblemSize[0]"}, {"Y", "1"}, {"Z", "1"}}},
                          {"Arguments",
                           {{{"Name", "out"},
                             {"Type", "float"},
                             {"MemoryType", "Vector"},
                             {"AccessType", "WriteOnly"},
                             {"Size", "ProblemSize[0]"},
                             {"FillType", "Constant"},
                             {"FillValue", 0.0}},
                            {{"Name", "n"},
                             {"Type", "int32"},
                             {"MemoryType", "Scalar"},
                             {"FillType", "Constant"},
                             {"FillValue", "ProblemSize[0]"}}}},
                          {"ReferenceArguments",
                           {{{"Name", "want"},
                             {"TargetName", "out"},
                             {"FillType", "Constant"},
                             {"FillValue", expected}}}}}},
                        {"GPUTune", {{"Contexts", {{{"Name", "100"}, {"ProblemSize", {100}}}}}}}};
    return j.dump(1);
  };
  write_file(dir / "fill.json", job_text(2.0));
  Job job = tuner::load_tuning_job(dir / "fill.json");
  tuner::CheckReport r = tuner::check_job(job, tuner::CheckOptions{});
  EXPECT_EQ(r.reference, "the ReferenceArguments");
  EXPECT_EQ(r.context.name, "100");
  EXPECT_EQ(failing(r), (std::set<std::string>{"32,4", "64,4"}));  // the last element is 3
  // At another size the default (32,1) is the reference: the same two differ.
  tuner::CheckReport other = tuner::check_job(job, all_at({45}));
  EXPECT_EQ(other.reference, "the default configuration 32,1");
  EXPECT_EQ(failing(other), (std::set<std::string>{"32,4", "64,4"}));
  ASSERT_EQ(other.notes.size(), 1u);
  EXPECT_NE(other.notes[0].find("ReferenceArguments belong to the job's sizes"), std::string::npos);
  // A reference the kernel never matches: every configuration differs, the default too.
  write_file(dir / "fill.json", job_text(5.0));
  tuner::CheckReport wrong = tuner::check_job(tuner::load_tuning_job(dir / "fill.json"), {});
  EXPECT_EQ(wrong.failures(), 4u);
}

// The command: one line per configuration that differs, a summary, and the exit code.
TEST(CpuCheck, TheCommandPrintsWhatDiffersAndExitsSix) {
  auto ok = run_gputune("check '" + (examples_dir() / "vector_add.json").string() +
                        "' --size 1000 --limit 5");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("checked 5 of 24 configurations on the CPU at ProblemSize 1000 against "
                        "the default configuration 256,1: all agree (spread over the space; "
                        "--limit 0 checks all)"),
            std::string::npos)
      << ok.out;
  TempDir dir;
  const auto bad = edited_example(dir, "vector_add", [](std::string s) {
    return replace_once(s, "if (j < n)", "if (j < n && tile_size_x != 8)");
  });
  auto differs = run_gputune("check '" + bad.string() + "' --size 1000");
  EXPECT_EQ(differs.exit_code, 6) << differs.out;
  EXPECT_NE(differs.out.find("DIFFERS 32,8: output 'c' differs from the reference"),
            std::string::npos)
      << differs.out;
  EXPECT_NE(differs.out.find("6 differ or fail"), std::string::npos) << differs.out;
  auto size = run_gputune("check '" + bad.string() + "' --size 0");
  EXPECT_EQ(size.exit_code, 2) << size.out;
  EXPECT_NE(size.out.find("--size 0: sizes must be positive integers"), std::string::npos);
  // conv2d's sizes need three numbers (width, height, filter): bad input, naming the argument.
  auto two = run_gputune("check '" + (source_dir() / "configs" / "naive" / "conv2d.json").string() +
                         "' --size 37,29 --limit 3");
  EXPECT_EQ(two.exit_code, 2) << two.out;
  EXPECT_NE(two.out.find("conv2d.json: field 'KernelSpecification.Arguments[1] (in).Size'"),
            std::string::npos)
      << two.out;
  EXPECT_NE(two.out.find("list index 2 out of range"), std::string::npos) << two.out;
}

// The host compiler's command line names the kernel's folder and the temporary folder: both may
// hold spaces and quotes.
TEST(CpuCheck, FoldersWithSpacesAndQuotesInTheirNamesWork) {
  TempDir top;
  const std::filesystem::path jobs = top / "Bob's kernels", tmp = top / "tmp $HOME dir";
  std::filesystem::create_directories(jobs);
  std::filesystem::create_directories(tmp);
  write_file(jobs / "vector_add.cu", read_file(examples_dir() / "vector_add.cu"));
  write_file(jobs / "vector_add.json", read_file(examples_dir() / "vector_add.json"));
  auto r = run_command("TMPDIR=" + tuner::shell_quote(tmp.string()) + " '" + GPUTUNE_BINARY +
                       "' check " + tuner::shell_quote((jobs / "vector_add.json").string()) +
                       " --size 1000 --limit 3");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("checked 3 of 24 configurations"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(tmp));  // its temporary folder is gone again
}

// A configuration that faults or never returns is reported with what it did (which argument,
// which element) and the check goes on: the others are still checked, and agree. A write into
// the bytes around an array that the page layout leaves accessible is found afterwards.
TEST(CpuCheck, FaultsAndRunawayConfigurationsAreReportedAndTheCheckGoesOn) {
  TempDir dir;
  const auto job_file = edited_example(dir, "vector_add", [](std::string s) {
    return replace_once(
        s, "    if (j < n) c[j] = a[j] + b[j];",
        "    if (block_size_x == 32 && tile_size_x == 2 && j == n - 1) c[j] = a[j + 4];\n"
        "    else if (block_size_x == 32 && tile_size_x == 4 && j == n - 1) c[j] = a[j + 1];\n"
        "    else if (block_size_x == 64 && tile_size_x == 2 && j == 0) c[-3] = 0;\n"
        "    else if (block_size_x == 64 && tile_size_x == 4 && j == 0) c[n] = 0;\n"
        "    else if (block_size_x == 128 && tile_size_x == 8) c[j] = j / (j - j);\n"
        "    else if (block_size_x == 256 && tile_size_x == 4) { volatile int s = 0; "
        "while (n > 0) s = s + 1; }\n"
        "    else if (block_size_x == 512 && tile_size_x == 2 && j < n) { __shared__ "
        "__align__(16) float s[8]; s[threadIdx.x % 8] = a[j];\n"
        "      c[j] = reinterpret_cast<const float4*>(&s[1])->x; }\n"
        "    else if (j < n) c[j] = a[j] + b[j];");
  });
  tuner::CheckOptions o = all_at({1001});
  o.timeout_s = 1;
  tuner::CheckReport r = tuner::check_job(tuner::load_tuning_job(job_file), o);
  ASSERT_EQ(r.checked.size(), 24u);
  std::map<std::string, std::string> problems;
  for (const tuner::ConfigCheck& c : r.checked)
    if (!c.problem.empty()) problems[c.key] = c.problem;
  ASSERT_EQ(problems.size(), 7u);
  // 1001 floats end 12 bytes before the next 16-byte boundary, where the guard page begins: a
  // read in between gets the fill pattern (and differs); a read at the boundary faults.
  EXPECT_EQ(problems["32,2"], "accesses 'a' at element 1004 (it has 1001), past its end");
  EXPECT_NE(problems["32,4"].find("output 'c' differs from the reference at 1 element(s); first "
                                  "at index 1000"),
            std::string::npos)
      << problems["32,4"];
  EXPECT_EQ(problems["64,2"], "writes 'c' at element -3 (it has 1001), before its start");
  EXPECT_EQ(problems["64,4"], "writes 'c' at element 1001 (it has 1001), past its end");
  EXPECT_NE(problems["128,8"].find("division or remainder by zero"), std::string::npos);
  EXPECT_NE(problems["256,4"].find("stopped after 1 s of CPU time"), std::string::npos);
  // A float4 read through a cast pointer 4 bytes past a 16-byte boundary, with its line.
  EXPECT_EQ(problems["512,2"].rfind("misaligned address: vector_add.cu (512,2):16: ", 0), 0u)
      << problems["512,2"];
  EXPECT_NE(problems["512,2"].find("not a multiple of 16 bytes"), std::string::npos);
}

// A configuration whose launch a GPU refuses (gridDim.y beyond 65535, more than 1024 threads) is
// reported as such without being emulated, and the reference is the first one that runs.
TEST(CpuCheck, LaunchesAGpuWouldRefuseAreReportedNotEmulated) {
  TempDir dir;
  const auto job_file = edited_example(
      dir, "vector_add", [](std::string s) { return s; },
      [](nlohmann::json& j) {
        j["KernelSpecification"]["GlobalSize"]["Y"] = "70000 if tile_size_x == 8 else 1";
        j["KernelSpecification"]["LocalSize"]["Y"] = "8 if block_size_x == 256 else 1";
      });
  tuner::CheckReport r = tuner::check_job(tuner::load_tuning_job(job_file), all_at({1001}));
  ASSERT_EQ(r.checked.size(), 24u);
  std::map<std::string, std::string> problems;
  for (const tuner::ConfigCheck& c : r.checked)
    if (!c.problem.empty()) problems[c.key] = c.problem;
  ASSERT_EQ(problems.size(), 6u + 3u);  // tile 8 at six block sizes; 256 x 8 threads at three
  EXPECT_EQ(problems["32,8"],
            "a GPU (sm_90) would refuse this launch: grid.y 70000 > 65535, the most a grid may "
            "have along y");
  EXPECT_EQ(problems["256,1"],
            "a GPU (sm_90) would refuse this launch: 2048 threads per block > limit 1024");
  EXPECT_EQ(r.reference, "configuration 32,1 (the default configuration failed)");
}

// A templated kernel (KernelName "reduce<float>") that reduces with warp shuffles, shared memory
// and one atomicAdd per block: every configuration agrees, and a shuffle that starts at the
// wrong offset is found in exactly the configurations that have it.
TEST(CpuCheck, TemplatedWarpShuffleReductionsAreChecked) {
  const std::filesystem::path data = source_dir() / "tests" / "data" / "warp_reduce";
  tuner::CheckReport ok =
      tuner::check_job(tuner::load_tuning_job(data / "reduce.json"), all_at({10007}));
  EXPECT_EQ(ok.checked.size(), 24u);
  EXPECT_EQ(ok.failures(), 0u) << *failing(ok).begin();

  TempDir dir;
  write_file(dir / "reduce.cu", replace_once(read_file(data / "reduce.cu"), "int o = 16;",
                                             "int o = items == 2 ? 8 : 16;"));
  write_file(dir / "reduce.json", read_file(data / "reduce.json"));
  tuner::CheckReport bad =
      tuner::check_job(tuner::load_tuning_job(dir / "reduce.json"), all_at({10007}));
  std::set<std::string> want;
  for (int b : {32, 64, 128, 256, 512, 1024}) want.insert(std::to_string(b) + ",2");
  EXPECT_EQ(failing(bad), want);
}

// Ctrl-C during `gputune check` (SIGINT to its process group, as a terminal sends it): while the
// kernels compile, the compilers stop and nothing is checked; during a launch that would spin
// until its 120 s limit (block_size_x 512), the launch stops at once and what was checked before it
// is reported. Both exit 5 and leave nothing in the temporary folder.
TEST(CpuCheck, CtrlCStopsTheCheckAtOnceAndReportsWhatWasChecked) {
  TempDir dir;
  const auto job_file = edited_example(dir, "vector_add", [](std::string s) {
    return replace_once(s, "    if (j < n) c[j] = a[j] + b[j];",
                        "    if (block_size_x == 512) { volatile int s = 0; while (n > 0) s = s + "
                        "1; }\n    if (j < n) c[j] = a[j] + b[j];");
  });
  const std::filesystem::path tmp = dir / "tmp";
  std::filesystem::create_directories(tmp);
  const std::string log = (dir / "out.txt").string();
  auto start = [&] {
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      setenv("TMPDIR", tmp.c_str(), 1);
      signal(SIGINT, SIG_DFL);
      if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
        _exit(126);
      execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "check", job_file.c_str(), "--size", "1001", "--limit",
            "0", "--timeout", "120", static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    return pid;
  };
  auto compiling = [&] { return !std::filesystem::is_empty(tmp); };
  auto wait_until = [](const std::function<bool()>& done, int seconds) {
    for (int i = 0; i < seconds * 20 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return done();
  };
  // The exit status, or -1 when the process has not ended within `seconds` (then it is killed).
  auto exit_within = [&](pid_t pid, int seconds) {
    int status = 0;
    bool ended = false;  // waitpid reaps once: remember it
    wait_until([&] { return ended = ended || waitpid(pid, &status, WNOHANG) == pid; }, seconds);
    if (!ended) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
  };

  const pid_t early = start();
  ASSERT_TRUE(wait_until(compiling, 60)) << read_file(log);
  kill(-early, SIGINT);
  EXPECT_EQ(exit_within(early, 30), 5) << read_file(log);
  std::string out = read_file(log);
  EXPECT_NE(out.find("gputune: check interrupted while compiling; nothing was checked"),
            std::string::npos)
      << out;
  EXPECT_TRUE(std::filesystem::is_empty(tmp));

  const pid_t late = start();
  ASSERT_TRUE(wait_until(compiling, 60)) << read_file(log);
  ASSERT_TRUE(wait_until([&] { return !compiling(); }, 300)) << read_file(log);  // loaded
  std::this_thread::sleep_for(std::chrono::seconds(1));  // into the first 512-thread block
  kill(-late, SIGINT);
  EXPECT_EQ(exit_within(late, 30), 5) << read_file(log);
  out = read_file(log);
  EXPECT_NE(out.find("stopping the check; what was checked is reported"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m,
                                std::regex("checked (\\d+) of 24 configurations.*: all "
                                           "agree \\(interrupted: the rest were not "
                                           "checked\\)")))
      << out;
  EXPECT_GE(std::stoi(m[1]), 1);  // the default configuration, at least
  EXPECT_LT(std::stoi(m[1]), 24);
  EXPECT_EQ(out.find("DIFFERS"), std::string::npos) << out;  // the stopped one is not a failure
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
}

// SIGTERM to `gputune check` alone (as `kill PID` sends it) while the host compiler runs: the
// compilers, in process groups of their own, are ended too, so the check stops at once rather
// than when they finish. The compiler here waits 60 s before compiling.
TEST(CpuCheck, AStopEndsTheHostCompilersToo) {
  TempDir dir;
  const std::filesystem::path tmp = dir / "tmp", pid_file = dir / "compiler.pid";
  std::filesystem::create_directories(tmp);
  write_file(dir / "slow-cxx",
             "#!/bin/sh\necho $$ > '" + pid_file.string() + "'\nsleep 60\nexec c++ \"$@\"\n");
  std::filesystem::permissions(dir / "slow-cxx", std::filesystem::perms::owner_all);
  const std::string job = (source_dir() / "configs" / "examples" / "vector_add.json").string();
  const std::string log = (dir / "out.txt").string();
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("TMPDIR", tmp.c_str(), 1);
    setenv("GPUTUNE_HOST_CXX", tuner::shell_quote((dir / "slow-cxx").string()).c_str(), 1);
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "check", job.c_str(), "--size", "1001", "--limit", "4",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t compiler = 0;
  for (int i = 0; i < 1200 && compiler == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string text = std::filesystem::exists(pid_file) ? read_file(pid_file) : "";
    if (!text.empty() && text.back() == '\n') compiler = static_cast<pid_t>(std::stol(text));
  }
  ASSERT_GT(compiler, 0) << read_file(log);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  const auto status = wait_for_child(pid, 30);
  ASSERT_TRUE(status) << "still running 30 s after SIGTERM: " << read_file(log);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(20));
  ASSERT_TRUE(WIFEXITED(*status)) << read_file(log);
  EXPECT_EQ(WEXITSTATUS(*status), 5) << read_file(log);
  EXPECT_NE(read_file(log).find("check interrupted while compiling; nothing was checked"),
            std::string::npos)
      << read_file(log);
  // Ended: gone, or a zombie that init has not reaped yet (its parent, the shell, ended first).
  const std::filesystem::path status_file = "/proc/" + std::to_string(compiler) + "/status";
  const std::string left = std::filesystem::exists(status_file) ? read_file(status_file) : "";
  EXPECT_TRUE(left.empty() || left.find("State:\tZ") != std::string::npos)
      << "the host compiler " << compiler << " is still running:\n"
      << left;
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
}

// `gputune generate`'s exit codes follow the table every command uses: 0 when the written
// variants agree with the naive kernel, 2 (bad input) for a kernel outside the subset, with the
// construct that stopped it and how it can still be tuned.
TEST(CpuCheck, GenerateExitsWithTheCommandsCodes) {
  TempDir dir;
  const std::string naive = (source_dir() / "configs" / "naive").string();
  auto ok = run_gputune("generate '" + naive + "/mv.cu' --kernel mv --job '" + naive +
                        "/mv.json' --out '" + (dir / "out").string() +
                        "' --limit 4 --check --size 37,29");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("all 4 variants agree with the naive kernel on the CPU (context 37x29)"),
            std::string::npos)
      << ok.out;
  write_file(dir / "k.cu", R"(
__global__ void k(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __shared__ float s[256];
  s[threadIdx.x] = in[i];
  __syncthreads();
  if (i < n) out[i] = s[threadIdx.x];
}
)");
  auto outside = run_gputune("generate '" + (dir / "k.cu").string() + "' --kernel k");
  EXPECT_EQ(outside.exit_code, 2) << outside.out;
  EXPECT_NE(outside.out.find("gputune: k.cu:"), std::string::npos) << outside.out;
  EXPECT_NE(outside.out.find("can still be tuned over its block shape"), std::string::npos)
      << outside.out;
}
