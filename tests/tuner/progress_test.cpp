#include "tuner/common/progress.h"

#include <gtest/gtest.h>

namespace gputune::tuner {
namespace {

TEST(Progress, LineShowsCountsBestAndEta) {
  std::string l = Progress::format("measure", 25, 100, 3, 1.5, 10.0);
  EXPECT_NE(l.find("[25/100]"), std::string::npos) << l;
  EXPECT_NE(l.find("failures 3"), std::string::npos) << l;
  EXPECT_NE(l.find("best 1.5 ms"), std::string::npos) << l;
  EXPECT_NE(l.find("ETA 0:30"), std::string::npos) << l;  // 10 s for 25 -> 30 s for the other 75
  EXPECT_EQ(Progress::format("x", 100, 100, 0, std::nullopt, 5).find("ETA"), std::string::npos);
}

}  // namespace
}  // namespace gputune::tuner
