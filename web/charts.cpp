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
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e7 || a < 1e-3)
    std::snprintf(b, sizeof b, "%.3g", v);
  else if (a >= 1e3 && v == std::round(v))
    std::snprintf(b, sizeof b, "%.0f", v);  // 11130, not 1.113e+04
  else
    std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

/// Tick values at 1, 2 or 5 x 10^k apart, about `count` of them, within [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return out;
}

/// The values 1, 2, 5 x 10^k within [lo, hi] (lo > 0), ascending.
std::vector<double> values_125(double lo, double hi) {
  std::vector<double> out;
  for (int d = static_cast<int>(std::floor(std::log10(lo))) - 1;
       d <= static_cast<int>(std::ceil(std::log10(hi))); ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, d);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
    }
  return out;
}
double down_125(double v) {
  const double mag = std::pow(10, std::floor(std::log10(v)));
  for (double m : {5.0, 2.0, 1.0})
    if (m * mag <= v * (1 + 1e-9)) return m * mag;
  return mag;
}
double up_125(double v) {
  const double mag = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= v * (1 - 1e-9)) return m * mag;
  return 10 * mag;
}

/// A log axis's range for data in [lo, hi] (0 < lo): out to the nearest 1, 2, 5 x 10^k on each
/// side when that gives 4 ticks or more, else (a range within a factor of about 4) out to round
/// linear steps.
void log_range(double& lo, double& hi) {
  if (hi < lo * 1.01) lo /= 2, hi *= 2;  // one value: a range around it
  if (values_125(down_125(lo), up_125(hi)).size() >= 4) {
    lo = down_125(lo), hi = up_125(hi);
    return;
  }
  const std::vector<double> t = nice_ticks(lo, hi, 4);
  const double step = t.size() > 1 ? t[1] - t[0] : hi - lo;
  const double l = std::floor(lo / step + 1e-9) * step;
  if (l > 0) lo = l;
  hi = std::ceil(hi / step - 1e-9) * step;
}

/// A log axis's ticks within [lo, hi]: 1, 2, 5 x 10^k, only the powers of ten when that is more
/// than 10 ticks, and round linear steps when it is fewer than 4.
std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> v = values_125(lo, hi);
  if (v.size() > 10) {
    std::vector<double> decades;
    for (double x : v)
      if (std::fabs(x / std::pow(10, std::round(std::log10(x))) - 1) < 1e-6) decades.push_back(x);
    return decades;
  }
  if (v.size() >= 4) return v;
  v.clear();
  for (double x : nice_ticks(lo, hi, 5))
    if (x > 0) v.push_back(x);
  return v;
}

/// A value on an axis, in the axis's unit.
std::string label(double v, Axis a) { return a == Axis::linear ? num(v) : format_ms(v, 4); }

struct Frame {
  double x0, x1, y0, y1;
  Axis xa = Axis::linear, ya = Axis::linear;
  static double t(double v, Axis a) { return a == Axis::log_ms ? std::log10(v) : v; }
  double px(double x) const {
    const double a = t(x0, xa), b = t(x1, xa);
    return L + (b > a ? (t(x, xa) - a) / (b - a) : 0.5) * (W - L - R);
  }
  double py(double y) const {
    const double a = t(y0, ya), b = t(y1, ya);
    return H - B - (b > a ? (t(y, ya) - a) / (b - a) : 0.5) * (H - T - B);
  }
  std::vector<double> x_ticks() const {
    return xa == Axis::log_ms ? log_ticks(x0, x1) : nice_ticks(x0, x1, 6);
  }
  std::vector<double> y_ticks() const {
    return ya == Axis::log_ms ? log_ticks(y0, y1) : nice_ticks(y0, y1, 5);
  }
};

std::string header(const std::string& title, double width = W, double height = H) {
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << width << " " << height
    << "\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    << "<text x=\"" << width / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">"
    << xml_escape(title) << "</text>";
  return s.str();
}

