#include "web/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gputune::web {

namespace {

constexpr double W = 640, H = 320, L = 70, R = 20, T = 36, B = 50;
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                         "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

std::string num(double v) {
  char b[32];
  if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5))
    std::snprintf(b, sizeof b, "%.2e", v);
  else
    std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

struct Frame {
  double x0, x1, y0, y1;
  double px(double x) const { return L + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - L - R); }
  double py(double y) const { return H - B - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (H - T - B); }
};

std::string header(const std::string& title) {
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << W << " " << H << "\" width=\""
    << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"11\">"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    << "<text x=\"" << W / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">"
    << xml_escape(title) << "</text>";
  return s.str();
}

std::string axes(const Frame& f, const std::string& xl, const std::string& yl) {
  std::ostringstream s;
  s << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
    << "\" stroke=\"#333\"/>"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B
    << "\" stroke=\"#333\"/>";
  for (int i = 0; i <= 4; ++i) {
    double yv = f.y0 + (f.y1 - f.y0) * i / 4, xv = f.x0 + (f.x1 - f.x0) * i / 4;
    s << "<text x=\"" << L - 6 << "\" y=\"" << f.py(yv) + 4 << "\" text-anchor=\"end\">" << num(yv)
      << "</text>"
      << "<line x1=\"" << L << "\" y1=\"" << f.py(yv) << "\" x2=\"" << W - R << "\" y2=\""
      << f.py(yv) << "\" stroke=\"#eee\"/>"
      << "<text x=\"" << f.px(xv) << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">"
      << num(xv) << "</text>";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 10 << "\" text-anchor=\"middle\">"
    << xml_escape(xl) << "</text>"
    << "<text transform=\"translate(14," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(yl) << "</text>";
  return s.str();
}

Frame frame_of(const std::vector<const Series*>& ss, bool zero_y) {
  Frame f{1e300, -1e300, 1e300, -1e300};
  for (auto* s : ss)
    for (size_t i = 0; i < s->x.size(); ++i) {
      f.x0 = std::min(f.x0, s->x[i]), f.x1 = std::max(f.x1, s->x[i]);
      f.y0 = std::min(f.y0, s->y[i]), f.y1 = std::max(f.y1, s->y[i]);
    }
  if (zero_y) f.y0 = std::min(0.0, f.y0);
  if (f.y1 == f.y0) f.y1 = f.y0 + 1;
  if (f.x1 == f.x0) f.x1 = f.x0 + 1;
  f.y1 += (f.y1 - f.y0) * 0.05;
  return f;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string empty_chart(const std::string& title, const std::string& why) {
  return header(title) + "<text x=\"" + std::to_string(W / 2) + "\" y=\"" + std::to_string(H / 2) +
         "\" text-anchor=\"middle\" fill=\"#666\">" + xml_escape(why) + "</text></svg>";
}

std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& xl, const std::string& yl, bool step) {
  std::vector<const Series*> ss;
  for (auto& s : series)
    if (!s.x.empty()) ss.push_back(&s);
  if (ss.empty()) return empty_chart(title, "no data yet");
  Frame f = frame_of(ss, true);
  std::ostringstream o;
  o << header(title) << axes(f, xl, yl);
  for (size_t k = 0; k < ss.size(); ++k) {
    const Series& s = *ss[k];
    std::ostringstream d;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (i == 0)
        d << "M" << f.px(s.x[i]) << "," << f.py(s.y[i]);
      else if (step)
        d << " H" << f.px(s.x[i]) << " V" << f.py(s.y[i]);
      else
        d << " L" << f.px(s.x[i]) << "," << f.py(s.y[i]);
    }
    const char* c = kColors[k % 8];
    o << "<path d=\"" << d.str() << "\" fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\"/>";
    for (size_t i = 0; i < s.x.size(); ++i)
      o << "<circle cx=\"" << f.px(s.x[i]) << "\" cy=\"" << f.py(s.y[i]) << "\" r=\"2.5\" fill=\""
        << c << "\"><title>" << xml_escape(s.name) << ": " << num(s.y[i]) << "</title></circle>";
    o << "<text x=\"" << W - R - 4 << "\" y=\"" << T + 14 * (k + 1)
      << "\" text-anchor=\"end\" fill=\"" << c << "\">" << xml_escape(s.name) << "</text>";
  }
  return o.str() + "</svg>";
}

std::string scatter_chart(const std::string& title, const Series& pts, const std::string& xl,
                          const std::string& yl, bool diagonal) {
  if (pts.x.empty()) return empty_chart(title, "no data");
  Frame f = frame_of({&pts}, true);
  if (diagonal) {
    double hi = std::max(f.x1, f.y1);
    f.x0 = f.y0 = 0, f.x1 = f.y1 = hi;
  }
  std::ostringstream o;
  o << header(title) << axes(f, xl, yl);
  if (diagonal)
    o << "<line x1=\"" << f.px(0) << "\" y1=\"" << f.py(0) << "\" x2=\"" << f.px(f.x1) << "\" y2=\""
      << f.py(f.y1) << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>";
  for (size_t i = 0; i < pts.x.size(); ++i)
    o << "<circle cx=\"" << f.px(pts.x[i]) << "\" cy=\"" << f.py(pts.y[i])
      << "\" r=\"2.5\" fill=\"#1f77b4\" fill-opacity=\"0.6\"/>";
  return o.str() + "</svg>";
}

std::string bar_chart(const std::string& title, const std::vector<BarGroup>& groups,
                      const std::string& yl) {
  size_t bars = 0;
  double hi = 0;
  for (auto& g : groups) {
    bars += g.values.size();
    for (double v : g.values) hi = std::max(hi, v);
  }
  if (bars == 0) return empty_chart(title, "no correct measurements yet");
  Frame f{0, 1, 0, hi * 1.05};
  std::ostringstream o;
  o << header(title);
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
    << "\" stroke=\"#333\"/>";
  for (int i = 0; i <= 4; ++i) {
    double yv = f.y1 * i / 4;
    o << "<text x=\"" << L - 6 << "\" y=\"" << f.py(yv) + 4 << "\" text-anchor=\"end\">" << num(yv)
      << "</text>";
  }
  o << "<text transform=\"translate(14," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(yl) << "</text>";
  double slot = (W - L - R) / static_cast<double>(bars + groups.size());
  double x = L + slot / 2;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    double gx = x;
    for (size_t i = 0; i < g.values.size(); ++i, x += slot) {
      double y = f.py(g.values[i]);
      o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << slot * 0.8 << "\" height=\""
        << H - B - y << "\" fill=\"" << kColors[gi % 8] << "\"><title>" << xml_escape(g.name) << "="
        << xml_escape(g.labels[i]) << ": " << num(g.values[i]) << "</title></rect>"
        << "<text x=\"" << x + slot * 0.4 << "\" y=\"" << H - B + 12
        << "\" text-anchor=\"middle\" font-size=\"9\">" << xml_escape(g.labels[i]) << "</text>";
    }
    o << "<text x=\"" << (gx + x - slot * 0.2) / 2 << "\" y=\"" << H - B + 28
      << "\" text-anchor=\"middle\" fill=\"" << kColors[gi % 8] << "\">" << xml_escape(g.name)
      << "</text>";
    x += slot;
  }
  return o.str() + "</svg>";
}

}  // namespace gputune::web
