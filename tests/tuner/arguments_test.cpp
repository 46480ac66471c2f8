#include "tuner/measure/arguments.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gputune::tuner {
namespace {

TEST(Arguments, ElementTypes) {
  EXPECT_EQ(parse_element_type("float").bytes(), 4);
  EXPECT_EQ(parse_element_type("float4").bytes(), 16);
  EXPECT_EQ(parse_element_type("double2").components, 2);
  EXPECT_EQ(parse_element_type("half").bytes(), 2);
  EXPECT_EQ(parse_element_type("uint64").kind, ScalarKind::U64);
  EXPECT_THROW(parse_element_type("quad"), std::invalid_argument);
}

TEST(Arguments, SizedAndFilledFromTheJob) {
  Job job = load_job(test::examples_dir() / "convolution.json");
  auto args = make_arguments(job, job.contexts[0]);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_TRUE(args[0].output);
  EXPECT_EQ(args[0].elements, 4096u * 4096u);
  EXPECT_EQ(args[1].elements, 4102u * 4102u);  // max(filter_width) over the parameter's values
  EXPECT_EQ(args[2].elements, 49u);
  // Random fill is in [0, FillValue) and reproducible.
  double lo = 1e9, hi = -1e9;
  for (std::uint64_t i = 0; i < 49; ++i) {
    double v = read_scalar(args[2].type, args[2].data.data(), i);
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_GT(hi - lo, 0.1);
  auto again = make_arguments(job, job.contexts[0]);
  EXPECT_EQ(again[2].data, args[2].data);
  // Scalars hold their value.
  EXPECT_FALSE(args[3].is_vector);
  std::int32_t w;
  std::memcpy(&w, args[3].data.data(), 4);
  EXPECT_EQ(w, 4096);
}

// Arguments that together need more memory than the machine has available are refused before
// any is allocated, naming the largest (each alone fits: the old per-argument check let Linux
// overcommit them and the process was killed while filling the second). Sizes only: no limit.
// A scalar whose value does not fit its type is bad input, named by its field: vector_add's
// int32 n at a problem size of 3 x 10^9 (the checking build's UBSan reported the conversion).
TEST(Arguments, AScalarThatDoesNotFitItsTypeIsRefused) {
  Job job = load_job(test::examples_dir() / "vector_add.json");
  ContextSpec big = job.contexts[0];
  big.name = "3G";
  big.problem_size = List{Value(std::int64_t{3'000'000'000})};
  try {
    make_arguments(job, big, ArgumentContents::SizesOnly);
    FAIL() << "an int32 took 3000000000";
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "KernelSpecification.Arguments[3] (n).FillValue") << e.what();
    EXPECT_NE(e.problem.find("3000000000"), std::string::npos) << e.problem;
    EXPECT_NE(e.problem.find("does not fit in its Type int32"), std::string::npos) << e.problem;
  }
  job.arguments.back().type = "int64";
  EXPECT_NO_THROW(make_arguments(job, big, ArgumentContents::SizesOnly));
}

TEST(Arguments, ArgumentsThatDoNotFitTogetherAreRefusedBeforeAnyIsAllocated) {
  const std::uint64_t available = available_memory_bytes();
  ASSERT_GT(available, 0u) << "/proc/meminfo has no MemAvailable";
  Job job = load_job(test::examples_dir() / "vector_add.json");
  const std::uint64_t n = available / 4 / 2 + 1;  // floats: three arrays of half of it each
  job.arguments.back().type = "int64";  // n: an int32 cannot hold it (ScalarsThatDoNotFit...)
  ContextSpec big = job.contexts[0];
  big.name = "big";
  big.problem_size = List{Value(static_cast<std::int64_t>(n))};
  try {
    make_arguments(job, big);
    FAIL() << "three arrays of " << n << " floats fitted in " << available << " bytes";
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "KernelSpecification.Arguments");
    EXPECT_EQ(e.problem.rfind("the arguments need " + std::to_string(3 * 4 * n) +
                                  " bytes in context big (the largest, Arguments[0] (c), " +
                                  std::to_string(4 * n) + "), more than the ",
                              0),
              0u)
        << e.problem;
  }
  const auto sizes = make_arguments(job, big, ArgumentContents::SizesOnly);
  EXPECT_EQ(sizes[1].elements, n);
}

// What the model reads (sizes, scalar values, and the contents of small read-only vectors:
// convolution's filter) without filling the vectors it never reads (its image and output).
TEST(Arguments, SizesOnlyHasTheSizesAndScalarsOfTheFilledArguments) {
  Job job = load_job(test::examples_dir() / "convolution.json");
  auto filled = make_arguments(job, job.contexts[0]);
  auto sizes = make_arguments(job, job.contexts[0], ArgumentContents::SizesOnly);
  ASSERT_EQ(sizes.size(), filled.size());
  size_t scalars = 0, read = 0, unread = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i].name, filled[i].name);
    EXPECT_EQ(sizes[i].elements, filled[i].elements) << sizes[i].name;
    EXPECT_EQ(sizes[i].type.bytes(), filled[i].type.bytes()) << sizes[i].name;
    EXPECT_EQ(sizes[i].is_vector, filled[i].is_vector);
    EXPECT_EQ(sizes[i].output, filled[i].output);
    if (sizes[i].is_vector && !model_reads_contents(sizes[i])) {
      ++unread;
      EXPECT_TRUE(sizes[i].data.empty()) << sizes[i].name;
      EXPECT_FALSE(filled[i].data.empty()) << sizes[i].name;
    } else {
      ++(sizes[i].is_vector ? read : scalars);
      EXPECT_FALSE(sizes[i].data.empty()) << sizes[i].name;
      EXPECT_EQ(sizes[i].data, filled[i].data) << sizes[i].name;  // the same values the GPU gets
    }
  }
  EXPECT_GT(scalars, 0u);
  EXPECT_EQ(read, 1u);    // the filter
  EXPECT_EQ(unread, 2u);  // the image and the output
}

