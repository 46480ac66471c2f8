// Leave-one-out of runtime selection (issue #48): for each tuned context of a kernel on a device,
// hide it, select from the others, and report the selected configuration's measured time over
// the true winner's, for nearest, learned (decision tree) and "the largest input's winner".
// Reads gputune databases or decision files given as arguments; `--synthetic` adds the synthetic
// spaces of bench/synthetic_spaces.h (closed-form times: they test the rules, not a GPU).
// Prints Markdown.
#include <cstdio>
#include <iostream>
#include <string>

#include "bench/synthetic_spaces.h"
#include "select/select.h"

namespace {

using namespace gputune;

std::string ratio(const std::optional<double>& r) {
  if (!r) return "not measured";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", *r);
  return buf;
}

std::string figures(const select::LooFigures& f) {
  if (f.contexts == f.unknown) return "n/a";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f / %.3f", f.median, f.worst);
  std::string s = buf;
  if (f.unknown) s += " (" + std::to_string(f.unknown) + " unknown)";
  return s;
}

void report(const std::string& origin, const select::KernelTable& k, const select::DeviceTable& d) {
  std::cout << "\n### " << k.name << " on " << d.name << " (" << origin << ")\n\n";
  if (d.inputs.size() < 2) {
    std::cout << "One context: nothing to leave out.\n";
    return;
  }
  std::cout << "| hidden context | nearest | learned | largest input's winner |\n"
               "|---|---|---|---|\n";
  for (const auto& r : select::leave_one_out_rows(d))
    std::cout << "| " << r.label << " | " << r.nearest << ": " << ratio(r.nearest_ratio) << " | "
              << r.learned << ": " << ratio(r.learned_ratio) << " | " << r.largest << ": "
              << ratio(r.largest_ratio) << " |\n";
  const auto loo = select::leave_one_out(d);
  std::cout << "| **median / worst** | " << figures(loo->nearest) << " | " << figures(loo->learned)
            << " | " << figures(loo->largest) << " |\n\n"
            << "Rule exported for untuned inputs: **" << select::to_string(d.method) << "**.\n";
}

void report(const select::DecisionTable& t) {
  for (const auto& k : t.kernels)
    for (const auto& d : k.devices) report(t.origin, k, d);
}

}  // namespace

int main(int argc, char** argv) {
  bool synthetic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--synthetic") {
      synthetic = true;
      continue;
    }
    auto t = select::Table::open(a);
    if (!t) {
      std::cerr << "select_loo: " << t.error().message << "\n";
      return 2;
    }
    report(t->data());
  }
  if (synthetic) {
    struct Case {
      std::string name;
      std::vector<std::vector<std::int64_t>> sizes;
      bool second_irrelevant;
      double noise;
    };
    const std::vector<Case> cases = {
        {"1-D, 8 sizes 2^10..2^24 (powers of 4)",
         {{1 << 10}, {1 << 12}, {1 << 14}, {1 << 16}, {1 << 18}, {1 << 20}, {1 << 22}, {1 << 24}},
         true,
         0.0},
        {"1-D, odd sizes",
         {{1000}, {3000}, {7919}, {50000}, {123457}, {999983}, {4000037}},
         true,
         0.03},
        {"2-D, the best follows the first size only",
         {{1 << 8, 1 << 4},
          {1 << 9, 1 << 20},
          {1 << 16, 1 << 4},
          {1 << 17, 1 << 20},
          {1 << 24, 1 << 4},
          {1 << 25, 1 << 20}},
         true,
         0.0},
        {"2-D, both sizes matter",
         {{1 << 10, 1 << 4},
          {1 << 10, 1 << 12},
          {1 << 14, 1 << 8},
          {1 << 18, 1 << 4},
          {1 << 18, 1 << 16},
          {1 << 22, 1 << 10}},
         false,
         0.02},
    };
    for (const Case& c : cases) {
      select::KernelTable k =
          bench::synthetic_kernel(bench::synthetic_device(c.sizes, c.second_irrelevant, c.noise));
      report("synthetic: " + c.name, k, k.devices.front());
    }
  }
  return 0;
}
