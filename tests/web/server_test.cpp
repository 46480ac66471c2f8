#include "web/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "db/interchange.h"
#include "db/store.h"
#include "json_fuzz.h"
#include "test_util.h"
#include "tuned_store.h"
#include "variants/hash.h"
#include "web/charts.h"
#include "web/connection.h"

namespace gputune::web {
namespace {

/// A Server on a free loopback port, serving from a thread until the end of the scope (also when
/// an assertion returns early).
class Serving {
 public:
  explicit Serving(const std::string& db_path)
      : server_({db_path, "secret-token", "127.0.0.1", 0, {}}),
        port_(server_.bind()),
        thread_([this] { server_.run(); }) {}
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  ~Serving() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  Server server_;
  int port_;
  std::thread thread_;
};

TEST(Security, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.5.6.7"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_TRUE(is_loopback("::ffff:127.0.0.1"));
  EXPECT_FALSE(is_loopback("10.0.0.1"));
  EXPECT_FALSE(is_loopback("192.168.1.127"));
  EXPECT_FALSE(is_loopback("::ffff:10.0.0.1"));
  EXPECT_FALSE(is_loopback(""));
}

TEST(Security, TokenComparison) {
  EXPECT_TRUE(token_matches("abc123", "abc123"));
  EXPECT_FALSE(token_matches("abc124", "abc123"));
  EXPECT_FALSE(token_matches("abc12", "abc123"));
  EXPECT_FALSE(token_matches("", ""));  // no token configured: nothing matches
}

TEST(Charts, EveryLabelIsEscaped) {
  EXPECT_EQ(xml_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  std::string svg = line_chart("<script>", {{"</svg><script>", {1, 2}, {3, 4}}}, "x<", "y>", true);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  std::string bars = bar_chart("t", {{"p<", {"v&"}, {1.0}}}, "ms");
  EXPECT_EQ(bars.find("p<"), std::string::npos);
  EXPECT_NE(bars.find("v&amp;"), std::string::npos);
}

TEST(Charts, EmptyDataSaysSo) {
  EXPECT_NE(line_chart("best", {}, "x", "y", true).find("no data yet"), std::string::npos);
  EXPECT_NE(bar_chart("b", {}, "ms").find("no correct measurements yet"), std::string::npos);
  std::string s = scatter_chart("s", {"p", {1, 2, 3}, {1, 2, 4}}, "predicted", "measured", true);
  EXPECT_NE(s.find("stroke-dasharray"), std::string::npos);  // the y = x diagonal
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 0);
  size_t circles = 0;
  for (size_t p = s.find("<circle"); p != std::string::npos; p = s.find("<circle", p + 1))
    ++circles;
  EXPECT_EQ(circles, 3u);
}

/// The <text> elements of an SVG: position, rotation, font size and text.
struct SvgText {
  double x = 0, y = 0;
  bool rotated = false;
  double font = 11;
  std::string text;
};
std::vector<SvgText> svg_texts(const std::string& svg) {
  std::vector<SvgText> out;
  const std::regex text_re("<text ([^>]*)>([^<]*)</text>");
  const std::regex x_re(R"re(\bx="([-0-9.e]+)")re"), y_re(R"re(\by="([-0-9.e]+)")re");
  const std::regex tr_re(R"re(translate\(([-0-9.e]+),([-0-9.e]+)\) rotate)re");
  const std::regex font_re(R"re(font-size="([0-9.]+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), text_re), end; it != end; ++it) {
    const std::string attrs = (*it)[1];
    SvgText t;
    t.text = (*it)[2];
    std::smatch m;
    if (std::regex_search(attrs, m, tr_re)) {
      t.rotated = true, t.x = std::stod(m[1]), t.y = std::stod(m[2]);
    } else {
      if (std::regex_search(attrs, m, x_re)) t.x = std::stod(m[1]);
      if (std::regex_search(attrs, m, y_re)) t.y = std::stod(m[1]);
    }
    if (std::regex_search(attrs, m, font_re)) t.font = std::stod(m[1]);
    out.push_back(t);
  }
  return out;
}

// Axis labels are round numbers written out (11130 measurements: 2000, 4000, ..., 10000, never
// "1.113e+04"), and the time axis starts at 0.
TEST(Charts, AxesAreLabelledWithRoundNumbers) {
  Series s{"ctx", {}, {}};
  for (int i = 1; i <= 11130; i += 37) s.x.push_back(i), s.y.push_back(150.0 + 50.0 / i);
  s.x.push_back(11130), s.y.push_back(150);
  const std::string svg = line_chart("best", {s}, "measurements", "ms", true);
  EXPECT_EQ(svg.find("e+0"), std::string::npos) << svg;
  std::vector<std::string> middle, left;
  for (const auto& t : svg_texts(svg)) {
    if (t.text.empty() || !std::isdigit(static_cast<unsigned char>(t.text[0]))) continue;
    (t.y > 280 ? middle : left).push_back(t.text);  // below the plot: the x axis
  }
  EXPECT_EQ(middle, (std::vector<std::string>{"2000", "4000", "6000", "8000", "10000"}));
  EXPECT_EQ(left, (std::vector<std::string>{"0", "50", "100", "150", "200"}));
}

// The legend (one name per series, top right) sits above every point: two contexts whose best
// times end at the top right corner once drew their names over the lines.
TEST(Charts, TheLegendSitsAboveTheData) {
  for (Axis axis : {Axis::linear, Axis::log_ms})
    for (size_t n : {1u, 2u, 3u, 8u}) {
      std::vector<Series> series;
      for (size_t k = 0; k < n; ++k)
        series.push_back({"context " + std::to_string(k), {1, 10, 20}, {1.0, 1.1, 1.2 + 0.01 * k}});
      const std::string svg = line_chart("best", series, "measurements", "ms", true, axis);
      double legend_bottom = 0;
      for (const auto& t : svg_texts(svg))
        if (t.text.rfind("context ", 0) == 0) legend_bottom = std::max(legend_bottom, t.y);
      ASSERT_GT(legend_bottom, 0) << svg;
      static const std::regex cy_re("<circle cx=\"[^\"]*\" cy=\"([^\"]+)\"");
      size_t points = 0;
      for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cy_re);
           it != std::sregex_iterator(); ++it, ++points)
        EXPECT_GT(std::stod((*it)[1]) - 2.5, legend_bottom + 3) << n << " series";  // r 2.5
      EXPECT_EQ(points, 3 * n);
    }
}

// Times read in the unit that keeps them between 1 and 1000, to 3 significant digits by default.
TEST(Charts, TimesAreWrittenInTheirUnit) {
  EXPECT_EQ(format_ms(85.4595), "85.5 ms");
  EXPECT_EQ(format_ms(5.5909), "5.59 ms");
  EXPECT_EQ(format_ms(5.5909, 4), "5.591 ms");
  EXPECT_EQ(format_ms(5), "5 ms");
  EXPECT_EQ(format_ms(5.6), "5.6 ms");  // trailing zeros dropped
  EXPECT_EQ(format_ms(0.512), "512 \u00b5s");
  EXPECT_EQ(format_ms(0.05323, 4), "53.23 \u00b5s");
  EXPECT_EQ(format_ms(0.0001234), "123 ns");
  EXPECT_EQ(format_ms(1500), "1.5 s");
  EXPECT_EQ(format_ms(187692.67), "188 s");
  EXPECT_EQ(format_ms(999.96), "1 s");  // rounded before the unit is picked
  EXPECT_EQ(format_ms(0.99996), "1 ms");
  EXPECT_EQ(format_ms(0), "0 ms");
  EXPECT_EQ(format_ms(std::nan("")), "-");
}

