/** \file web/charts.h
 * Owns: SVG charts drawn by the server (no JavaScript chart library, no CDN): step lines, scatter
 * plots with a y = x reference, grouped bars. Every label is XML-escaped.
 * Consumes: plain series. Produces: SVG text. Must not: query the database. */
#pragma once

#include <string>
#include <vector>

namespace gputune::web {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

std::string xml_escape(const std::string& s);

/// Lines (step = true: each point holds until the next, as a best-so-far curve).
std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& x_label, const std::string& y_label, bool step);
/// Points, with the y = x diagonal when `diagonal`.
std::string scatter_chart(const std::string& title, const Series& points,
                          const std::string& x_label, const std::string& y_label, bool diagonal);
struct BarGroup {
  std::string name;                 ///< parameter
  std::vector<std::string> labels;  ///< values
  std::vector<double> values;       ///< e.g. best time per value
};
std::string bar_chart(const std::string& title, const std::vector<BarGroup>& groups,
                      const std::string& y_label);
/// A chart-sized SVG saying there is nothing to draw, and why.
std::string empty_chart(const std::string& title, const std::string& why);

}  // namespace gputune::web