// Index arrays (32- and 64-bit integers) set the addresses and trip counts of sparse and
// indirect kernels at the sizes they are tuned for, so the model reads up to 64 MiB of them;
// other read-only data (floats, bytes, 16-bit integers) up to 1 MiB; what the kernel writes
// never.
TEST(Arguments, TheModelReadsIndexArraysUpTo64MiBAndOtherReadOnlyDataUpTo1MiB) {
  auto arg = [](const std::string& type, std::uint64_t bytes) {
    HostArgument a;
    a.name = "a";
    a.type = parse_element_type(type);
    a.elements = bytes / static_cast<std::uint64_t>(a.type.bytes());
    return a;
  };
  const std::uint64_t MiB = std::uint64_t{1} << 20;
  for (const char* index : {"int32", "uint32", "int64", "uint64"}) {
    EXPECT_TRUE(model_reads_contents(arg(index, 64 * MiB))) << index;
    EXPECT_FALSE(model_reads_contents(arg(index, 64 * MiB + 8))) << index;
    HostArgument written = arg(index, 4 * MiB);
    written.written = true;
    EXPECT_FALSE(model_reads_contents(written)) << index;
  }
  for (const char* data : {"float", "double", "half", "uint8", "int16", "float4"}) {
    EXPECT_TRUE(model_reads_contents(arg(data, MiB))) << data;
    EXPECT_FALSE(model_reads_contents(arg(data, 2 * MiB))) << data;
  }
  HostArgument scalar = arg("int32", 4);
  scalar.is_vector = false;
  EXPECT_FALSE(model_reads_contents(scalar));
}

TEST(Arguments, CompareWithTolerance) {
  HostArgument a;
  a.name = "out";
  a.type = parse_element_type("float");
  a.elements = 4;
  auto bytes = [](std::vector<float> v) {
    std::vector<unsigned char> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  auto exp = bytes({1, 2, 3, 4});
  EXPECT_TRUE(compare_output(a, bytes({1, 2, 3, 4}), exp, 0, 0).ok);
  EXPECT_TRUE(compare_output(a, bytes({1, 2, 3.0001f, 4}), exp, 0, 1e-4).ok);
  auto bad = compare_output(a, bytes({1, 2, 3.1f, 5}), exp, 1e-3, 1e-4);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.mismatches, 2u);
  EXPECT_EQ(bad.first_bad, 2u);
  EXPECT_NEAR(bad.max_abs_error, 1.0, 1e-6);
  EXPECT_NE(bad.describe("out").find("index 2"), std::string::npos);
  EXPECT_FALSE(compare_output(a, bytes({1, 2, NAN, 4}), exp, 1, 1).ok);
  a.threshold = 0.5;
  EXPECT_TRUE(compare_output(a, bytes({1.4f, 2, 3, 4}), exp, 0, 0).ok);
}

