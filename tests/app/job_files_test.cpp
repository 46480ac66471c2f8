// app/job_files: what a submitted job takes along, and how the worker's copies are found.
#include "app/job_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cuda/header_digest.h"
#include "cuda/nvrtc.h"
#include "test_util.h"

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
  fs::permissions(worker.path(), fs::perms::owner_all);  // private whatever the umask
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
  auto found = cuda::own_header_files(source, options);
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

/// Every file under `dir` (links as links), relative to it.
std::set<std::string> tree(const fs::path& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it)
    out.insert(fs::relative(it->path(), dir).string() + (it->is_symlink() ? " -> link" : ""));
  return out;
}

// What a submitted job names (its job file, its KernelFile, the paths of its files) cannot make
// the worker write outside its folder: `..` stops at the folder, a symbolic link left in the
// folder (where a submitted path leads, or at a submitted file's own path) is removed with it and
// never followed, a NUL byte or a name too long is refused, and the folder's parent must be
// private (not a link, not writable by others, this user's). Checked on disk.
TEST(JobFiles, NothingIsWrittenOutsideTheWorkersFolder) {
  test::TempDir outside_dir, worker;
  fs::permissions(worker.path(), fs::perms::owner_all);
  const fs::path outside = fs::canonical(outside_dir.path());
  fs::create_directories(outside / "target");
  test::write_file(outside / "target/keep.h", "untouched");
  const fs::path root = worker / "root";
  auto doc = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  // The kernel climbs far above the job's folder: it stops at the submitting machine's /.
  std::string climb;
  for (int i = 0; i < 40; ++i) climb += "../";
  doc["KernelSpecification"]["KernelFile"] = climb + (outside / "k.cu").relative_path().string();
  // Links in the worker's folder from before: where a submitted folder would be, and at a
  // submitted file's own path.
  fs::create_directories((root / outside.relative_path()).parent_path());
  fs::create_directory_symlink(outside / "target", root / outside.relative_path());
  fs::create_directories(root / "etc");
  fs::create_symlink(outside / "target/keep.h", root / "etc/x.h");
  const std::set<std::string> before = tree(outside);
  SubmittedJob sub{(outside / "job.json").string(),
                   doc.dump(),
                   "// kernel",
                   {{(outside / "a.h").string(), "a"},
                    {(outside / "target/keep.h").string(), "replaced?"},
                    {"/etc/x.h", "x"}},
                   outside.string()};
  const fs::path written = write_out(root, sub);
  EXPECT_EQ(written, root / (outside / "job.json").relative_path());
  EXPECT_EQ(tree(outside), before) << "nothing written outside";
  EXPECT_EQ(test::read_file(outside / "target/keep.h"), "untouched");
  for (const fs::path& f :
       {root / (outside / "a.h").relative_path(), root / (outside / "k.cu").relative_path(),
        root / "etc/x.h", root / (outside / "target/keep.h").relative_path()}) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(f))) << f;
    EXPECT_FALSE(fs::is_symlink(fs::symlink_status(f.parent_path()))) << f;
  }
  EXPECT_EQ(test::read_file(root / "etc/x.h"), "x");
  EXPECT_EQ(test::read_file(root / (outside / "k.cu").relative_path()), "// kernel");
  // A job file given as a name (no folder) lands in the worker's folder whatever it says.
  sub.job_file = "../../../evil.json";
  EXPECT_EQ(write_out(root, sub), root / "submitted/evil.json");
  EXPECT_EQ(tree(outside), before);

  // Refused, and nothing written outside either.
  auto refused = [&](SubmittedJob s, const std::string& says) {
    try {
      write_out(root, s);
      ADD_FAILURE() << "written: " << (s.files.empty() ? s.job_file : s.files.back().path);
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(tree(outside), before);
  };
  SubmittedJob bad = sub;
  bad.files = {{std::string("/etc/x.h\0/../../../..", 21) + outside.string() + "/nul.h", "n"}};
  refused(bad, "'/etc/x.h");  // the message stops at the NUL byte
  bad.files = {{"/" + std::string(300, 'n'), "n"}};
  refused(bad, "cannot write");
  bad.files = {{"relative/x.h", "r"}};
  refused(bad, "not absolute");
  bad.files = {{"/", "r"}};
  refused(bad, "does not lie under");
  // The folder above the worker's is a link, someone else's, or writable by others: refused
  // before anything is written (another user could put a link where a file is about to go).
  fs::create_directory_symlink(outside / "target", worker / "link");
  SubmittedJob via_link = sub;
  try {
    write_out(worker / "link/root", via_link);
    ADD_FAILURE() << "written through a linked parent";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is a symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tree(outside), before);
  fs::create_directories(worker / "shared");
  fs::permissions(worker / "shared", fs::perms::all | fs::perms::sticky_bit);
  try {
    write_out(worker / "shared/root", sub);
    ADD_FAILURE() << "written under a folder others can write";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("writable by others"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(worker / "shared/root"));
  // A missing parent is made private.
  EXPECT_NO_THROW(write_out(worker / "new/root", sub));
  EXPECT_EQ(fs::status(worker / "new").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(tree(outside), before);
}

}  // namespace
}  // namespace gputune::tuner