/// The y axis's tick labels of a chart and their heights, top to bottom reversed (bottom first).
std::vector<std::pair<std::string, double>> y_ticks_of(const std::string& svg) {
  std::vector<std::pair<std::string, double>> out;
  const std::regex re(R"re(<text class="tick-y" x="[^"]*" y="([-0-9.e]+)"[^>]*>([^<]*)</text>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it)
    out.push_back({(*it)[2], std::stod((*it)[1])});
  return out;
}
std::vector<double> point_heights(const std::string& svg) {
  std::vector<double> out;
  static const std::regex cy_re("<circle cx=\"[^\"]*\" cy=\"([^\"]+)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), cy_re), end; it != end; ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

// The best-so-far curve of the H100 matmul run (shared/data/h100-2026-11-26): from the default's
// 85.46 ms to 5.591 ms. On a linear axis from 0 the region where tuning happens (6.7 to 5.6 ms)
// was 3 px tall; on the log axis, labelled 5, 10, 20, 50, 100 ms, it is 14.
TEST(Charts, TimesSpanningDecadesAreOnALogAxis) {
  const Series run{"4096",
                   {1, 2, 3, 4, 5, 80, 95, 130, 285, 548},
                   {85.46, 43.9, 18.9, 9.93, 6.71, 6.62, 6.42, 5.90, 5.66, 5.591}};
  const std::string svg = line_chart("Best time so far", {run}, "correct measurements", "best time",
                                     true, Axis::log_ms);
  const auto ticks = y_ticks_of(svg);
  std::vector<std::string> labels;
  for (const auto& [text, y] : ticks) labels.push_back(text);
  EXPECT_EQ(labels, (std::vector<std::string>{"5 ms", "10 ms", "20 ms", "50 ms", "100 ms"}));
  ASSERT_EQ(ticks.size(), 5u);
  // Equal ratios, equal distances: 5 -> 10 as 10 -> 20; 20 -> 50 as log 2.5 / log 2 of that.
  const double octave = ticks[0].second - ticks[1].second;
  EXPECT_GT(octave, 40);
  EXPECT_NEAR(ticks[1].second - ticks[2].second, octave, 0.01);
  EXPECT_NEAR(ticks[2].second - ticks[3].second, octave * std::log(2.5) / std::log(2), 0.01);
  const auto points = point_heights(svg);
  ASSERT_EQ(points.size(), run.y.size());
  EXPECT_GT(points.back() - points[4], 10) << "6.71 ms to 5.591 ms";        // y grows downwards
  EXPECT_NE(svg.find("<title>4096: 5.591 ms</title>"), std::string::npos);  // the tooltip
  // The linear axis it replaces.
  const auto flat = point_heights(line_chart("b", {run}, "x", "ms", true));
  EXPECT_LT(flat.back() - flat[4], 4);

  // Six decades: only the powers of ten are labelled, in their units.
  labels.clear();
  for (const auto& [text, y] :
       y_ticks_of(line_chart("b", {{"c", {1, 2}, {1000, 0.001}}}, "x", "t", true, Axis::log_ms)))
    labels.push_back(text);
  EXPECT_EQ(labels, (std::vector<std::string>{"1 \u00b5s", "10 \u00b5s", "100 \u00b5s", "1 ms",
                                              "10 ms", "100 ms", "1 s"}));
  // Within a factor of 1.4: round linear steps, still in ms, around the data.
  const std::string narrow_svg =
      line_chart("b", {{"c", {1, 2, 3}, {200, 160, 150}}}, "x", "t", true, Axis::log_ms);
  const auto narrow = y_ticks_of(narrow_svg);
  ASSERT_GE(narrow.size(), 3u);
  for (const auto& [text, y] : narrow) EXPECT_EQ(text.substr(text.size() - 3), " ms") << text;
  const auto narrow_points = point_heights(narrow_svg);
  EXPECT_GE(narrow.front().second - 4, narrow_points.back()) << narrow.front().first;  // 150 ms
  EXPECT_LE(narrow.back().second - 4, narrow_points.front()) << narrow.back().first;   // 200 ms
  // One value: a range around it.
  EXPECT_GE(y_ticks_of(line_chart("b", {{"c", {1}, {5.591}}}, "x", "t", true, Axis::log_ms)).size(),
            3u);
  // Zero cannot be on a log axis: linear from zero.
  const auto zero =
      y_ticks_of(line_chart("b", {{"c", {1, 2}, {0, 5}}}, "x", "t", true, Axis::log_ms));
  ASSERT_FALSE(zero.empty());
  EXPECT_EQ(zero.front().first, "0 ms");
  // The measured-vs-predicted scatter: both axes log, the diagonal from corner to corner.
  const std::string s = scatter_chart("s", {"p", {0.5, 5, 50}, {0.6, 4, 80}}, "predicted",
                                      "measured", true, Axis::log_ms);
  labels.clear();
  for (const auto& [text, y] : y_ticks_of(s)) labels.push_back(text);
  EXPECT_EQ(labels, (std::vector<std::string>{"500 \u00b5s", "1 ms", "2 ms", "5 ms", "10 ms",
                                              "20 ms", "50 ms", "100 ms"}));
  EXPECT_NE(s.find("<line x1=\"70\" y1=\"270\" x2=\"620\" y2=\"36\" stroke=\"#999\""),
            std::string::npos)
      << s;
}

// The parameter chart of a real space (dedispersion: 30 values of block_size_y, two-valued
// parameters with long names) has no label over another: value labels stand upright where they
// do not fit their bar, and the chart widens so that each name fits under its group.
TEST(Charts, BarLabelsAndParameterNamesNeverOverlap) {
  std::vector<BarGroup> groups;
  auto group = [&](const std::string& name, const std::vector<int>& values) {
    BarGroup g{name, {}, {}};
    for (int v : values) g.labels.push_back(std::to_string(v)), g.values.push_back(150 + v % 7);
    groups.push_back(g);
  };
  std::vector<int> by;
  for (int v = 32; v <= 256; v += 8) by.push_back(v);
  group("block_size_x", {1, 2, 4, 8, 16, 32});
  group("block_size_y", by);
  group("tile_size_x", {1, 2, 3, 4});
  group("tile_stride_x", {0, 1});
  group("tile_stride_y", {0, 1});
  group("loop_unroll_factor_channel", {0, 1});
  const std::string svg = bar_chart("Best time per parameter value", groups, "best ms");
  std::vector<SvgText> texts = svg_texts(svg);
  // Horizontal texts on one row must not overlap (about 0.6 em per character); upright ones
  // must be at least a font height apart.
  size_t upright = 0, names = 0;
  for (size_t a = 0; a < texts.size(); ++a) {
    upright += texts[a].rotated;
    for (const auto& g : groups) names += texts[a].text == g.name;
    for (size_t b = a + 1; b < texts.size(); ++b) {
      const SvgText &p = texts[a], &q = texts[b];
      if (p.rotated != q.rotated) continue;
      if (p.rotated) {
        EXPECT_GE(std::fabs(p.x - q.x), p.font) << p.text << " / " << q.text;
      } else if (std::fabs(p.y - q.y) < 1) {
        const double half = 0.3 * (p.font * p.text.size() + q.font * q.text.size());
        EXPECT_GE(std::fabs(p.x - q.x), half) << "'" << p.text << "' / '" << q.text << "'";
      }
    }
  }
  EXPECT_EQ(names, groups.size());
  EXPECT_GE(upright, by.size());  // 3-digit values do not fit bars that narrow
  // A small chart keeps its labels flat and its 640 px.
  const std::string small = bar_chart("t", {{"bs", {"64", "128"}, {1.0, 2.0}}}, "ms");
  EXPECT_EQ(small.find("rotate(-90)\" text-anchor=\"end\""), std::string::npos);
  EXPECT_NE(small.find("width=\"640\""), std::string::npos);
}

// Every write endpoint (web/server.cpp write_routes: submit and cancel) answers 401 with a JSON
// error to a client without the token, with a wrong one, and with the right one anywhere but
// "Authorization: Bearer TOKEN"; and what it would have written is not: nothing is queued, the
// queued job stays queued. Other methods on those paths are not endpoints.
TEST(Security, EveryWriteEndpointRefusesWithoutTheToken) {
  test::TempDir dir;
  const std::string db_path = (dir / "g.db").string();
  std::int64_t queued = 0;
  {
    db::Store store(db_path);
    db::QueueItem q;
    q.name = "queued", q.job_file = "/p/job.json", q.kernel_file = "vector_add.cu";
    q.document = test::read_file(test::examples_dir() / "vector_add.json");
    q.kernel_source = test::read_file(test::examples_dir() / "vector_add.cu");
    queued = store.enqueue(q);
  }
  Serving serving(db_path);
  httplib::Client c("127.0.0.1", serving.port());
  const nlohmann::json job = {
      {"document",
       nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"))},
      {"kernel_source", test::read_file(test::examples_dir() / "vector_add.cu")}};
  struct Endpoint {
    std::string path, body;
  };
  const std::string cancel = "/api/jobs/" + std::to_string(queued) + "/cancel";
  const std::vector<Endpoint> writes = {{"/api/jobs", job.dump()}, {cancel, ""}};
  const std::string token = "secret-token";
  struct Credentials {
    std::string what;
    httplib::Headers headers;
    std::string query;  // appended to the path
    bool token_in_body = false;
  };
  const std::vector<Credentials> wrong = {
      {"none", {}, "", false},
      {"a wrong token", {{"Authorization", "Bearer secret-tokeN"}}, "", false},
      {"a longer token", {{"Authorization", "Bearer secret-token2"}}, "", false},
      {"a prefix of the token", {{"Authorization", "Bearer secret"}}, "", false},
      {"an empty token", {{"Authorization", "Bearer "}}, "", false},
      {"the token without the scheme", {{"Authorization", token}}, "", false},
      {"another scheme", {{"Authorization", "Token " + token}}, "", false},
      {"basic auth", {{"Authorization", "Basic " + base64_encode("gputune:" + token)}}, "", false},
      {"two spaces", {{"Authorization", "Bearer  " + token}}, "", false},
      {"another header", {{"X-Token", token}, {"X-Api-Key", token}}, "", false},
      {"a cookie", {{"Cookie", "token=" + token}}, "", false},
      {"the query", {}, "?token=" + token + "&access_token=" + token, false},
      {"the body", {}, "", true}};
  for (const Endpoint& e : writes)
    for (const Credentials& cred : wrong) {
      std::string body = e.body;
      if (cred.token_in_body) {
        nlohmann::json b = body.empty() ? nlohmann::json::object() : nlohmann::json::parse(body);
        b["token"] = token;
        body = b.dump();
      }
      auto r = c.Post(e.path + cred.query, cred.headers, body, "application/json");
      ASSERT_TRUE(r) << e.path << " with " << cred.what;
      EXPECT_EQ(r->status, 401) << e.path << " with " << cred.what << ": " << r->body;
      const auto answer = nlohmann::json::parse(r->body, nullptr, false);
      ASSERT_TRUE(answer.is_object() && answer.contains("error")) << r->body;
      EXPECT_NE(answer["error"].get<std::string>().find("token"), std::string::npos) << r->body;
    }
  // Other methods on the write paths do nothing.
  for (const Endpoint& e : writes) {
    const httplib::Headers auth = {{"Authorization", "Bearer " + token}};
    std::vector<httplib::Result> answers;
    answers.push_back(c.Put(e.path, auth, e.body, "application/json"));
    answers.push_back(c.Delete(e.path, auth));
    answers.push_back(c.Patch(e.path, auth, e.body, "application/json"));
    answers.push_back(c.Get(e.path, auth));
    for (auto& r : answers) {
      ASSERT_TRUE(r) << e.path;
      EXPECT_GE(r->status, 400) << e.path << ": " << r->body;
    }
  }
  {
    db::Store store(db_path);
    ASSERT_EQ(store.queue(100).size(), 1u) << "a refused submission queues nothing";
    EXPECT_EQ(store.queue_item(queued)->status, db::QueueStatus::kQueued)
        << "a refused cancel cancels nothing";
    EXPECT_FALSE(store.queue_item(queued)->cancel_requested);
  }
  // The right token in the right place: both endpoints answer (the refusals were not for
  // another reason).
  const httplib::Headers auth = {{"Authorization", "Bearer " + token}};
  auto submitted = c.Post("/api/jobs", auth, job.dump(), "application/json");
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->status, 201) << submitted->body;
  auto cancelled = c.Post(cancel, auth, std::string(), "application/json");
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->status, 200) << cancelled->body;
}

// The paths of what a submitted job takes along are refused (400, the field and why) when the
// worker could not write them under its own folder as they are: `..`, `.`, relative, doubled or
// trailing '/', the root itself, NUL bytes, names over 255 bytes, paths over 3 KiB; and so are a
// job file and a working directory of those kinds. Nothing is queued.
TEST(Security, SubmittedPathsThatCouldLeaveTheWorkersFolderAreRefused) {
  test::TempDir dir;
  const std::string db_path = (dir / "g.db").string();
  Serving serving(db_path);
  httplib::Client c("127.0.0.1", serving.port());
  const httplib::Headers auth = {{"Authorization", "Bearer secret-token"}};
  const nlohmann::json valid = {
      {"document",
       nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"))},
      {"kernel_source", test::read_file(test::examples_dir() / "vector_add.cu")},
      {"job_file", "/p/job.json"},
      {"cwd", "/p"},
      {"files", {{{"path", "/p/x.h"}, {"base64", base64_encode("#define X 1\n")}}}}};
  const std::string nul("/p/x.h\0/../../../etc/passwd", 27);
  const std::string long_name = "/p/" + std::string(256, 'n') + ".h";
  std::string long_path = "/p";
  while (long_path.size() <= kMaxSubmittedPathBytes) long_path += "/" + std::string(200, 'd');
  long_path += "/x.h";
  struct Case {
    std::string key, value, field, says;
  };
  const std::vector<Case> cases = {
      {"files", "/p/../../etc/passwd", "files[0].path", "not normal"},
      {"files", "/../etc/passwd", "files[0].path", "not normal"},
      {"files", "../../etc/passwd", "files[0].path", "not absolute"},
      {"files", "x.h", "files[0].path", "not absolute"},
      {"files", "/p/./x.h", "files[0].path", "not normal"},
      {"files", "/p//x.h", "files[0].path", "not normal"},
      {"files", "/p/inc/", "files[0].path", "not normal"},
      {"files", "/", "files[0].path", "names a folder"},
      {"files", "", "files[0].path", "empty"},
      {"files", nul, "files[0].path", "NUL"},
      {"files", long_name, "files[0].path", "longer than 255"},
      {"files", long_path, "files[0].path", "longer than 3072"},
      {"job_file", "/p/../../etc/cron.d/job.json", "job_file", "not normal"},
      {"job_file", "../../etc/job.json", "job_file", "not absolute"},
      {"job_file", "..", "job_file", "not a file name"},
      {"job_file", std::string("job\0.json", 9), "job_file", "not a file name"},
      {"job_file", long_name, "job_file", "longer than 255"},
      {"cwd", "/p/../..", "cwd", "not normal"},
      {"cwd", "p", "cwd", "not absolute"}};
  for (const Case& k : cases) {
    nlohmann::json body = valid;
    if (k.key == "files")
      body["files"][0]["path"] = k.value;
    else
      body[k.key] = k.value;
    auto r = c.Post("/api/jobs", auth, body.dump(), "application/json");
    ASSERT_TRUE(r) << k.key << " " << k.value.substr(0, 80);
    EXPECT_EQ(r->status, 400) << k.key << " " << k.value.substr(0, 80) << ": " << r->body;
    const auto answer = nlohmann::json::parse(r->body, nullptr, false);
    ASSERT_TRUE(answer.is_object()) << r->body;
    EXPECT_EQ(answer.value("field", ""), k.field) << r->body;
    EXPECT_NE(answer.value("error", "").find(k.says), std::string::npos) << r->body;
  }
  EXPECT_TRUE(db::Store(db_path).queue(100).empty());
  auto ok = c.Post("/api/jobs", auth, valid.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body;
}

// Whatever a client POSTs to /api/jobs, mutated at random from a valid submission, the answer is
// 201 (queued) or 400 with a JSON error and the field at fault: never a 500, a crash or a hang,
// and the queue holds exactly the jobs that were accepted.
// Server::handle answers a request given as its bytes as run() answers it on a connection (the
// fuzz target's way in, tests/fuzz/web_fuzz.cpp): routes, parameters, the token, the peer's
// address.
/// dir/g.db with one kernel (vector_add), one context of 1M on "GPU" and one run holding one
/// measurement (128,1 at 2.0 ms).
struct OneMeasurement {
  explicit OneMeasurement(const test::TempDir& dir)
      : path((dir / "g.db").string()), store(std::make_unique<db::Store>(path)) {
    kernel = store->upsert_kernel("vector_add", "h1", "src");
    ctx = test::vector_add_context(*store, kernel, "GPU", 9, 132, "1M", 1 << 20);
    run = store->begin_run(store->upsert_job("v", "/v.json", "{}"), "random", 2);
    test::vector_add_measurement(*store, run, kernel, ctx, 128, 1, 2.0);
  }
  std::string path;
  std::unique_ptr<db::Store> store;
  std::int64_t kernel = 0, ctx = 0, run = 0;
};

/// The value of a response's Server-Timing header ("" without).
std::string server_timing(const std::string& response) {
  const std::string head = response.substr(0, response.find("\r\n\r\n"));
  const auto at = head.find("\r\nServer-Timing: ");
  if (at == std::string::npos) return "";
  const auto from = at + 17;
  return head.substr(from, head.find("\r\n", from) - from);
}

// A cached result is rebuilt when the database changed. One quick to build (under
// rebuild_floor_s) is rebuilt on the request. A slow one is served as it was while the
// background thread (web/rebuilds.h) builds its successor, at most once per rebuild_factor times
// its build time: a tuning worker's stream of measurements neither keeps the server rebuilding
// nor makes a request wait for a rebuild. Server-Timing says how each was had.
TEST(Api, ASlowCachedResultIsRebuiltInTheBackgroundAtMostOncePerTwentyBuildTimes) {
  struct Case {
    const char* what;
    double floor, factor;
    const char* first_after;  ///< how the first request after the change is served
    bool rebuilt;             ///< whether the next one, after settle(), has the new measurement
  };
  for (const Case& c :
       {Case{"quick: rebuilt on the request", 1e9, 0, "built", true},
        Case{"slow, past its window: served stale, rebuilt behind", 0, 0, "stale", true},
        Case{"slow, within its window: served stale, not rebuilt", 0, 1e9, "stale", false}}) {
    SCOPED_TRACE(c.what);
    test::TempDir dir;
    const OneMeasurement one(dir);
    ServerOptions o{one.path, "t", "127.0.0.1", 0, {}};
    o.rebuild_floor_s = c.floor;
    o.rebuild_factor = c.factor;
    Server server(o);
    const std::string get =
        "GET /api/contexts/" + std::to_string(one.ctx) + "/history HTTP/1.1\r\n\r\n";
    auto body = [](const std::string& r) { return r.substr(r.find("\r\n\r\n")); };
    const std::string before = server.handle(get);
    ASSERT_NE(before.find("\"best_ms\":2.0"), std::string::npos) << before;
    EXPECT_EQ(server_timing(before).rfind("cache;desc=\"built\", app;dur=", 0), 0u)
        << server_timing(before);
    const std::string again = server.handle(get);
    EXPECT_EQ(body(again), body(before));
    EXPECT_EQ(server_timing(again).rfind("cache;desc=\"hit\", ", 0), 0u) << server_timing(again);

    test::vector_add_measurement(*one.store, one.run, one.kernel, one.ctx, 256, 1, 1.0);
    const std::string after = server.handle(get);
    EXPECT_NE(server_timing(after).find(std::string("cache;desc=\"") + c.first_after + "\""),
              std::string::npos)
        << server_timing(after);
    if (std::string(c.first_after) == "built")
      EXPECT_NE(after.find("\"best_ms\":1.0"), std::string::npos) << after;
    else
      EXPECT_EQ(body(after), body(before)) << "served as built before the change";
    server.settle();
    const std::string later = server.handle(get);
    if (c.rebuilt) {
      EXPECT_NE(later.find("\"best_ms\":1.0"), std::string::npos) << later;
      EXPECT_NE(server_timing(later).find("cache;desc=\"hit\""), std::string::npos);
    } else {
      EXPECT_EQ(body(later), body(before));
    }
  }
}

// The runtime selection table is kept per kernel the same way: a slow one is served while its
// successor is built in the background, and the next lookup after that has the new winner.
TEST(Api, ASlowSelectionTableIsRebuiltInTheBackground) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  ServerOptions o{one.path, "t", "127.0.0.1", 0, {}};
  o.rebuild_floor_s = 0, o.rebuild_factor = 0;  // every table is slow, and past its window
  Server server(o);
  const std::string get = "GET /api/kernels/" + std::to_string(one.kernel) +
                          "/select?device=GPU&size=1048576 HTTP/1.1\r\n\r\n";
  auto config = [](const std::string& r) {
    const auto answer = nlohmann::json::parse(r.substr(r.find("\r\n\r\n") + 4), nullptr, false);
    return answer.is_object() ? answer.value("config", "") : "not JSON: " + r;
  };
  EXPECT_EQ(config(server.handle(get)), "128,1");
  test::vector_add_measurement(*one.store, one.run, one.kernel, one.ctx, 256, 1, 1.0);
  EXPECT_EQ(config(server.handle(get)), "128,1") << "the table built before, while it is rebuilt";
  server.settle();
  EXPECT_EQ(config(server.handle(get)), "256,1");
}

// Every answer says in Server-Timing how long its handler took, errors included, so that a
// browser's developer tools, and bench/load_bench, tell the server's time from the wait around
// it.
TEST(Api, EveryResponseSaysHowLongItsHandlerTook) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Server server({one.path, "t", "127.0.0.1", 0, {}});
  for (const std::string target : {"/api/runs", "/api/runs/999999", "/", "/api/kernels/1/header"}) {
    SCOPED_TRACE(target);
    const std::string r = server.handle("GET " + target + " HTTP/1.1\r\n\r\n");
    const std::string timing = server_timing(r);
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(timing, m,
                          std::regex("app;dur=([0-9]+\\.[0-9]{3}), cpu;dur=([0-9]+\\.[0-9]{3})(, "
                                     "queue;dur=[0-9]+\\.[0-9]{3})?$")))
        << r.substr(0, 400);
    EXPECT_LT(std::stod(m[1]), 60000) << timing;
    EXPECT_LE(std::stod(m[2]), std::stod(m[1]) + 0.01)
        << "a thread's CPU time within its wall time";
  }
}

/// A loopback TCP connection to `port` (-1 when it failed).
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  ::close(fd);
  return -1;
}

