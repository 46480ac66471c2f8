// Page-load time of the dashboard's pages in headless Chromium: from navigation start until the
// page has fetched and drawn its data (the page sets window.gputuneLoadedMs). Median of 5 loads.
// Usage: dashboard_bench URL PATH...
#include <algorithm>
#include <cstdio>
#include <vector>

#include "webdriver.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: dashboard_bench URL PATH...\n");
    return 2;
  }
  if (auto why = gputune::test::browser_missing(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 3;
  }
  gputune::test::WebDriver wd;
  std::printf("%-40s %10s %10s\n", "page", "median ms", "max ms");
  for (int i = 2; i < argc; ++i) {
    std::vector<double> ms;
    for (int k = 0; k < 6; ++k) {
      wd.go(std::string(argv[1]) + argv[i]);
      if (!wd.wait_loaded(30)) {
        std::printf("%-40s did not load\n", argv[i]);
        break;
      }
      if (k > 0)
        ms.push_back(
            wd.script("return window.gputuneLoadedMs;").get<double>());  // first load warms up
    }
    if (ms.empty()) continue;
    std::sort(ms.begin(), ms.end());
    std::printf("%-40s %10.1f %10.1f\n", argv[i], ms[ms.size() / 2], ms.back());
  }
  return 0;
}
