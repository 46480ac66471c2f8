#include "tuner/run/run_report.h"

#include <iomanip>
#include <ostream>
#include <sstream>

namespace gputune::tuner {

void print_report(const RunReport& r, std::ostream& out) {
  if (r.unchanged) {
    out << r.message << "\n";
    return;
  }
  out << "space " << r.space_size << " configurations, planned " << r.planned << ", compiled "
      << r.compiled_ok << " (" << r.cached << " from cache), compile failures " << r.compile_failed
      << "\n";
  if (!r.best.empty()) {
    out << std::left << std::setw(14) << "context" << std::setw(12) << "time (ms)" << std::setw(11)
        << "GFLOP/s" << std::setw(9) << "GB/s" << std::setw(6) << "regs" << std::setw(6) << "occ"
        << std::setw(9) << "speedup"
        << "configuration\n";
    for (auto& b : r.best) {
      auto opt = [](const std::optional<double>& v) {
        std::ostringstream s;
        if (v)
          s << std::fixed << std::setprecision(1) << *v;
        else
          s << "-";
        return s.str();
      };
      std::ostringstream t, occ, sp;
      t << std::setprecision(4) << b.time_ms;
      occ << std::fixed << std::setprecision(2) << b.occupancy;
      if (b.default_ms)
        sp << std::fixed << std::setprecision(2) << *b.default_ms / b.time_ms << "x";
      else
        sp << "-";
      out << std::left << std::setw(14) << b.context << std::setw(12) << t.str() << std::setw(11)
          << opt(b.gflops) << std::setw(9) << opt(b.gbps) << std::setw(6) << b.registers
          << std::setw(6) << occ.str() << std::setw(9) << sp.str() << b.params_json
          << (b.provisional ? "  (provisional: the fastest first pass, not re-measured)" : "")
          << "\n";
    }
  }
  out << r.message << "\n";
}

}  // namespace gputune::tuner