/// The y axis's labels and grid lines, at nice values; a log axis of up to three decades has
/// fainter lines at the other integers x 10^k (6, 7, 8, 9 ms between 5 and 10 ms).
std::string y_ticks(const Frame& f, double right) {
  std::ostringstream s;
  if (f.ya == Axis::log_ms && f.y1 <= f.y0 * 1001) {
    const std::vector<double> major = f.y_ticks();
    for (int d = static_cast<int>(std::floor(std::log10(f.y0)));
         d <= static_cast<int>(std::ceil(std::log10(f.y1))); ++d)
      for (int m = 1; m <= 9; ++m) {
        const double v = m * std::pow(10.0, d);
        if (v < f.y0 * (1 - 1e-9) || v > f.y1 * (1 + 1e-9)) continue;
        if (std::any_of(major.begin(), major.end(),
                        [&](double t) { return std::fabs(t - v) < v * 1e-6; }))
          continue;
        s << "<line x1=\"" << L << "\" y1=\"" << f.py(v) << "\" x2=\"" << right << "\" y2=\""
          << f.py(v) << "\" stroke=\"#f4f4f4\"/>";
      }
  }
  for (double yv : f.y_ticks())
    s << "<text class=\"tick-y\" x=\"" << L - 6 << "\" y=\"" << f.py(yv) + 4
      << "\" text-anchor=\"end\">" << xml_escape(label(yv, f.ya)) << "</text>"
      << "<line x1=\"" << L << "\" y1=\"" << f.py(yv) << "\" x2=\"" << right << "\" y2=\""
      << f.py(yv) << "\" stroke=\"#eee\"/>";
  return s.str();
}

std::string axes(const Frame& f, const std::string& xl, const std::string& yl) {
  std::ostringstream s;
  s << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
    << "\" stroke=\"#333\"/>"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B
    << "\" stroke=\"#333\"/>";
  s << y_ticks(f, W - R);
  for (double xv : f.x_ticks())
    s << "<text class=\"tick-x\" x=\"" << f.px(xv) << "\" y=\"" << H - B + 16
      << "\" text-anchor=\"middle\">" << xml_escape(label(xv, f.xa)) << "</text>";
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 10 << "\" text-anchor=\"middle\">"
    << xml_escape(xl) << "</text>"
    << "<text transform=\"translate(14," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(yl) << "</text>";
  return s.str();
}

