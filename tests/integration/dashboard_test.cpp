// The dashboard in a real headless Chromium (Debian chromium + chromium-driver, driven over
// WebDriver): pages load with data from a test database, tables sort, a submitted job appears,
// strings from the database stay text, numbers read in their units, and each page visited is
// saved as a screenshot: $GPUTUNE_SCREENSHOT_DIR/*.png when set, else build/screenshots/*.png.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <regex>

#include "daemon_util.h"
#include "webdriver.h"

namespace gputune {
namespace {

using nlohmann::json;

class Dashboard : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    db_ = (*dir_ / "g.db").string();
    // A tuned run on the fake driver, a large imported run, and a kernel name made to look like
    // HTML.
    auto r = test::run_command(std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR + "' '" +
                               GPUTUNE_BINARY + "' run '" +
                               (test::examples_dir() / "vector_add.json").string() + "' -q --db '" +
                               db_ + "' --cache-dir '" + (*dir_ / "cache").string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = test::run_gputune(
        "import '" +
        (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string() +
        "' --db '" + db_ + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    test::write_file(*dir_ / "evil.json",
                     json({{"kernel_name", "<img src=x id=pwned onerror=alert(1)>"},
                           {"device_name", "<b id=bold>GPU</b>"},
                           {"tune_params_keys", {"a"}},
                           {"cache", {{"1", {{"a", "<script>x</script>"}, {"time", 1.5}}}}}})
                         .dump());
    r = test::run_gputune("import '" + (*dir_ / "evil.json").string() + "' --db '" + db_ + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // Run 4: a model_guided run whose model searched the space (24 configurations, 10 analysed).
    auto job = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
    job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
    job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}, {"ModelAnalyses", 10}};
    test::write_file(*dir_ / "searched.json", job.dump());
    r = test::run_command(std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR + "' '" +
                          GPUTUNE_BINARY + "' run '" + (*dir_ / "searched.json").string() +
                          "' -q --db '" + db_ + "' --cache-dir '" + (*dir_ / "cache").string() +
                          "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    if (auto why = test::browser_missing(); !why.empty()) GTEST_SKIP() << why;
  }

  /// Where the screenshots go: $GPUTUNE_SCREENSHOT_DIR, else the build's screenshots/ folder.
  static std::filesystem::path shot_dir() {
    const char* env = std::getenv("GPUTUNE_SCREENSHOT_DIR");
    return env && *env ? std::filesystem::path(env) : std::filesystem::path(GPUTUNE_SCREENSHOT_DIR);
  }
  /// Saves the page in the browser as `name`.png and checks that it is a picture of a page: a
  /// PNG of the window's width, of some KB (a blank page compresses to about 1).
  static void snap(test::WebDriver& wd, const std::string& name) {
    const std::filesystem::path file = shot_dir() / (name + ".png");
    std::filesystem::remove(file);
    wd.screenshot(file);
    const std::string png = test::read_file(file);
    ASSERT_GE(png.size(), 24u) << file;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << file;
    EXPECT_EQ(png.substr(12, 4), "IHDR") << file;
    auto be32 = [&](size_t at) {
      std::uint32_t v = 0;
      for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(png[at + i]);
      return v;
    };
    EXPECT_GE(be32(16), 1000u) << file << ": width";
    EXPECT_GE(be32(20), 500u) << file << ": height";
    EXPECT_GT(png.size(), 8000u) << file;
  }
  /// A time as the dashboard writes it ("5.591 ms", "512.0 µs", "1.500 s"), in ms.
  static double ms_of(std::string text) {
    text.erase(std::remove(text.begin(), text.end(), ','), text.end());
    size_t end = 0;
    const double v = std::stod(text, &end);
    const std::string unit = text.substr(end);
    if (unit == " s") return v * 1e3;
    if (unit == " ms") return v;
    if (unit == " \u00b5s") return v * 1e-3;
    if (unit == " ns") return v * 1e-6;
    ADD_FAILURE() << "not a time: '" << text << "'";
    return v;
  }

  static test::TempDir* dir_;
  static std::string db_;
};
test::TempDir* Dashboard::dir_ = nullptr;
std::string Dashboard::db_;

TEST_F(Dashboard, EveryPageLoadsSortsAndShowsSubmittedJobs) {
  test::Daemon d(db_, {"--no-gpu"});
  ASSERT_FALSE(d.url().empty()) << d.output();
  test::WebDriver wd;

  // Overview.
  wd.go(d.url() + "/");
  ASSERT_TRUE(wd.wait_loaded()) << wd.script("return document.body.innerText;");
  EXPECT_NE(wd.text("#winners").find("vector_add"), std::string::npos);
  EXPECT_NE(wd.text("#devices").find("Fake GPU (gputune test driver)"), std::string::npos);
  // Strings from the database are text, never markup.
  EXPECT_NE(wd.text("#kernels").find("<img src=x id=pwned onerror=alert(1)>"), std::string::npos);
  EXPECT_TRUE(wd.script("return document.getElementById('pwned') === null && "
                        "document.getElementById('bold') === null;")
                  .get<bool>());
  // Sorting: the runs table by run id, ascending then descending.
  wd.click("#runs th:nth-child(1)");
  EXPECT_EQ(wd.text("#runs tbody tr:first-child td:first-child"), "#1");
  wd.click("#runs th:nth-child(1)");
  EXPECT_EQ(wd.text("#runs tbody tr:first-child td:first-child"), "#4");
  snap(wd, "overview");

  // A submitted job appears in the queue.
  auto r = test::run_gputune("submit '" + (test::examples_dir() / "vector_add.json").string() +
                             "' --server " + d.url() + " --token " + d.token());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  wd.go(d.url() + "/");
  ASSERT_TRUE(wd.wait_loaded());
  std::string queue = wd.text("#queue");
  EXPECT_NE(queue.find("vector_add"), std::string::npos) << queue;
  EXPECT_NE(queue.find("queued"), std::string::npos) << queue;
  snap(wd, "overview-queued");

  // Kernel page: contexts x devices with winner and speedup over the default configuration.
  wd.go(d.url() + "/kernel.html?id=1");
  ASSERT_TRUE(wd.wait_loaded());
  std::string contexts = wd.text("#contexts");
  EXPECT_NE(contexts.find("block_size_x=128"), std::string::npos) << contexts;
  EXPECT_NE(contexts.find("x"), std::string::npos);
  EXPECT_NE(wd.text("#contexts tbody tr:first-child td:nth-child(6)").find('x'), std::string::npos)
      << "speedup";
  // The winners as a header, linked from the page: what the application compiles with.
  const std::string href = wd.script(
                                 "return document.getElementById('header-link')."
                                 "getAttribute('href');")
                               .get<std::string>();
  EXPECT_EQ(href, "/api/kernels/1/header");
  httplib::Client api(d.url());
  auto header = api.Get(href.c_str());
  ASSERT_TRUE(header);
  EXPECT_EQ(header->status, 200);
  EXPECT_EQ(header->get_header_value("Content-Disposition"),
            "attachment; filename=\"vector_add_tuned.h\"");
  EXPECT_EQ(header->body.rfind("/* Tuned parameters of the kernel 'vector_add'", 0), 0u)
      << header->body;
  EXPECT_NE(header->body.find("#if defined(GPUTUNE_TARGET_Fake_GPU_gputune_test_driver) && "
                              "defined(GPUTUNE_CONTEXT_16M)"),
            std::string::npos)
      << header->body;
  EXPECT_EQ(api.Get("/api/kernels/999/header")->status, 404);
  auto cached = api.Get(href.c_str());  // from the server's cache: the same file, the same name
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->get_header_value("Content-Disposition"),
            header->get_header_value("Content-Disposition"));
  EXPECT_EQ(cached->get_header_value("Content-Type"), header->get_header_value("Content-Type"));
  EXPECT_EQ(cached->body, header->body);
  snap(wd, "kernel");

  // Run page: a large run, paged and sorted by the server.
  wd.go(d.url() + "/run.html?id=2");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_EQ(wd.text("#page-info"), "1-50 of 11130");
  double fastest = ms_of(wd.text("#variants tbody tr:first-child td:nth-child(3)"));
  wd.click("#variants th[data-sort=time_ms]");  // now descending
  for (int i = 0;
       i < 50 &&
       wd.script("return document.querySelector('#variants th.sorted-desc') !== null;") != true;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double slowest = ms_of(wd.text("#variants tbody tr:first-child td:nth-child(3)"));
  EXPECT_GT(slowest, fastest);
  wd.click("#next");
  for (int i = 0; i < 50 && wd.text("#page-info") != "51-100 of 11130"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(wd.text("#page-info"), "51-100 of 11130");
  // The charts load on their own (up to 30 s: the checking build renders them slower).
  const char* charts_drawn =
      "return [...document.querySelectorAll('.charts img')].every(i => "
      "i.complete && i.naturalWidth > 0);";
  for (int i = 0; i < 600 && wd.script(charts_drawn) != true; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(wd.script(charts_drawn).get<bool>());
  // Eight parameters per configuration wrap in their cell: the page does not scroll sideways.
  EXPECT_NE(wd.text("#variants tbody tr:first-child").find("block_size_x="), std::string::npos);
  EXPECT_TRUE(wd.script("return document.documentElement.scrollWidth <= "
                        "document.documentElement.clientWidth;")
                  .get<bool>())
      << wd.script("return document.documentElement.scrollWidth;").dump();
  snap(wd, "run");
  wd.go(d.url() + "/run.html?id=1");
  ASSERT_TRUE(wd.wait_loaded());
  snap(wd, "run-vector_add");
  EXPECT_FALSE(wd.script("return document.getElementById('model-search') !== null;").get<bool>())
      << "run 1 searched nothing";
  // Each context's results as a T4 file: the run's two contexts, one link each.
  EXPECT_EQ(wd.text("#t4-links"), "T4 results: 1M, 16M");
  const auto t4_hrefs = wd.script(
      "return [...document.querySelectorAll('#t4-links a')].map(a => a.getAttribute('href'));");
  ASSERT_EQ(t4_hrefs.size(), 2u) << t4_hrefs.dump();
  EXPECT_EQ(t4_hrefs[1], "/api/runs/1/t4?context=16M");
  auto t4 = api.Get(t4_hrefs[1].get<std::string>().c_str());
  ASSERT_TRUE(t4);
  EXPECT_EQ(t4->status, 200);
  EXPECT_EQ(t4->get_header_value("Content-Disposition"),
            "attachment; filename=\"run1-16M.t4.json\"");
  const auto t4_doc = json::parse(t4->body);
  EXPECT_EQ(t4_doc["metadata"]["gputune"]["context"], "16M");
  EXPECT_EQ(t4_doc["results"].size(), 27u);
  // Both contexts in one file would mix them: refused, naming the options.
  auto mixed = api.Get("/api/runs/1/t4");
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->status, 400);
  EXPECT_NE(
      json::parse(mixed->body)["error"].get<std::string>().find("run 1 measured 2 tuning problems"),
      std::string::npos)
      << mixed->body;
  EXPECT_EQ(api.Get("/api/runs/999/t4")->status, 404);
  // A run whose model searched its space says what it planned.
  wd.go(d.url() + "/run.html?id=4");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_EQ(wd.text("#model-search")
                .rfind("plan: the space holds 24 configurations, more than the 10 the model "
                       "analyses",
                       0),
            0u)
      << wd.text("#model-search");
  snap(wd, "run-model_guided");

  // History of a context.
  wd.go(d.url() + "/history.html?context=1");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_NE(wd.text("#history").find("#1"), std::string::npos);
  snap(wd, "history");

  // A bad id shows an error, not a blank page.
  wd.go(d.url() + "/run.html?id=999");
  EXPECT_FALSE(wd.wait_loaded(5));
  EXPECT_NE(wd.text("#error").find("no such run"), std::string::npos);
  snap(wd, "run-missing");
}

// A naive kernel's winner is generated code: its kernel page shows the command that writes its
// source. One outside the generator's subset was tuned as written: its run and kernel page say
// why, and offer no such command.
TEST_F(Dashboard, ANaiveKernelsPageShowsHowToHaveItsWinnersSource) {
  test::TempDir dir;
  const std::string db = (dir / "n.db").string();
  auto run = [&](const std::string& sub, const std::string& source) {
    std::filesystem::create_directories(dir / sub);
    test::write_naive_add_job(dir / sub, source);
    auto r = test::run_command(std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR + "' '" +
                               GPUTUNE_BINARY + "' run '" + (dir / sub / "add.json").string() +
                               "' -q --strategy random --budget 3 --db '" + db + "' --cache-dir '" +
                               (dir / "cache").string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
  };
  run("generated", R"(
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
})");
  run("as_written", test::kNaiveAddOutsideTheSubset);
  test::Daemon d(db, {"--no-gpu"});
  ASSERT_FALSE(d.url().empty()) << d.output();
  test::WebDriver wd;
  wd.go(d.url() + "/kernel.html?id=1");
  ASSERT_TRUE(wd.wait_loaded());
  const std::string generated = wd.text("#winner-sources");
  EXPECT_NE(generated.find("its winners are generated variants"), std::string::npos) << generated;
  EXPECT_NE(generated.find("1M on Fake GPU (gputune test driver): gputune generate " +
                           (dir / "generated" / "add.cu").string() + " --kernel vector_add --job " +
                           (dir / "generated" / "add.json").string() + " --config "),
            std::string::npos)
      << generated;
  snap(wd, "kernel-naive");
  wd.go(d.url() + "/kernel.html?id=2");
  ASSERT_TRUE(wd.wait_loaded());
  const std::string as_written = wd.text("#winner-sources");
  EXPECT_NE(as_written.find("the naive kernel as written, launched at the winner's block shape "
                            "(tuned over block shape only: add.cu:4: local array 't'"),
            std::string::npos)
      << as_written;
  EXPECT_EQ(as_written.find("gputune generate"), std::string::npos) << as_written;
  snap(wd, "kernel-as_written");
  wd.go(d.url() + "/run.html?id=2");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_EQ(wd.text("#naive-fallback").rfind("block shape only: add.cu:4: local array 't'", 0), 0u)
      << wd.text("#naive-fallback");
  // The job's notes, kept with the run (schema 13), are listed under it.
  EXPECT_NE(wd.text("#run-notes").find("note: add.cu:4: local array 't'"), std::string::npos)
      << wd.text("#run-notes");
  snap(wd, "run-naive-fallback");
  wd.go(d.url() + "/run.html?id=1");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_FALSE(wd.script("return document.getElementById('naive-fallback') !== null;").get<bool>());
  EXPECT_FALSE(wd.script("return document.getElementById('run-notes') !== null;").get<bool>());
  snap(wd, "run-naive-generated");
}

// The dashboard read as a user, on a real run: the H100 matmul of 2026-11-26
// (tests/data/h100-2026-11-26, from shared/data: 609 configurations measured, default 85.46 ms,
// best 5.591 ms at 24,582 GFLOP/s). Numbers carry their units in a readable prefix ("24.6 TFLOP/s",
// never "2.458e+4"), numeric columns align right in tabular figures, and the best-so-far chart's
// time axis is logarithmic: its labels run from below the best to above the default.
TEST_F(Dashboard, ARealRunReadsInUnitsWithItsBestOnALogAxis) {
  const auto source = test::source_dir() / "tests/data/h100-2026-11-26/matmul_4096_r7.db";
  ASSERT_TRUE(std::filesystem::exists(source)) << source;
  test::TempDir dir;
  std::filesystem::copy_file(source, dir / "h100.db");  // the daemon writes to its database
  test::Daemon d((dir / "h100.db").string(), {"--no-gpu"});
  ASSERT_FALSE(d.url().empty()) << d.output();
  test::WebDriver wd;
  // Every number on a page is free of exponents; every numeric cell and its header align right
  // in tabular figures.
  auto check_numbers = [&](const std::string& page) {
    const std::string text = wd.script("return document.body.innerText;").get<std::string>();
    static const std::regex exponent("[0-9]e[-+][0-9]");  // 2.458e+4, 1e-05
    EXPECT_FALSE(std::regex_search(text, exponent)) << page << ":\n" << text;
    const json cells = wd.script(
        "return [...document.querySelectorAll('td.num, th.num')].filter(e => {"
        "  const s = getComputedStyle(e);"
        "  return s.textAlign !== 'right' || s.fontVariantNumeric !== 'tabular-nums';"
        "}).map(e => e.tagName + ' ' + e.textContent);");
    EXPECT_TRUE(cells.empty()) << page << ": " << cells.dump();
  };

  wd.go(d.url() + "/run.html?id=1");
  ASSERT_TRUE(wd.wait_loaded()) << wd.script("return document.body.innerText;");
  EXPECT_EQ(wd.text("#best-times"), "best: 4096 5.591 ms");
  // The fastest configuration (the table sorts by time): 5.591 ms, 24,582.6 GFLOP/s, 36.01 GB/s.
  auto cell = [&](int column) {
    return wd.text("#variants tbody tr:first-child td:nth-child(" + std::to_string(column) + ")");
  };
  EXPECT_EQ(cell(3), "5.591 ms");
  EXPECT_EQ(cell(4), "24.6 TFLOP/s");
  EXPECT_EQ(cell(5), "36.0 GB/s");
  EXPECT_EQ(cell(6), "54");
  EXPECT_EQ(cell(7), "50%");
  EXPECT_EQ(wd.text("#variants th[data-sort=time_ms]"), "time");
  check_numbers("run");
  EXPECT_TRUE(wd.script("return [...document.querySelectorAll('.charts img')].every(i => "
                        "i.complete && i.naturalWidth > 0);")
                  .get<bool>());
  snap(wd, "h100-run");
  // The best-so-far chart (an SVG drawn by the server): 5, 10, 20, 50, 100 ms, equally far apart
  // for equal ratios.
  httplib::Client api(d.url());
  auto chart = api.Get("/api/runs/1/best.svg");
  ASSERT_TRUE(chart);
  ASSERT_EQ(chart->status, 200);
  std::vector<std::string> ticks;
  std::vector<double> heights;
  static const std::regex tick_re(
      R"re(<text class="tick-y" x="[^"]*" y="([^"]+)"[^>]*>([^<]*)<)re");
  for (std::sregex_iterator it(chart->body.begin(), chart->body.end(), tick_re), end; it != end;
       ++it)
    heights.push_back(std::stod((*it)[1])), ticks.push_back((*it)[2]);
  EXPECT_EQ(ticks, (std::vector<std::string>{"5 ms", "10 ms", "20 ms", "50 ms", "100 ms"}))
      << chart->body;
  ASSERT_EQ(heights.size(), 5u);
  EXPECT_NEAR(heights[0] - heights[1], heights[1] - heights[2], 0.01) << "5-10 as 10-20 ms";
  EXPECT_NE(chart->body.find("<title>4096: 5.591 ms</title>"), std::string::npos);
  EXPECT_NE(chart->body.find("<title>4096: 85.46 ms</title>"), std::string::npos);
  auto bars = api.Get("/api/runs/1/parameters.svg");
  ASSERT_TRUE(bars);
  EXPECT_NE(bars->body.find("<title>block_size_x=64: 5.591 ms</title>"), std::string::npos);

  wd.go(d.url() + "/kernel.html?id=1");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_EQ(wd.text("#contexts tbody tr:first-child td:nth-child(5)"), "85.46 ms") << "default";
  check_numbers("kernel");
  snap(wd, "h100-kernel");

  wd.go(d.url() + "/");
  ASSERT_TRUE(wd.wait_loaded());
  EXPECT_EQ(wd.text("#runs tbody tr:first-child td:nth-child(5)"), "5.591 ms");
  EXPECT_EQ(wd.text("#devices tbody tr:first-child td:nth-child(4)"), "79.2 GiB");
  check_numbers("overview");
  snap(wd, "h100-overview");

  wd.go(d.url() + "/history.html?context=1");
  ASSERT_TRUE(wd.wait_loaded());
  check_numbers("history");
  snap(wd, "h100-history");
}

}  // namespace
}  // namespace gputune