bool send_text(int fd, const std::string& text) {
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

/// What `fd` receives within `ms` ms, until `done(received)` says it is enough.
std::string receive(int fd, int ms, const std::function<bool(const std::string&)>& done) {
  std::string got;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done(got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

/// How many whole responses (a head, then Content-Length bytes) `text` holds.
int whole_responses(const std::string& text) {
  int n = 0;
  for (size_t at = 0;;) {
    const size_t end = text.find("\r\n\r\n", at);
    if (end == std::string::npos) return n;
    const size_t cl = text.find("Content-Length: ", at);
    const size_t length =
        cl != std::string::npos && cl < end ? std::stoul(text.substr(cl + 16)) : 0;
    if (text.size() < end + 4 + length) return n;
    ++n, at = end + 4 + length;
  }
}

/// A loopback connection to `port` that has sent one GET of `target`, read its whole answer (not
/// one that closes the connection), and stays open. -1 when that failed.
int keep_alive_connection(int port, const std::string& target) {
  const int fd = connect_to(port);
  if (fd < 0) return -1;
  const std::string got =
      send_text(fd, "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n")
          ? receive(fd, 5000, [](const std::string& r) { return whole_responses(r) == 1; })
          : "";
  if (whole_responses(got) == 1 && got.find("Connection: close") == std::string::npos) return fd;
  ::close(fd);
  return -1;
}

/// Voluntary context switches (sleeps) of this process's threads named gputune-http, but this one,
/// and how many such threads there are.
std::pair<long, int> request_thread_sleeps() {
  long n = 0;
  int threads = 0;
  const std::string self = std::to_string(gettid());
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    if (t.path().filename() == self) continue;
    std::ifstream comm(t.path() / "comm"), status(t.path() / "status");
    std::string name, line;
    if (!std::getline(comm, name) || name != "gputune-http") continue;
    ++threads;
    while (std::getline(status, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) n += std::stol(line.substr(24));
  }
  return {n, threads};
}

// A response's headers and body leave in one send (httplib writes them separately: the client
// woke for each), and reads are served from one read ahead.
TEST(Connection, AResponseLeavesInOneSend) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds), 0);  // one record per send
  ConnectionStream strm(fds[0], 1000, 1000);
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n";
  ASSERT_EQ(strm.write(head.data(), head.size()), static_cast<ssize_t>(head.size()));
  ASSERT_EQ(strm.write("body", 4), 4);
  pollfd p{fds[1], POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "nothing is sent before the response is complete";
  ASSERT_TRUE(strm.flush());
  char buf[4096];
  const ssize_t n = ::recv(fds[1], buf, sizeof buf, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0))), head + "body");
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "one send, not two";
  const std::string req = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(fds[1], req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string read_back;
  char c;
  while (read_back.size() < req.size() && strm.read(&c, 1) == 1) read_back += c;
  EXPECT_EQ(read_back, req);
  ::close(fds[1]);
  EXPECT_FALSE(strm.flush() && strm.write("x", 1) == 1 && strm.flush()) << "the peer is gone";
  ::close(fds[0]);
}