TEST(Arguments, ReferenceArgumentsAndRawFiles) {
  test::TempDir dir;
  std::vector<float> raw = {1, 2, 3, 4};
  test::write_file(dir / "in.bin", std::string(reinterpret_cast<const char*>(raw.data()), 16));
  test::write_file(dir / "k.cu", "");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "b", "Type": "int", "Values": "[1]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "1"}, "GlobalSize": {"X": "1"},
      "Arguments": [{"Name": "x", "Type": "float", "MemoryType": "Vector", "Size": 4, "FillType": "BinaryRaw", "DataSource": "in.bin"},
                    {"Name": "y", "Type": "float", "MemoryType": "Vector", "Size": 4, "FillType": "Constant", "FillValue": 0}],
      "ReferenceArguments": [{"Name": "ref", "TargetName": "y", "FillType": "Constant", "FillValue": 7.5,
                              "ValidationMethod": "AbsoluteDifference", "ValidationThreshold": 0.1}]}})");
  Job job = load_job(dir / "job.json");
  auto args = make_arguments(job, job.contexts[0]);
  EXPECT_EQ(read_scalar(args[0].type, args[0].data.data(), 3), 4.0);
  EXPECT_TRUE(args[1].output);
  EXPECT_EQ(read_scalar(args[1].type, args[1].reference.data(), 2), 7.5);
  EXPECT_EQ(*args[1].threshold, 0.1);
  // Sized only (the run's checks before compiling, the model): the file is checked, not read.
  auto sized = make_arguments(job, job.contexts[0], ArgumentContents::SizesOnly);
  EXPECT_EQ(sized[0].elements, 4u);
  EXPECT_TRUE(sized[0].data.empty());
  // A raw file of the wrong size names the field and both sizes, whether filling or sizing.
  test::write_file(dir / "in.bin", "12345");
  for (ArgumentContents contents : {ArgumentContents::Filled, ArgumentContents::SizesOnly}) {
    try {
      make_arguments(job, job.contexts[0], contents);
      FAIL();
    } catch (const JobError& e) {
      EXPECT_NE(e.field.find("DataSource"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("5 bytes"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(dir / "in.bin");
  try {
    make_arguments(job, job.contexts[0], ArgumentContents::SizesOnly);
    FAIL();
  } catch (const JobError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read"), std::string::npos) << e.what();
  }
}

// Size x element bytes is checked before it is multiplied: 2**62 float4s used to wrap around to a
// 0-byte buffer and pass the 1 TiB limit.
TEST(Arguments, ASizeBeyondOneTebibyteIsABadSizeNotAWrapAround) {
  auto path = test::examples_dir() / "vector_add.json";
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  for (auto [size, type] :
       {std::pair{"2**62", "float4"}, {"2**60", "float"}, {"2**38 + 1", "float"}}) {
    auto& arg = doc["KernelSpecification"]["Arguments"][0];
    arg["Size"] = size, arg["Type"] = type;
    Job job = parse_job(doc, path);
    for (auto contents : {ArgumentContents::Filled, ArgumentContents::SizesOnly}) {
      try {
        make_arguments(job, job.contexts[0], contents);
        ADD_FAILURE() << size << " " << type << " accepted";
      } catch (const JobError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("vector_add.json"), std::string::npos) << m;
        EXPECT_NE(m.find(".Size"), std::string::npos) << m;
        EXPECT_NE(m.find("more than 1 TiB"), std::string::npos) << m;
      }
    }
  }
}

// The job's arguments against the parameter sizes a cubin lists (matmul: C, A, B, n).
TEST(Arguments, ParameterSizesFromTheCubinMustMatchTheArguments) {
  Job job = load_job(test::examples_dir() / "matmul.json");
  EXPECT_NO_THROW(check_parameter_sizes(job, {8, 8, 8, 4}, "x"));
  auto error_of = [&](const std::vector<int>& sizes) {
    try {
      check_parameter_sizes(job, sizes, "16,16,1,1,16,0,1");
    } catch (const JobError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string fewer = error_of({8, 8, 8});
  EXPECT_NE(fewer.find("field 'KernelSpecification.Arguments': the job lists 4 arguments, kernel "
                       "'matmul' takes 3 (the cubin of configuration 16,16,1,1,16,0,1)"),
            std::string::npos)
      << fewer;
  const std::string wider = error_of({8, 8, 8, 8});
  EXPECT_NE(wider.find("field 'KernelSpecification.Arguments[3] (n)': a Scalar int32 is 4 bytes, "
                       "but parameter 3 of kernel 'matmul' is 8 bytes"),
            std::string::npos)
      << wider;
  const std::string value = error_of({4, 8, 8, 4});
  EXPECT_NE(value.find("field 'KernelSpecification.Arguments[0] (C)': a Vector is passed as an "
                       "8-byte device pointer, but parameter 0 of kernel 'matmul' is 4 bytes"),
            std::string::npos)
      << value;
  EXPECT_NE(value.find("matmul.json"), std::string::npos);
}

}  // namespace
}  // namespace gputune::tuner
