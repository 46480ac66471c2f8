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

// `cpack -G DEB` builds a Debian package a user installs: unpacked into a scratch root (dpkg -x,
// no root rights, no container), its gputune starts and says its version, its examples and
// device files are there, and the example application builds against its gputune::select and
// chooses as above.
TEST(SelectInstall, TheDebianPackageInstallsTheBinaryTheFilesAndTheLibrary) {
  const fs::path state = fs::path(GPUTUNE_TEST_STATE_DIR) / "deb";
  fs::remove_all(state);
  const fs::path out = state / "out", root = state / "root", build = state / "app-build";
  auto pack = test::run_command(std::string("cd '") + GPUTUNE_BUILD_DIR + "' && '" + GPUTUNE_CPACK +
                                "' -G DEB -B " + quoted(out) + " 2>&1");
  ASSERT_EQ(pack.exit_code, 0) << pack.out;
  fs::path deb;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << pack.out;
  auto info = test::run_command("dpkg-deb --info " + quoted(deb));
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("Package: gputune"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("Depends: libsqlite3-0"), std::string::npos) << info.out;
  auto unpack = test::run_command("dpkg -x " + quoted(deb) + " " + quoted(root));
  ASSERT_EQ(unpack.exit_code, 0) << unpack.out;

  const fs::path usr = root / "usr";
  auto version = test::run_command(quoted(usr / "bin" / "gputune") + " --version");
  EXPECT_EQ(version.exit_code, 0) << version.out;
  EXPECT_EQ(version.out.rfind("gputune ", 0), 0u) << version.out;
  EXPECT_TRUE(fs::exists(usr / "share" / "gputune" / "devices" / "h100-sxm.json"));
  EXPECT_TRUE(fs::exists(usr / "share" / "gputune" / "examples" / "matmul.json"));
  EXPECT_TRUE(fs::exists(usr / "share" / "gputune" / "community" / "benchmark-hub.suite.json"));
  // The installed binary reads the installed job and device files: a prune for a GPU not here.
  auto prune =
      test::run_command("env -u GPUTUNE_DEVICES_DIR " + quoted(usr / "bin" / "gputune") +
                        " prune " + quoted(usr / "share/gputune/examples/vector_add.json") +
                        " --device h100-sxm --no-store --cache-dir - 2>&1");
  EXPECT_EQ(prune.exit_code, 0) << prune.out;

  // The installed example application, built against the package's gputune::select.
  const select::Device device{"NVIDIA H100 80GB HBM3", "sm_90"};
  const fs::path decisions = state / "matmul.decisions.json";
  test::write_file(decisions, select::to_json(test::matmul_table(device.name, device.arch)).dump());
  const std::string cmake = std::string("'") + GPUTUNE_CMAKE + "'";
  auto configure =
      test::run_command(cmake + " -S " + quoted(usr / "share/gputune/examples/app") + " -B " +
                        quoted(build) + " -DCMAKE_PREFIX_PATH=" + quoted(usr) +
                        " -DCUDAToolkit_ROOT='" GPUTUNE_CUDA_ROOT "' " + GPUTUNE_CONSUMER_ARGS);
  ASSERT_EQ(configure.exit_code, 0) << configure.out;
  auto built = test::run_command(cmake + " --build " + quoted(build) + " -j2");
  ASSERT_EQ(built.exit_code, 0) << built.out;
  auto run = test::run_command(quoted(build / "matmul_app") + " " + quoted(decisions));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("n=1000: matmul on .*: 16,16,1,1,16,0,1, "
                                                    "measured \\(context 1000\\)")))
      << run.out;
}

}  // namespace
}  // namespace gputune
