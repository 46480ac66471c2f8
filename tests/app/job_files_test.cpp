// app/job_files: what a submitted job takes along, and how the worker's copies are found.
#include "app/job_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tuner/compile.h"

namespace gputune::tuner {
namespace {

using namespace gputune::app;  // batch and job files moved from tuner/ to app/

namespace fs = std::filesystem;

TEST(JobFiles, AbsolutePathsAndEveryIncludeSpellingPointAtTheCopies) {
  test::TempDir project, worker;
  const fs::path p = fs::canonical(project.path());
  fs::create_directories(p / "inc");
  fs::create_directories(p / "inc2");
  test::write_file(p / "k.cu",
                   "#include \"h.h\"\n#include \"g.h\"\n#include <cuda_fp16.h>\n"
                   "extern \"C\" __global__ void k(float* x) { x[0] = H + G; }\n");
  test::write_file(p / "inc/h.h", "#define H 1.0f\n");
  test::write_file(p / "inc2/g.h", "#define G 2.0f\n");
  test::write_file(p / "d.bin", std::string(16, '\x01'));
  const nlohmann::json doc = {
      {"ConfigurationSpace",
       {{"TuningParameters", {{{"Name", "bs"}, {"Type", "int"}, {"Values", "[32]"}}}}}},
      {"KernelSpecification",
       {{"Language", "CUDA"},
        {"KernelName", "k"},
        {"KernelFile", (p / "k.cu").string()},  // absolute
        {"CompilerOptions", {"-I" + (p / "inc").string(), "--include-path=inc2", "-DQ=1"}},
        {"LocalSize", {{"X", "bs"}}},
        {"GlobalSize", {{"X", "1"}}},
        {"Arguments",
         {{{"Name", "x"},
           {"Type", "float"},
           {"MemoryType", "Vector"},
           {"Size", 4},
           {"FillType", "BinaryRaw"},
           {"DataSource", (p / "d.bin").string()}}}}}},
      {"GPUTune", {{"Database", "mine.db"}}}};
  test::write_file(p / "job.json", doc.dump());

  // Where the job is submitted: relative -I folders are the working directory's.
  const fs::path cwd_before = fs::current_path();
  fs::current_path(p);
  Job job = load_job(p / "job.json");
  const std::string source = test::read_file(p / "k.cu");
  std::vector<JobFile> files = job_files(job, source);
  fs::current_path(cwd_before);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, (p / "d.bin").string());
  EXPECT_EQ(files[0].bytes, std::string(16, '\x01'));
  EXPECT_EQ(files[1].path, (p / "inc/h.h").string());
  EXPECT_EQ(files[2].path, (p / "inc2/g.h").string());

  // Where the worker runs it: everything under its folder, at the submitting machine's paths.
  const fs::path root = worker / "root";
  test::write_file(root / "left/over.h", "from the job before");
  SubmittedJob sub{(p / "job.json").string(), doc.dump(), source, files, p.string()};
  const fs::path written = write_out(root, sub);
  EXPECT_EQ(written, mirrored(root, (p / "job.json").string()));
  EXPECT_FALSE(fs::exists(root / "left/over.h")) << "the folder is emptied first";
  EXPECT_FALSE(nlohmann::json::parse(test::read_file(written))["GPUTune"].contains("Database"));
  Job there = load_job(written);
  use_copies(there, root, p.string());
  EXPECT_EQ(there.kernel_file, mirrored(root, (p / "k.cu").string()));
  EXPECT_EQ(test::read_file(there.kernel_file), source);
  EXPECT_EQ(there.arguments[0].data_source, mirrored(root, (p / "d.bin").string()).string());
  const std::string inc = mirrored(root, (p / "inc").string()).string();
  const std::string inc2 = mirrored(root, (p / "inc2").string()).string();
  EXPECT_EQ(there.compiler_options,
            (std::vector<std::string>{"-I" + inc, "-I" + (p / "inc").string(),
                                      "--include-path=" + inc2, "--include-path=inc2", "-DQ=1"}));
  // The copies are what the compiler finds, from any working directory.
  std::vector<std::string> options = {"-I" + there.kernel_file.parent_path().string()};
  options.insert(options.end(), there.compiler_options.begin(), there.compiler_options.end());
  auto found = own_header_files(source, options);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], mirrored(root, (p / "inc/h.h").string()));
  EXPECT_EQ(found[1], mirrored(root, (p / "inc2/g.h").string()));

  // Nothing lands outside the folder.
  EXPECT_THROW(
      write_out(root, {(p / "job.json").string(), doc.dump(), source, {{"relative/x.h", "x"}}, ""}),
      std::runtime_error);
  EXPECT_THROW(mirrored(root, "/a/../../../etc/x"), std::runtime_error);
  EXPECT_EQ(mirrored(root, "/etc/x"), root / "etc/x");
}

}  // namespace
}  // namespace gputune::tuner
