// `cmake --install --component select` gives a gputune package another project finds:
// configs/examples/app is configured against the installed prefix (find_package(gputune),
// gputune::select), built, and run on a decision file made here; its output names each choice
// (measured for the tuned sizes, predicted for 2048). With a GPU it launches too, and checks the
// result against the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "select/kernel.h"
#include "tables.h"
#include "test_util.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

TEST(SelectInstall, AnotherProjectFindsGputuneAndChoosesThroughIt) {
  const fs::path state = fs::path(GPUTUNE_TEST_STATE_DIR) / "select-install";
  fs::remove_all(state);
  const fs::path prefix = state / "prefix", build = state / "app-build";
  const std::string cmake = std::string("'") + GPUTUNE_CMAKE + "'";
  auto install = test::run_command(cmake + " --install '" + GPUTUNE_BUILD_DIR +
                                   "' --component select --prefix " + quoted(prefix));
  ASSERT_EQ(install.exit_code, 0) << install.out;
  EXPECT_TRUE(fs::exists(prefix / "lib" / "cmake" / "gputune" / "gputuneConfig.cmake"));
  EXPECT_TRUE(fs::exists(prefix / "include" / "select" / "kernel.h"));
  EXPECT_TRUE(fs::exists(prefix / "lib" / "libgputune_select.a"));

  // The table is made for this machine's GPU where there is one, so that its tuned sizes match.
  auto gpu = select::gpu_device();
  const select::Device device = gpu ? *gpu : select::Device{"NVIDIA H100 80GB HBM3", "sm_90"};
  const fs::path decisions = state / "matmul.decisions.json";
  test::write_file(decisions, select::to_json(test::matmul_table(device.name, device.arch)).dump());

  auto configure =
      test::run_command(cmake + " -S " + quoted(test::examples_dir() / "app") + " -B " +
                        quoted(build) + " -DCMAKE_PREFIX_PATH=" + quoted(prefix) +
                        " -DCUDAToolkit_ROOT='" GPUTUNE_CUDA_ROOT "' " + GPUTUNE_CONSUMER_ARGS);
  ASSERT_EQ(configure.exit_code, 0) << configure.out;
  auto built = test::run_command(cmake + " --build " + quoted(build) + " -j2");
  ASSERT_EQ(built.exit_code, 0) << built.out;
  // Linked statically: the application has no libclang, and needs no libcuda to start.
  auto needed = test::run_command("ldd " + quoted(build / "matmul_app"));
  EXPECT_EQ(needed.out.find("clang"), std::string::npos) << needed.out;
  EXPECT_EQ(needed.out.find("libcuda.so"), std::string::npos) << needed.out;

  auto run = test::run_command(quoted(build / "matmul_app") + " " + quoted(decisions));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("n=1000: matmul on .*: 16,16,1,1,16,0,1, "
                                                    "measured \\(context 1000\\)")))
      << run.out;
  EXPECT_TRUE(
      std::regex_search(run.out, std::regex("n=2048: matmul on .*: 32,8,2,2,16,1,4, "
                                            "predicted: .*nearest tuned context \\(4096\\)")))
      << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("n=4096: .*32,8,2,2,16,1,4, measured")))
      << run.out;
  if (gpu)
    EXPECT_NE(run.out.find("n=2048: launched 32,8,2,2,16,1,4: C["), std::string::npos) << run.out;
  else
    EXPECT_NE(run.out.find("n=2048: skipped the launch (no GPU)"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace gputune