// An idle keep-alive connection sleeps until its next request: httplib's own loop woke its thread
// every 11 ms, each wake-up a chance to wait a scheduler tick for a core on a small machine.
TEST(Connection, AnIdleKeepAliveConnectionLetsItsThreadSleep) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Serving serving(one.path);
  const int fd = keep_alive_connection(serving.port(), "/api/runs");
  ASSERT_GE(fd, 0);
  const auto [before, threads] = request_thread_sleeps();
  ASSERT_GE(threads, 1) << "the request was served by a thread named gputune-http";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long woke = request_thread_sleeps().first - before;
  EXPECT_LT(woke, 5) << "the thread serving an idle connection woke " << woke << " times in 300 ms";
  // and the connection still serves
  ASSERT_TRUE(send_text(fd, "GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  EXPECT_EQ(whole_responses(receive(fd, 5000, [](auto& r) { return whole_responses(r) == 1; })), 1);
  ::close(fd);
}

// A client that sends "Expect: 100-continue" (curl, for a big POST) gets the 100 before it
// sends the body: it is not held with the response's writes.
TEST(Connection, AnExpectContinueIsAnsweredBeforeTheBody) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Serving serving(one.path);
  const int fd = connect_to(serving.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_text(fd,
                        "POST /api/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                        "application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  const std::string cont =
      receive(fd, 2000, [](const std::string& r) { return r.find("\r\n\r\n") != r.npos; });
  EXPECT_EQ(cont.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << cont;
  ASSERT_TRUE(send_text(fd, "{}"));
  const std::string answer =
      receive(fd, 5000, [](const std::string& r) { return whole_responses(r) == 1; });
  EXPECT_NE(answer.find("HTTP/1.1 401"), std::string::npos) << "no token: " << answer;
  ::close(fd);
}

// Two requests sent at once (pipelined) are both answered at once: the second, read ahead with
// the first, is not left waiting for the socket to say more.
TEST(Connection, PipelinedRequestsAreAnsweredInTurn) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Serving serving(one.path);
  const int fd = connect_to(serving.port());
  ASSERT_GE(fd, 0);
  const std::string get = "GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_TRUE(send_text(fd, get + get));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string got =
      receive(fd, 4000, [](const std::string& r) { return whole_responses(r) == 2; });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(whole_responses(got), 2) << got.substr(0, 300);
  EXPECT_LT(s, 2.0) << "the second answer took the keep-alive timeout";
  ::close(fd);
}

// stop() wakes the threads waiting on idle keep-alive connections: it does not wait for their
// keep-alive timeout (5 s).
TEST(Connection, StopDoesNotWaitForAnIdleKeepAliveConnection) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  auto serving = std::make_unique<Serving>(one.path);
  const int fd = keep_alive_connection(serving->port(), "/api/runs");
  ASSERT_GE(fd, 0);
  const auto t0 = std::chrono::steady_clock::now();
  serving.reset();  // stop(), then the serving thread joined
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_LT(s, 2.5) << "stop() took " << s << " s with an idle keep-alive connection open";
}

// More idle keep-alive clients than request threads (a browser keeps up to 6 connections per
// page open): httplib held a thread per connection until its 5 s keep-alive timeout, so with 8
// idle connections a new client's request waited 5 s. Idle connections now give their threads
// back (web/connection_pool.h), and still serve their next request.
TEST(Connection, IdleKeepAliveConnectionsDoNotHoldBackANewClient) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Serving serving(one.path);
  const int idle = static_cast<int>(2 * CPPHTTPLIB_THREAD_POOL_COUNT);
  std::vector<int> fds;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < idle; ++i) {
    fds.push_back(keep_alive_connection(serving.port(), "/api/runs"));
    ASSERT_GE(fds.back(), 0) << "connection " << i;
  }
  const double opened =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(opened, 2.5) << idle << " connections, one request each, took " << opened << " s";
  const auto t1 = std::chrono::steady_clock::now();
  const int fresh = keep_alive_connection(serving.port(), "/api/runs");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_GE(fresh, 0);
  EXPECT_LT(s, 1.0) << "a new client waited " << s << " s behind " << idle << " idle ones";
  // Each idle connection, parked or not, answers its next request.
  const std::string get = "GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (int fd : fds) ASSERT_TRUE(send_text(fd, get));
  for (size_t i = 0; i < fds.size(); ++i)
    EXPECT_EQ(
        whole_responses(receive(fds[i], 5000, [](auto& r) { return whole_responses(r) == 1; })), 1)
        << "connection " << i;
  for (int fd : fds) ::close(fd);
  if (fresh >= 0) ::close(fresh);
}

