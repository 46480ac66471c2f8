// The header of tuned parameters (db/tuned_header.h): what an application compiles with, checked
// by running the C preprocessor over it with each choice of device and context.
#include "db/tuned_header.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "test_util.h"

namespace gputune::db {
namespace {

/// A database with two devices: an H200 with contexts 1M and 16M, an RTX A4000 with 1M only; three
/// configurations, k1 (tile 1), k2 (tile 2), k3 (tile 4), and an older version of the source.
struct TwoDevices {
  test::TempDir dir;
  Store store{(dir / "g.db").string()};
  std::int64_t run = 0;
  std::map<std::string, std::int64_t> contexts;  ///< "device/label" -> id

  std::int64_t context(std::int64_t kernel, const std::string& device, const std::string& label) {
    DeviceRecord d;
    d.name = device;
    d.cc_major = device == "NVIDIA H200" ? 9 : 8, d.sm_count = 100;
    ContextRecord c;
    c.kernel_id = kernel, c.device_id = store.upsert_device(d), c.label = label;
    c.problem_size_json = "[\"" + label + "\"]";  // contexts differ by their sizes
    c.arch = "sm_90", c.toolkit_version = "13.0";
    return contexts[device + "/" + label] = store.upsert_context(c);
  }
  void measure(std::int64_t kernel, std::int64_t context, int tile, double ms) {
    const std::string key = "128," + std::to_string(tile) + ",1";
    const std::string params = R"({"block_size_x": 128, "tile_size_x": )" + std::to_string(tile) +
                               R"(, "use_shared": true})";
    MeasurementRecord m;
    m.run_id = run, m.context_id = context,
    m.variant_id = store.upsert_variant(kernel, key, params);
    m.status = Status::kCorrect, m.time_ms = ms, m.samples_ms = {ms};
    store.offer_winner(context, store.add_measurement(m));
  }
  TwoDevices() {
    run = store.begin_run(store.upsert_job("vector_add", "v.json", "{}"), "brute_force", 9);
    const std::int64_t old = store.upsert_kernel("vector_add", "0ld0ld", "old source");
    measure(old, context(old, "NVIDIA H200", "4M"), 8, 0.5);
    const std::int64_t k = store.upsert_kernel("vector_add", "abc123", "source");
    const std::int64_t h1 = context(k, "NVIDIA H200", "1M"), h16 = context(k, "NVIDIA H200", "16M");
    const std::int64_t a1 = context(k, "NVIDIA RTX A4000", "1M");
    measure(k, h1, 1, 1.0), measure(k, h1, 2, 1.05), measure(k, h1, 4, 2.0);
    measure(k, h16, 1, 12), measure(k, h16, 2, 10), measure(k, h16, 4, 11);
    measure(k, a1, 4, 3.0), measure(k, a1, 1, 4.0);
  }
};

/// The parameters the header gives when compiled with `defines`; "" keys when it does not compile.
std::map<std::string, std::string> preprocess(const std::filesystem::path& header,
                                              const std::string& defines) {
  const auto src = header.parent_path() / "use.cpp";
  test::write_file(src, "#include \"" + header.filename().string() +
                            "\"\nRESULT block_size_x tile_size_x use_shared\n");
  auto r = test::run_command("c++ -E -P -Werror " + defines + " '" + src.string() + "'");
  std::smatch m;
  static const std::regex result(R"(RESULT (\S+) (\S+) (\S+))");
  if (r.exit_code != 0 || !std::regex_search(r.out, m, result)) {
    ADD_FAILURE() << defines << ": " << r.out;
    return {};
  }
  return {{"block_size_x", m[1]}, {"tile_size_x", m[2]}, {"use_shared", m[3]}};
}

TEST(TunedHeader, EachDeviceAndContextGetsItsWinnerAndDefaultsAreMeasuredChoices) {
  TwoDevices db;
  const std::string text = tuned_header(db.store, "vector_add", {"", "", "g.db", "2026-11-24"});
  const auto header = db.dir / "vector_add_tuned.h";
  test::write_file(header, text);
  auto tile = [&](const std::string& defines) {
    return preprocess(header, defines)["tile_size_x"];
  };
  // Each context's winner.
  EXPECT_EQ(tile("-DGPUTUNE_TARGET_NVIDIA_H200 -DGPUTUNE_CONTEXT_1M"), "1");
  EXPECT_EQ(tile("-DGPUTUNE_TARGET_NVIDIA_H200 -DGPUTUNE_CONTEXT_16M"), "2");
  EXPECT_EQ(tile("-DGPUTUNE_TARGET_NVIDIA_RTX_A4000 -DGPUTUNE_CONTEXT_1M"), "4");
  // A device alone, or with a context it was not tuned for: tile 2 is at most 5% slower than the
  // best in each H200 context (tile 1 is 20% slower at 16M, tile 4 twice as slow at 1M).
  EXPECT_EQ(tile("-DGPUTUNE_TARGET_NVIDIA_H200"), "2");
  EXPECT_EQ(tile("-DGPUTUNE_TARGET_NVIDIA_H200 -DGPUTUNE_CONTEXT_64M"), "2");
  EXPECT_NE(text.find("at most 5.0% slower than the fastest in each context (16M, 1M)"),
            std::string::npos)
      << text;
  // No device: tile 2 was never measured on the A4000; of the two measured everywhere, tile 1 is
  // at most 33% slower (4.0 vs 3.0 on the A4000), tile 4 twice as slow (H200, 1M).
  EXPECT_EQ(tile(""), "1");
  EXPECT_NE(text.find("at most 33.3% slower"), std::string::npos) << text;
  // Values as the tuner passes them: a bool as 1; a parameter already defined is kept.
  auto given = preprocess(header, "-DGPUTUNE_TARGET_NVIDIA_H200 -Dblock_size_x=999");
  EXPECT_EQ(given["block_size_x"], "999");
  EXPECT_EQ(given["tile_size_x"], "2");
  EXPECT_EQ(given["use_shared"], "1");
  // Only the newest version of the source; the older one's context is counted, not used.
  EXPECT_EQ(text.find("GPUTUNE_CONTEXT_4M"), std::string::npos) << text;
  EXPECT_NE(text.find("Left out: 1 context(s) of older versions"), std::string::npos) << text;
  EXPECT_NE(text.find("(source abc123)"), std::string::npos) << text;
}

TEST(TunedHeader, FiltersAndMissingWinnersAreSaid) {
  TwoDevices db;
  const std::string a4000 =
      tuned_header(db.store, "vector_add", {"", "NVIDIA RTX A4000", "g.db", ""});
  EXPECT_EQ(a4000.find("NVIDIA_H200"), std::string::npos) << a4000;
  const auto header = db.dir / "a4000.h";
  test::write_file(header, a4000);
  EXPECT_EQ(preprocess(header, "")["tile_size_x"], "4");  // the only device is the default
  try {
    tuned_header(db.store, "vector_add", {"256M", "", "g.db", ""});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no winner stored for kernel 'vector_add' in context "
                                         "'256M'; its contexts are: 4M (NVIDIA H200) 1M"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tuned_header(db.store, "matmul", {}), std::invalid_argument);
}

// Names from the database (a device, a context label) cannot end the header's comments early.
TEST(TunedHeader, NamesThatLookLikeCommentEndsStayInTheComments) {
  TwoDevices db;
  const std::int64_t k = db.store.upsert_kernel("vector_add", "abc123", "source");
  db.measure(k, db.context(k, "Evil */ GPU", "1*/2"), 8, 0.5);
  const auto header = db.dir / "evil.h";
  test::write_file(header, tuned_header(db.store, "vector_add", {"", "", "g.db", ""}));
  EXPECT_EQ(preprocess(header, "-DGPUTUNE_TARGET_Evil_GPU -DGPUTUNE_CONTEXT_1_2")["tile_size_x"],
            "8");
}

TEST(TunedHeader, MacroNamesAreIdentifiers) {
  EXPECT_EQ(macro_suffix("NVIDIA H100 80GB HBM3"), "NVIDIA_H100_80GB_HBM3");
  EXPECT_EQ(macro_suffix("NVIDIA GeForce RTX 2080 Ti"), "NVIDIA_GeForce_RTX_2080_Ti");
  EXPECT_EQ(macro_suffix("4096x4096"), "4096x4096");
  EXPECT_EQ(macro_suffix("  a--b  "), "a_b");
  EXPECT_EQ(macro_suffix("--"), "_");
}

// `gputune best KERNEL --header FILE`: the file is replaced whole or not at all.
TEST(TunedHeader, TheCommandWritesTheFileWholeOrNotAtAll) {
  TwoDevices db;
  const std::string dbfile = (db.dir / "g.db").string(), h = (db.dir / "tuned.h").string();
  test::write_file(h, "previous");
  auto none = test::run_gputune("best matmul --db '" + dbfile + "' --header '" + h + "'");
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_NE(none.out.find("no winner stored for kernel 'matmul'"), std::string::npos) << none.out;
  EXPECT_EQ(test::read_file(h), "previous");
  auto ok = test::run_gputune("best vector_add --db '" + dbfile + "' --header '" + h + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(test::read_file(h).find("#elif defined(GPUTUNE_TARGET_NVIDIA_RTX_A4000)"),
            std::string::npos);
  EXPECT_EQ(preprocess(h, "-DGPUTUNE_TARGET_NVIDIA_RTX_A4000")["tile_size_x"], "4");
  auto out = test::run_gputune("best vector_add --db '" + dbfile + "' --header -");
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.out, test::read_file(h));
  auto nowhere = test::run_gputune("best vector_add --db '" + dbfile + "' --header '" +
                                   (db.dir / "no" / "such" / "dir.h").string() + "'");
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.out.find("cannot write"), std::string::npos) << nowhere.out;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(db.dir.path()))
    files += e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_EQ(files, 0u);  // no temporary file left behind
}

}  // namespace
}  // namespace gputune::db
