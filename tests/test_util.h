// Helpers shared by the tests: paths, temporary folders, running the gputune binary.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

namespace gputune::test {

/// Tests (and the gputune processes they start) never touch the user's cubin cache or database.
inline const bool kIsolatedState = [] {
  setenv("GPUTUNE_CACHE_DIR", GPUTUNE_TEST_STATE_DIR "/cubin-cache", 0);
  setenv("GPUTUNE_DB", GPUTUNE_TEST_STATE_DIR "/default.db", 0);
  return true;
}();

inline std::filesystem::path source_dir() { return GPUTUNE_SOURCE_DIR; }
inline std::filesystem::path shared_dir() { return GPUTUNE_SHARED_DIR; }
inline std::filesystem::path examples_dir() { return source_dir() / "configs" / "examples"; }

/// Waits up to `seconds` for the child `pid` to end; its wait status. A child still running then
/// is killed (SIGKILL) and reaped, and there is no status.
inline std::optional<int> wait_for_child(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

/// A fresh folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("gputune-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// add.cu (`source`) and add.json in `dir`: a naive job (GPUTune.Naive) of `vector_add`, the one
/// kernel name the fake driver loads, at one context of 1M elements.
inline void write_naive_add_job(const std::filesystem::path& dir, const std::string& source) {
  std::ofstream(dir / "add.cu") << source;
  std::ofstream(dir / "add.json") << R"({
  "General": {"BenchmarkName": "naive_add", "OutputFormat": "JSON"},
  "KernelSpecification": {
    "Language": "CUDA", "KernelName": "vector_add", "KernelFile": "add.cu",
    "GlobalSize": {"X": "ProblemSize[0]", "Y": "1", "Z": "1"}, "GlobalSizeType": "OpenCL",
    "Arguments": [
      {"Name": "c", "Type": "float", "MemoryType": "Vector", "AccessType": "WriteOnly", "Size": "ProblemSize[0]", "FillType": "Constant", "FillValue": 0.0, "Output": 1},
      {"Name": "a", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "b", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]", "FillType": "Random", "FillValue": 1.0},
      {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillType": "Constant", "FillValue": "ProblemSize[0]"}
    ]
  },
  "GPUTune": {"Naive": true, "Contexts": [{"Name": "1M", "ProblemSize": [1048576]}]}
})";
}

/// A naive vector_add outside the generator's subset (a local array, on line 4): a naive job of
/// it is tuned over block shape only. extern "C": the fake driver finds the kernel by its plain
/// name, and NVRTC compiles the file as written (no generated wrapper names it).
inline constexpr const char* kNaiveAddOutsideTheSubset = R"(
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t[2];
  if (i < n) {
    t[0] = a[i];
    t[1] = b[i];
    c[i] = t[0] + t[1];
  }
})";

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

/// Runs a shell command, capturing stdout and stderr together.
inline CommandResult run_command(const std::string& command) {
  std::string cmd = command + " 2>&1";
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Runs the gputune binary with arguments (shell-quoted by the caller where needed).
inline CommandResult run_gputune(const std::string& args) {
  return run_command(std::string("'") + GPUTUNE_BINARY + "' " + args);
}

/// The vector_add example (the kernel the fake driver runs) in `dir`, in one context of 1M, its
/// source behind a header of `helpers` device functions (10,000 make each compile and analysis
/// take about 0.1 s on the development VM); returns the job, to be changed and written by the
/// caller.
inline nlohmann::json vector_add_job_in(const TempDir& dir, int helpers) {
  std::string filler;
  for (int i = 0; i < helpers; ++i)
    filler += "__device__ inline float filler_" + std::to_string(i) + "(float x) { return x * " +
              std::to_string(i) + ".0f; }\n";
  write_file(dir / "filler.h", filler);
  write_file(dir / "vector_add.cu",
             "#include \"filler.h\"\n" + read_file(examples_dir() / "vector_add.cu"));
  auto job = nlohmann::json::parse(read_file(examples_dir() / "vector_add.json"));
  job["GPUTune"]["Contexts"] = {{{"Name", "1M"}, {"ProblemSize", {1048576}}}};
  return job;
}

#ifdef FAKE_CUDA_DIR
/// The start of a shell command that runs the gputune binary on the fake driver (tests/fake_cuda),
/// with `env` (its switches, `NAME=value ...`) set: append the arguments.
inline std::string with_fake(const std::string& env = {}) {
  return std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR + "' " + env + " '" + GPUTUNE_BINARY +
         "' ";
}
#endif

}  // namespace gputune::test