// stop() closes the parked connections too, without waiting for their keep-alive timeout.
TEST(Connection, StopClosesParkedConnectionsAtOnce) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  auto serving = std::make_unique<Serving>(one.path);
  std::vector<int> fds;
  for (int i = 0; i < static_cast<int>(2 * CPPHTTPLIB_THREAD_POOL_COUNT); ++i) {
    fds.push_back(keep_alive_connection(serving->port(), "/api/runs"));
    ASSERT_GE(fds.back(), 0) << "connection " << i;
  }
  const auto t0 = std::chrono::steady_clock::now();
  serving.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.5) << "stop() took " << s << " s with idle keep-alive connections open";
  for (size_t i = 0; i < fds.size(); ++i) {
    char c;
    pollfd p{fds[i], POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 2000), 1) << "connection " << i << " was left open";
    EXPECT_LE(::recv(fds[i], &c, 1, 0), 0) << "connection " << i << " still talks";
    ::close(fds[i]);
  }
}

// httplib's pool threads are named, so that top -H and perf (bench/sched_delays.py) tell them
// from the background rebuild and the workers.
TEST(Api, ARequestThreadIsNamedGputuneHttp) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  Server server({one.path, "t", "127.0.0.1", 0, {}});
  char before[16] = {}, after[16] = {};
  std::string response;
  std::thread t([&] {  // not this test's thread: it keeps its name
    pthread_setname_np(pthread_self(), "a-test-thread");  // not its creator's, which it inherits
    pthread_getname_np(pthread_self(), before, sizeof before);
    response = server.handle("GET /api/runs HTTP/1.1\r\n\r\n");
    pthread_getname_np(pthread_self(), after, sizeof after);
  });
  t.join();
  EXPECT_NE(response.find("200 OK"), std::string::npos) << response.substr(0, 200);
  EXPECT_STREQ(before, "a-test-thread");
  EXPECT_STREQ(after, "gputune-http");
}

