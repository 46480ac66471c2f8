#include "web/server.h"

#include <gtest/gtest.h>

#include "web/charts.h"

namespace gputune::web {
namespace {

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

}  // namespace
}  // namespace gputune::web