/// The frame around the series: a log axis (where asked and every value is positive) spans round
/// values around the data; a linear one starts at zero (y when zero_y) with 5% headroom.
Frame frame_of(const std::vector<const Series*>& ss, bool zero_y, Axis xa = Axis::linear,
               Axis ya = Axis::linear) {
  Frame f{1e300, -1e300, 1e300, -1e300, xa, ya};
  for (auto* s : ss)
    for (size_t i = 0; i < s->x.size(); ++i) {
      f.x0 = std::min(f.x0, s->x[i]), f.x1 = std::max(f.x1, s->x[i]);
      f.y0 = std::min(f.y0, s->y[i]), f.y1 = std::max(f.y1, s->y[i]);
    }
  if (f.xa == Axis::log_ms && !(f.x0 > 0)) f.xa = Axis::ms;
  if (f.ya == Axis::log_ms && !(f.y0 > 0)) f.ya = Axis::ms;
  if (f.ya == Axis::log_ms) {
    log_range(f.y0, f.y1);
  } else {
    if (zero_y) f.y0 = std::min(0.0, f.y0);
    if (f.y1 == f.y0) f.y1 = f.y0 + 1;
    f.y1 += (f.y1 - f.y0) * 0.05;
  }
  if (f.xa == Axis::log_ms)
    log_range(f.x0, f.x1);
  else if (f.x1 == f.x0)
    f.x1 = f.x0 + 1;
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

std::string format_ms(double ms, int digits) {
  if (!std::isfinite(ms)) return "-";
  if (ms == 0) return "0 ms";
  // Rounded first, so that 999.96 ms is "1 s", not "1000 ms".
  const double a = std::fabs(ms);
  const double mag = std::floor(std::log10(a));
  const double scale = std::pow(10, mag - digits + 1);
  const double r = std::round(a / scale) * scale;
  double v = r;
  const char* unit = "ms";
  if (r >= 1000)
    v = r / 1000, unit = "s";
  else if (r < 1e-3)
    v = r * 1e6, unit = "ns";
  else if (r < 1)
    v = r * 1e3, unit = "\u00b5s";
  const int decimals = std::max(0, digits - 1 - static_cast<int>(std::floor(std::log10(v) + 1e-9)));
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  std::string out = b;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return (ms < 0 ? "-" : "") + out + " " + unit;
}

std::string empty_chart(const std::string& title, const std::string& why) {
  return header(title) + "<text x=\"" + std::to_string(W / 2) + "\" y=\"" + std::to_string(H / 2) +
         "\" text-anchor=\"middle\" fill=\"#666\">" + xml_escape(why) + "</text></svg>";
}

std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& xl, const std::string& yl, bool step, Axis y) {
  std::vector<const Series*> ss;
  for (auto& s : series)
    if (!s.x.empty()) ss.push_back(&s);
  if (ss.empty()) return empty_chart(title, "no data yet");
  Frame f = frame_of(ss, true, Axis::linear, y);
  // Headroom for the legend (one row of 14 px per series, top right): no line or point runs
  // under a name (two contexts ending at the same time drew "16M" over the lines). On a log
  // axis, the same in log space.
  double top = f.y0;
  for (auto* s : ss) top = std::max(top, *std::max_element(s->y.begin(), s->y.end()));
  const double plot = H - T - B, legend = 14.0 * static_cast<double>(ss.size()) + 6;
  if (top > f.y0 && legend < plot * 0.6) {  // up to 9 series; the palette has 8 colours
    const double t0 = Frame::t(f.y0, f.ya), t1 = Frame::t(f.y1, f.ya), tt = Frame::t(top, f.ya);
    const double need = t0 + (tt - t0) * plot / (plot - legend);
    if (need > t1) f.y1 = f.ya == Axis::log_ms ? std::pow(10, need) : need;
  }
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
        << c << "\"><title>" << xml_escape(s.name) << ": " << xml_escape(label(s.y[i], y))
        << "</title></circle>";
    o << "<text x=\"" << W - R - 4 << "\" y=\"" << T + 14 * (k + 1)
      << "\" text-anchor=\"end\" fill=\"" << c << "\">" << xml_escape(s.name) << "</text>";
  }
  return o.str() + "</svg>";
}

std::string scatter_chart(const std::string& title, const Series& pts, const std::string& xl,
                          const std::string& yl, bool diagonal, Axis a) {
  if (pts.x.empty()) return empty_chart(title, "no data");
  Frame f = frame_of({&pts}, true, a, a);
  if (f.xa != f.ya) f = frame_of({&pts}, true, Axis::ms, Axis::ms);  // a value <= 0: both linear
  if (diagonal) {
    if (f.xa == Axis::log_ms) {
      f.x0 = f.y0 = std::min(f.x0, f.y0), f.x1 = f.y1 = std::max(f.x1, f.y1);
    } else {
      double hi = std::max(f.x1, f.y1);
      f.x0 = f.y0 = 0, f.x1 = f.y1 = hi;
    }
  }
  std::ostringstream o;
  o << header(title) << axes(f, xl, yl);
  if (diagonal)
    o << "<line x1=\"" << f.px(f.x0) << "\" y1=\"" << f.py(f.y0) << "\" x2=\"" << f.px(f.x1)
      << "\" y2=\"" << f.py(f.y1) << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>";
  for (size_t i = 0; i < pts.x.size(); ++i)
    o << "<circle cx=\"" << f.px(pts.x[i]) << "\" cy=\"" << f.py(pts.y[i])
      << "\" r=\"2.5\" fill=\"#1f77b4\" fill-opacity=\"0.6\"/>";
  return o.str() + "</svg>";
}

