#include "variants/instantiate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gputune {
namespace {

TEST(Instantiate, ParametersBecomeDefines) {
  Job job = load_job(test::examples_dir() / "matmul.json");
  Space s = build_space(job);
  Config c = s.config(0);
  auto opts = compile_options(job, c);
  // The kernel's folder (headers beside it), the job's options, then one -D per parameter.
  EXPECT_EQ(opts[0],
            "-I" + std::filesystem::absolute(test::examples_dir()).lexically_normal().string());
  EXPECT_EQ(opts[1], "-std=c++17");
  EXPECT_EQ(opts[2], "-Dblock_size_x=" + c.values[0].str());
  EXPECT_EQ(opts.size(), 2 + job.parameters.size());
  EXPECT_EQ(define_value(Value(true)), "1");
  EXPECT_EQ(define_value(Value(2.5)), "2.5");
}

TEST(Instantiate, CudaGlobalSizeIsTheGrid) {
  Job job = load_job(test::examples_dir() / "matmul.json");
  Space s = build_space(job);
  long i = s.find("32,8,2,4,32,1,4");
  ASSERT_GE(i, 0);
  LaunchGeometry g =
      launch_geometry(job, s.config(static_cast<size_t>(i)), job.contexts[0]);  // n = 1000
  EXPECT_EQ(g.block, (std::array<std::int64_t, 3>{32, 8, 1}));
  EXPECT_EQ(g.grid, (std::array<std::int64_t, 3>{16, 32, 1}));  // ceil(1000/64), ceil(1000/32)
  Variant v = instantiate(job, "src", s.config(static_cast<size_t>(i)), job.contexts[1]);
  ASSERT_TRUE(v.flops);
  EXPECT_DOUBLE_EQ(*v.flops, 2.0 * 4096.0 * 4096.0 * 4096.0);
  EXPECT_EQ(v.source, "src");
  // What a run keeps per configuration to launch it: all of it but the source.
  Variant launch = instantiate_launch(job, s.config(static_cast<size_t>(i)), job.contexts[1]);
  EXPECT_EQ(launch.source, "");
  EXPECT_EQ(launch.geometry.grid, v.geometry.grid);
  EXPECT_EQ(launch.geometry.block, v.geometry.block);
  EXPECT_EQ(launch.geometry.dynamic_smem, v.geometry.dynamic_smem);
  EXPECT_EQ(launch.flops, v.flops);
  EXPECT_EQ(launch.bytes, v.bytes);
  EXPECT_EQ(launch.options, v.options);
  EXPECT_EQ(launch.config.key(), v.config.key());
}

TEST(Instantiate, GridDivFollowsKernelTuner) {
  Job job = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  Space s = build_space(job);
  long i = s.find("4,64,1,3,2,1,1,0");
  ASSERT_GE(i, 0);
  LaunchGeometry g = launch_geometry(job, s.config(static_cast<size_t>(i)), job.contexts[0]);
  EXPECT_EQ(g.grid[0], (25000 + 12 - 1) / 12);
  EXPECT_EQ(g.grid[1], 2048 / 128);
  EXPECT_EQ(g.block[1], 64);
}

TEST(Instantiate, OpenClGlobalSizeCountsThreads) {
  nlohmann::json d = nlohmann::json::parse(R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64, 0]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1000"}, "GlobalSizeType": "OpenCL"}})");
  Job job = parse_job(d, "job.json");
  Space s = build_space(job);
  EXPECT_EQ(launch_geometry(job, s.config(0), job.contexts[0]).grid[0], 16);
  try {
    launch_geometry(job, s.config(1), job.contexts[0]);
    FAIL();
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "KernelSpecification.LocalSize.X");
  }
}

}  // namespace
}  // namespace gputune
