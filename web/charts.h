/** \file web/charts.h
 * Owns: SVG charts drawn by the server (no JavaScript chart library, no CDN): step lines, scatter
 * plots with a y = x reference, grouped bars; times on a log axis where tuning spans decades (a
 * default at 85 ms, a best at 5.6 ms), labelled with their units. Every label is XML-escaped.
 * Consumes: plain series. Produces: SVG text. Must not: query the database. */
#pragma once

#include <string>
#include <vector>

namespace gputune::web {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// How a chart's values are drawn: plain numbers on a linear axis from zero, times in ms on a
/// linear axis from zero, or times in ms on a log axis (ticks at 1, 2, 5 x 10^k; a range narrower
/// than that gets round linear steps). Time ticks and tooltips carry their unit ("500 µs",
/// "20 ms"). A log axis with a value <= 0 falls back to a linear one.
enum class Axis { linear, ms, log_ms };

std::string xml_escape(const std::string& s);
/// A time given in ms with `digits` significant digits (trailing zeros dropped) in the unit that
/// keeps it between 1 and 1000: "85.5 ms", "5.59 ms", "512 µs", "1.5 s"; "-" when not finite.
std::string format_ms(double ms, int digits = 3);

/// Lines (step = true: each point holds until the next, as a best-so-far curve).
std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& x_label, const std::string& y_label, bool step,
                       Axis y = Axis::linear);
/// Points, with the y = x diagonal when `diagonal`; `axes` applies to both axes.
std::string scatter_chart(const std::string& title, const Series& points,
                          const std::string& x_label, const std::string& y_label, bool diagonal,
                          Axis axes = Axis::linear);
struct BarGroup {
  std::string name;                 ///< parameter
  std::vector<std::string> labels;  ///< values
  std::vector<double> values;       ///< e.g. best time per value
};
/// `y` linear or ms: bars stand on zero.
std::string bar_chart(const std::string& title, const std::vector<BarGroup>& groups,
                      const std::string& y_label, Axis y = Axis::linear);
/// A chart-sized SVG saying there is nothing to draw, and why.
std::string empty_chart(const std::string& title, const std::string& why);

}  // namespace gputune::web