// A cached endpoint's response carries each of its headers once, whether it was built for this
// request (the handler sets them, and the cache sets them again for what it serves) or served
// from the cache.
TEST(Api, ACachedResponseCarriesEachHeaderOnce) {
  test::TempDir dir;
  const OneMeasurement one(dir);
  const std::int64_t kernel = one.kernel, ctx = one.ctx, run = one.run;
  Server server({one.path, "t", "127.0.0.1", 0, {}});
  auto count = [](const std::string& response, const std::string& header) {
    const std::string head = response.substr(0, response.find("\r\n\r\n"));
    std::size_t n = 0;
    for (auto at = head.find("\r\n" + header + ": "); at != std::string::npos;
         at = head.find("\r\n" + header + ": ", at + 1))
      ++n;
    return n;
  };
  for (const std::string& target : {"/api/contexts/" + std::to_string(ctx) + "/history",
                                    "/api/runs/" + std::to_string(run) + "/best.svg",
                                    "/api/kernels/" + std::to_string(kernel) + "/header"})
    for (const char* pass : {"built", "from the cache"}) {
      SCOPED_TRACE(target + ", " + pass);
      const std::string r = server.handle("GET " + target + " HTTP/1.1\r\n\r\n");
      ASSERT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
      EXPECT_EQ(count(r, "Cache-Control"), 1u) << r;
      const bool download = target.find("/header") != std::string::npos;  // a file's name
      EXPECT_EQ(count(r, "Content-Disposition"), download ? 1u : 0u) << r;
      EXPECT_EQ(count(r, "Content-Type"), 1u) << r;
    }
}