std::string bar_chart(const std::string& title, const std::vector<BarGroup>& groups,
                      const std::string& yl, Axis unit) {
  if (unit == Axis::log_ms) unit = Axis::ms;  // bars stand on zero
  size_t bars = 0;
  double hi = 0;
  for (auto& g : groups) {
    bars += g.values.size();
    for (double v : g.values) hi = std::max(hi, v);
  }
  if (bars == 0) return empty_chart(title, "no correct measurements yet");
  // Text widths, roughly: 5.5 px per character at the labels' 9 px, 6.6 at the names' 11 px.
  constexpr double kLabelChar = 5.5, kNameChar = 6.6, kMinSlot = 12, kMaxWidth = 1600;
  // Each group is as wide as its bars (a slot each, plus one between groups) or its name; the
  // chart widens to that, up to kMaxWidth, and narrower groups stretch to fill 640 px.
  std::vector<double> need(groups.size());
  double total = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const double n = static_cast<double>(groups[gi].values.size());
    need[gi] =
        std::max((n + 1) * kMinSlot, static_cast<double>(groups[gi].name.size()) * kNameChar + 10);
    total += need[gi];
  }
  const double width = std::clamp(L + R + total, W, kMaxWidth);
  const double scale = (width - L - R) / total;
  // Value labels stand upright when one is wider than its bar; when bars are narrower than the
  // labels' height, only every k-th is labelled.
  double label_px = 0, slot_min = 1e300;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (const auto& l : groups[gi].labels)
      label_px = std::max(label_px, static_cast<double>(l.size()) * kLabelChar);
    slot_min =
        std::min(slot_min, need[gi] * scale / static_cast<double>(groups[gi].values.size() + 1));
  }
  const bool upright = label_px > slot_min * 0.9;
  const size_t every = upright && slot_min < 10 ? static_cast<size_t>(std::ceil(10 / slot_min)) : 1;
  const double base = H - B;  // the bars' baseline
  const double labels_bottom = base + (upright ? label_px + 6 : 14);
  // Names that do not fit their group (only when the chart hit kMaxWidth) alternate two rows.
  bool stagger = false;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    stagger = stagger || static_cast<double>(groups[gi].name.size()) * kNameChar > need[gi] * scale;
  const double height = labels_bottom + 16 + (stagger ? 14 : 0) + 6;

  Frame f{0, 1, 0, hi * 1.05, Axis::linear, unit};
  std::ostringstream o;
  o << header(title, width, height) << y_ticks(f, width - R);
  o << "<line x1=\"" << L << "\" y1=\"" << base << "\" x2=\"" << width - R << "\" y2=\"" << base
    << "\" stroke=\"#333\"/>";
  o << "<text transform=\"translate(14," << (T + base) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(yl) << "</text>";
  double x = L;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    const double gw = need[gi] * scale;
    const double slot = gw / static_cast<double>(g.values.size() + 1);
    const char* color = kColors[gi % 8];
    for (size_t i = 0; i < g.values.size(); ++i) {
      const double bx = x + slot * (static_cast<double>(i) + 0.5), y = f.py(g.values[i]);
      const double cx = bx + slot * 0.4;
      o << "<rect x=\"" << bx << "\" y=\"" << y << "\" width=\"" << slot * 0.8 << "\" height=\""
        << base - y << "\" fill=\"" << color << "\"><title>" << xml_escape(g.name) << "="
        << xml_escape(g.labels[i]) << ": " << xml_escape(label(g.values[i], unit))
        << "</title></rect>";
      if (i % every != 0) continue;
      if (upright)
        o << "<text transform=\"translate(" << cx + 3 << "," << base + 4
          << ") rotate(-90)\" text-anchor=\"end\" font-size=\"9\">" << xml_escape(g.labels[i])
          << "</text>";
      else
        o << "<text x=\"" << cx << "\" y=\"" << base + 12
          << "\" text-anchor=\"middle\" font-size=\"9\">" << xml_escape(g.labels[i]) << "</text>";
    }
    o << "<text x=\"" << x + gw / 2 << "\" y=\""
      << labels_bottom + 12 + (stagger && gi % 2 ? 14 : 0) << "\" text-anchor=\"middle\" fill=\""
      << color << "\">" << xml_escape(g.name) << "</text>";
    x += gw;
  }
  return o.str() + "</svg>";
}

}  // namespace gputune::web