TEST(Api, HandleAnswersARequestsBytesAsAConnectionWould) {
  test::TempDir dir;
  Server server({(dir / "g.db").string(), "secret-token", "127.0.0.1", 0, {}});
  auto starts = [](const std::string& response, const std::string& head) {
    return response.rfind(head, 0) == 0;
  };
  std::string r = server.handle("GET /api/runs HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(starts(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_NE(r.find("\r\n\r\n[]"), std::string::npos) << r;
  r = server.handle("GET /api/runs?limit=0 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(starts(r, "HTTP/1.1 400")) << r;
  EXPECT_NE(r.find("limit must be between 1 and 1000"), std::string::npos) << r;
  r = server.handle("GET /api/runs HTTP/1.1\r\n\r\n", "10.0.0.1");
  EXPECT_TRUE(starts(r, "HTTP/1.1 401")) << r;  // outside loopback without the token
  r = server.handle("POST /api/jobs HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_TRUE(starts(r, "HTTP/1.1 401")) << r;
  r = server.handle(
      "POST /api/jobs HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nContent-Length: "
      "2\r\n\r\n{}");
  EXPECT_TRUE(starts(r, "HTTP/1.1 400")) << r;
  EXPECT_NE(r.find("document (the T1 job as a JSON object) is required"), std::string::npos) << r;
  // A byte that is not UTF-8 in the body: the parser's message quotes it, and the client still
  // gets that message as JSON (web_fuzz found a 500 here).
  const std::string bad = "{\"document\": {\"Kernel\xa4\": 1}}";
  r = server.handle(
      "POST /api/jobs HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nContent-Length: " +
      std::to_string(bad.size()) + "\r\n\r\n" + bad);
  EXPECT_TRUE(starts(r, "HTTP/1.1 400")) << r;
  EXPECT_NE(r.find("malformed JSON"), std::string::npos) << r;
  EXPECT_TRUE(starts(server.handle("GET /nowhere HTTP/1.1\r\n\r\n"), "HTTP/1.1 404"));
  // A request line cut short is a bad request; a connection that sends nothing gets nothing.
  EXPECT_TRUE(starts(server.handle("GET /api/ru"), "HTTP/1.1 400")) << r;
  EXPECT_EQ(server.handle(""), "");
}

TEST(Api, FuzzedJobSubmissionsAreRefusedWithTheirFieldOrQueued) {
  test::TempDir dir;
  const std::string db_path = (dir / "g.db").string();
  auto serving = std::make_unique<Serving>(db_path);
  httplib::Client c("127.0.0.1", serving->port());
  c.set_read_timeout(60, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer secret-token"}};
  const nlohmann::json valid = {
      {"document",
       nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"))},
      {"kernel_source", test::read_file(test::examples_dir() / "vector_add.cu")},
      {"name", "fuzz"}};
  std::mt19937 rng(20261124);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    nlohmann::json body = valid;
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < changes; ++m) {
      if (rng() % 4 == 0)
        test::mutate_json(body, rng);  // the envelope
      else if (body.contains("document"))
        test::mutate_json(body["document"], rng);  // the T1 job inside it
    }
    std::string text = body.dump();
    if (i % 25 == 0) text = text.substr(0, rng() % text.size());  // cut short
    auto r = c.Post("/api/jobs", auth, text, "application/json");
    ASSERT_TRUE(r) << "no answer (" << httplib::to_string(r.error()) << ") to " << text;
    if (r->status == 201) {
      ++accepted;
      continue;
    }
    ASSERT_EQ(r->status, 400) << r->body << "\n" << text;
    const auto answer = nlohmann::json::parse(r->body);
    ASSERT_TRUE(answer.contains("error") && answer["error"].is_string()) << r->body;
    EXPECT_FALSE(answer["error"].get<std::string>().empty()) << text;
    ASSERT_TRUE(answer.contains("field")) << r->body;
    ++refused;
  }
  auto untouched = c.Post("/api/jobs", auth, valid.dump(), "application/json");
  ASSERT_TRUE(untouched);
  EXPECT_EQ(untouched->status, 201) << untouched->body;
  serving.reset();
  EXPECT_GT(refused, 100);  // the mutations reach the checks
  db::Store store(db_path);
  EXPECT_EQ(store.queue(1000).size(), static_cast<size_t>(accepted + 1));
}

// Every read endpoint, on a database with a real run (Kernel Tuner's dedispersion cache), with
// ids and query values at random from the kinds that break parsers: the answer is 200, or 400,
// 404 or 414 (a query over 8 KiB) with a JSON error naming the field; never a 500 or a dropped
// connection.
TEST(Api, FuzzedQueriesOfEveryReadEndpointAnswerOrSayWhy) {
  test::TempDir dir;
  const std::string db_path = (dir / "g.db").string();
  std::int64_t run = 0, context = 0;
  {
    db::Store store(db_path);
    run = db::import_measurements(
              store,
              (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string())
              .run_id;
    context = store.contexts("dedispersion_kernel").at(0).id;
  }
  auto serving = std::make_unique<Serving>(db_path);
  httplib::Client c("127.0.0.1", serving->port());
  c.set_read_timeout(60, 0);
  const std::vector<std::string> paths = {"/api/devices",
                                          "/api/kernels",
                                          "/api/kernels/{id}",
                                          "/api/kernels/{id}/header",
                                          "/api/contexts",
                                          "/api/runs",
                                          "/api/runs/{id}",
                                          "/api/runs/{id}/measurements",
                                          "/api/runs/{id}/t4",
                                          "/api/winners",
                                          "/api/best",
                                          "/api/runs/{id}/best_over_time",
                                          "/api/queue",
                                          "/api/runs/{id}/parameters",
                                          "/api/runs/{id}/predicted",
                                          "/api/runs/{id}/best.svg",
                                          "/api/runs/{id}/scatter.svg",
                                          "/api/runs/{id}/parameters.svg",
                                          "/api/contexts/{id}/history",
                                          "/api/contexts/{id}/history.svg"};
  const std::vector<std::string> names = {"limit", "offset", "context", "status", "q",     "sort",
                                          "order", "kernel", "device",  "t",      "limit", "id"};
  const std::vector<std::string> values = {"",
                                           "0",
                                           "-1",
                                           "1",
                                           "20",
                                           "1000",
                                           "1001",
                                           "abc",
                                           "1e9",
                                           "0x10",
                                           "99999999999999999999",
                                           "9223372036854775807",
                                           "-9223372036854775808",
                                           "%00",
                                           "%27%20OR%201%3D1%20--",
                                           "dedispersion_kernel",
                                           "time",
                                           "desc",
                                           "correct",
                                           "25000x2048",
                                           "NVIDIA%20RTX%20A4000",
                                           "%E2%9C%93",
                                           "%FF%FE",
                                           std::string(5000, 'a')};
  std::mt19937 rng(20261124);
  std::map<int, int> statuses;
  for (int i = 0; i < 1500; ++i) {
    std::string path = paths[rng() % paths.size()];
    if (const size_t at = path.find("{id}"); at != std::string::npos) {
      const std::vector<std::string> ids = {
          std::to_string(run), std::to_string(context), "0", "1", "999999", "99999999999999999999"};
      path.replace(at, 4, ids[rng() % ids.size()]);
    }
    const int n = static_cast<int>(rng() % 4);
    for (int q = 0; q < n; ++q)
      path += std::string(q == 0 ? "?" : "&") + names[rng() % names.size()] + "=" +
              values[rng() % values.size()];
    auto r = c.Get(path);
    ASSERT_TRUE(r) << "no answer (" << httplib::to_string(r.error()) << ") to " << path;
    ++statuses[r->status];
    ASSERT_TRUE(r->status == 200 || r->status == 400 || r->status == 404 || r->status == 414)
        << r->status << " " << path << "\n"
        << r->body.substr(0, 500);
    if (r->status != 200) {
      const auto answer = nlohmann::json::parse(r->body);
      EXPECT_FALSE(answer.value("error", "").empty()) << path;
      EXPECT_TRUE(answer.contains("field")) << path;
    } else if (path.find(".svg") != std::string::npos) {
      EXPECT_EQ(r->body.rfind("<svg", 0), 0u) << path;
    } else if (path.find("/t4") != std::string::npos) {
      EXPECT_EQ(nlohmann::json::parse(r->body)["metadata"]["gputune"]["kernel"],
                "dedispersion_kernel")
          << path;
    } else if (path.find("/header") != std::string::npos) {
      EXPECT_EQ(r->body.rfind("/* Tuned parameters of the kernel 'dedispersion_kernel'", 0), 0u)
          << path;
    } else {
      EXPECT_TRUE(nlohmann::json::accept(r->body)) << path;
    }
  }
  serving.reset();
  EXPECT_GT(statuses[200], 300);  // the real data is reached, not only refusals
  EXPECT_GT(statuses[400], 100);
  EXPECT_GT(statuses[404], 50);
}

// Runtime selection on the kernel page (GET /api/kernels/{id|name}/select): select::Table::choose
// over the server's database, with how the answer was obtained; a bad or unknown input is a 4xx
// with select's message; a new measurement is seen (the table is rebuilt when the database's
// measurements_version moves, not on every request).
TEST(Api, SelectSaysWhatItChoseAndHowOrWhyNot) {
  test::TempDir dir;
  const std::string db_path = (dir / "g.db").string();
  db::Store store(db_path);
  const std::int64_t run =
      store.begin_run(store.upsert_job("vector_add", "v.json",
                                       test::read_file(test::examples_dir() / "vector_add.json")),
                      "brute_force", 9);
  const std::int64_t k = store.upsert_kernel("vector_add", "abc123", "source");
  auto context = [&](const std::string& device, int cc, const std::string& label, long size) {
    return test::vector_add_context(store, k, device, cc, 100, label, size);
  };
  auto measure = [&](std::int64_t ctx, int block, int tile, double ms) {
    test::vector_add_measurement(store, run, k, ctx, block, tile, ms);
  };
  const auto h1 = context("NVIDIA H100", 9, "1M", 1 << 20),
             h16 = context("NVIDIA H100", 9, "16M", 1 << 24),
             h64 = context("NVIDIA H100", 9, "64M", 1 << 26),
             a1 = context("NVIDIA RTX A4000", 8, "1M", 1 << 20);
  measure(h1, 128, 1, 1.0), measure(h1, 256, 2, 1.2);
  measure(h16, 128, 1, 12), measure(h16, 256, 2, 10);
  measure(h64, 256, 2, 40), measure(h64, 512, 4, 35);
  measure(a1, 64, 1, 3.0), measure(a1, 128, 1, 3.5);

  Serving serving(db_path);
  httplib::Client c("127.0.0.1", serving.port());
  auto get = [&](const std::string& path) {
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    return std::make_pair(r ? r->status : 0, r ? nlohmann::json::parse(r->body) : nlohmann::json());
  };
  const std::string base = "/api/kernels/" + std::to_string(k) + "/select";
  // Measured: the winner of that device and size, with its launch geometry.
  auto [status, a] = get(base + "?device=NVIDIA%20H100&size=16777216");
  ASSERT_EQ(status, 200) << a.dump();
  EXPECT_EQ(a["how"], "measured");
  EXPECT_EQ(a["config"], "256,2");
  EXPECT_EQ(a["params"], nlohmann::json::parse(R"([{"name": "block_size_x", "value": "256"},
                                                    {"name": "tile_size_x", "value": "2"}])"));
  EXPECT_EQ(a["from"], nlohmann::json::parse(R"(["16M"])"));
  EXPECT_DOUBLE_EQ(a["measured_ms"].get<double>(), 10.0);
  EXPECT_EQ(a["block"], nlohmann::json::parse("[256, 1, 1]"));
  EXPECT_EQ(a["grid"], nlohmann::json::parse("[32768, 1, 1]"));  // 2^24 / (256 * 2)
  EXPECT_NE(a["explain"].get<std::string>().find("measured (context 16M)"), std::string::npos);
  // Predicted: an untuned size (by name, and the device's name in another case).
  std::tie(status, a) = get("/api/kernels/vector_add/select?device=nvidia%20h100&size=40000000");
  ASSERT_EQ(status, 200) << a.dump();
  EXPECT_NE(a["how"], "measured");
  EXPECT_FALSE(a["from"].empty());
  EXPECT_TRUE(a["expected"].is_object()) << a.dump();  // leave-one-out over the 3 contexts
  EXPECT_NE(a["explain"].get<std::string>().find("predicted"), std::string::npos);
  std::tie(status, a) = get(base + "?device=NVIDIA%20H100&size=60000000");
  ASSERT_EQ(status, 200) << a.dump();
  // Another device of a tuned architecture: the H100's contexts answer, and say so.
  std::tie(status, a) = get(base + "?device=NVIDIA%20GH200&arch=sm_90&size=1048576");
  ASSERT_EQ(status, 200) << a.dump();
  EXPECT_EQ(a["device"], "NVIDIA H100");
  EXPECT_EQ(a["from"], nlohmann::json::parse(R"(["1M on NVIDIA H100"])"));
  // Refusals: 4xx with select's message (or the parameter's), and the field.
  auto refused = [&](const std::string& path, int want, const std::string& says,
                     const std::string& field) {
    auto [st, body] = get(path);
    EXPECT_EQ(st, want) << path << " " << body.dump();
    EXPECT_NE(body.value("error", "").find(says), std::string::npos) << path << " " << body.dump();
    EXPECT_EQ(body.value("field", "?"), field) << path;
  };
  refused("/api/kernels/999999/select?device=NVIDIA%20H100&size=1", 404, "no kernel with id", "id");
  refused("/api/kernels/nosuch/select?device=NVIDIA%20H100&size=1", 404,
          "no kernel 'nosuch' in the daemon's database; it has: vector_add", "id");
  refused(base + "?device=NVIDIA%20T4&arch=sm_75&size=1048576", 404,
          "kernel 'vector_add' was not tuned on 'NVIDIA T4' nor on any sm_75 device; it was "
          "tuned on: NVIDIA H100 (sm_90), NVIDIA RTX A4000 (sm_80)",
          "device");
  refused(base + "?device=NVIDIA%20H100", 400, "size is required", "size");
  refused(base + "?size=1024", 400, "device is required", "device");
  refused(base + "?device=NVIDIA%20H100&size=1024,abc", 400, "'abc' is not a positive integer",
          "size");
  refused(base + "?device=NVIDIA%20H100&size=0", 400, "'0' is not a positive integer", "size");
  refused(base + "?device=NVIDIA%20H100&size=1024&value.alpha=x", 400,
          "value.alpha must be a number", "value.alpha");
  // A new winner is seen by the next request.
  measure(h16, 512, 4, 5.0);
  std::tie(status, a) = get(base + "?device=NVIDIA%20H100&size=16777216");
  ASSERT_EQ(status, 200) << a.dump();
  EXPECT_EQ(a["config"], "512,4");
  EXPECT_DOUBLE_EQ(a["measured_ms"].get<double>(), 5.0);
}

}  // namespace
}  // namespace gputune::web
