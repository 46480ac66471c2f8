#include "db/tuned_header.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace gputune::db {

using nlohmann::json;

std::string macro_suffix(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c))
      out += static_cast<char>(c);
    else if (!out.empty() && out.back() != '_')
      out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "_" : out;
}

namespace {

/// A configuration for the header and, in words, how good it was measured to be.
struct Pick {
  json params;
  std::string why;
};

std::string percent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", (ratio - 1) * 100);
  return buf;
}

std::string ms(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", t);
  return buf;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

/// `s` inside a /* */ comment: a "*/" in a label or name would end it early.
std::string in_comment(std::string s) {
  for (size_t at; (at = s.find("*/")) != std::string::npos;) s.replace(at, 2, "* /");
  return s;
}

/// The macro text of a parameter value, as gputune passes it to the compiler (-Dname=value).
std::string value_text(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

/// The fastest correct time of each configuration measured in a context (over all runs).
struct Measured {
  std::map<std::string, double> best_ms;  ///< config key -> ms
  std::map<std::string, std::string> params_json;
};

Measured measured_in(Store& store, std::int64_t context_id) {
  // Grouped by SQLite over the context's covering index (schema 11): reading every row of a
  // context of 75,000 measurements (samples, logs) made a header take 1.5 to 4 s, rebuilt by the
  // daemon whenever a worker stored a measurement (bench/results/load-*.md).
  Statement s(store.db(),
              "SELECT v.config_key, t.best, v.params FROM (SELECT variant_id, min(time_ms) AS "
              "best FROM correct_measurements WHERE context_id=?1 GROUP BY variant_id) t "
              "JOIN variants v ON v.id=t.variant_id");
  s.bind(1, context_id);
  Measured m;
  while (s.step()) {
    auto [it, fresh] = m.best_ms.emplace(s.text(0), s.real(1));
    if (!fresh) it->second = std::min(it->second, s.real(1));
    m.params_json.emplace(s.text(0), s.text(2));
  }
  return m;
}

/// The configuration closest to the best in all of `contexts`: the smallest worst slowdown against
/// each context's winner among those measured in every one (the most contexts, when none was
/// measured in all), ties to the smallest total.
Pick closest_everywhere(const std::vector<const WinnerRow*>& contexts,
                        const std::map<std::int64_t, Measured>& measured) {
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, std::string> params;
  for (const WinnerRow* w : contexts)
    for (const auto& [key, t] : measured.at(w->context_id).best_ms) {
      ratios[key].push_back(w->time_ms > 0 ? t / w->time_ms : 1.0);
      params.emplace(key, measured.at(w->context_id).params_json.at(key));
    }
  size_t coverage = 0;
  for (const auto& [key, r] : ratios) coverage = std::max(coverage, r.size());
  std::string best;
  double best_worst = 0, best_sum = 0;
  for (const auto& [key, r] : ratios) {
    if (r.size() != coverage) continue;
    const double worst = *std::max_element(r.begin(), r.end());
    double sum = 0;
    for (double x : r) sum += x;
    if (best.empty() || worst < best_worst || (worst == best_worst && sum < best_sum))
      best = key, best_worst = worst, best_sum = sum;
  }
  const bool one_device = std::all_of(contexts.begin(), contexts.end(), [&](const WinnerRow* w) {
    return w->device == contexts.front()->device;
  });
  std::vector<std::string> labels;
  for (const WinnerRow* w : contexts)
    labels.push_back(one_device ? w->context_label : w->context_label + " on " + w->device);
  Pick p{json::parse(params.at(best)), ""};
  if (coverage == contexts.size())
    p.why = best_worst == 1.0
                ? "the fastest in every context (" + joined(labels) + ")"
                : "at most " + percent(best_worst) + " slower than the fastest in each context (" +
                      joined(labels) + ")";
  else
    p.why = "no configuration was measured in all of " + joined(labels) + ": this one, in " +
            std::to_string(coverage) + " of them, is at most " + percent(best_worst) +
            " slower than the fastest there";
  return p;
}

/// `directive` (#if ..., #elif ..., #else), then the pick's reason and a guarded #define each.
void emit(std::ostringstream& out, const std::string& directive, const Pick& p) {
  out << directive << "\n/* " << in_comment(p.why) << " */\n";
  for (const auto& [name, value] : p.params.items())
    out << "#ifndef " << name << "\n#define " << name << " " << value_text(value) << "\n#endif\n";
}

}  // namespace

std::string tuned_header(Store& store, const std::string& kernel, const HeaderOptions& o) {
  std::vector<WinnerRow> all = store.winners(kernel, o.context, o.device);
  if (all.empty()) {
    std::string why = "no winner stored for kernel '" + kernel + "'";
    if (!o.context.empty()) why += " in context '" + o.context + "'";
    if (!o.device.empty()) why += " on device '" + o.device + "'";
    const auto contexts = store.contexts(kernel);
    if (!contexts.empty()) {
      why += "; its contexts are:";
      for (const auto& c : contexts) why += " " + c.label + " (" + c.device + ")";
    }
    throw std::invalid_argument(why);
  }
  // The newest version of the source: the one whose winner was stored last.
  const WinnerRow& newest = *std::max_element(
      all.begin(), all.end(),
      [](const WinnerRow& a, const WinnerRow& b) { return a.measurement_id < b.measurement_id; });
  const std::string hash = newest.kernel_hash;
  size_t older = 0;
  // Per device and context label, the latest winner (a label may have contexts of several
  // toolkits or drivers).
  std::map<std::string, std::map<std::string, const WinnerRow*>> by_device;
  for (const WinnerRow& w : all) {
    if (w.kernel_hash != hash) {
      ++older;
      continue;
    }
    const WinnerRow*& slot = by_device[w.device][w.context_label];
    if (!slot || slot->measurement_id < w.measurement_id) slot = &w;
  }
  std::map<std::int64_t, Measured> measured;
  std::vector<const WinnerRow*> everywhere;
  for (const auto& [device, contexts] : by_device)
    for (const auto& [label, w] : contexts) {
      measured.emplace(w->context_id, measured_in(store, w->context_id));
      everywhere.push_back(w);
    }

  // Macro names, distinct even where two names differ only in punctuation.
  std::set<std::string> taken;
  auto unique = [&taken](std::string m) {
    const std::string base = m;
    for (int i = 2; !taken.insert(m).second; ++i) m = base + "_" + std::to_string(i);
    return m;
  };
  std::map<std::string, std::string> device_macro;
  std::map<std::string, std::string> context_macro;
  for (const auto& [device, contexts] : by_device) {
    device_macro[device] = unique("GPUTUNE_TARGET_" + macro_suffix(device));
    for (const auto& [label, w] : contexts)
      if (!context_macro.count(label))
        context_macro[label] = unique("GPUTUNE_CONTEXT_" + macro_suffix(label));
  }

  std::ostringstream head;  // the comment at the top (names from the database made safe in it)
  head << "Tuned parameters of the kernel '" << newest.kernel << "' (source " << hash.substr(0, 12)
       << "),\n * from gputune's stored winners" << (o.source.empty() ? "" : " in " + o.source)
       << (o.generated.empty() ? "" : ", " + o.generated) << ". Written by\n * `gputune best "
       << kernel << " --header`: do not edit; tune again and rewrite it.\n *\n"
       << " * Pick the device and the problem size when compiling, host code and kernel alike:\n";
  for (const auto& [device, contexts] : by_device) {
    head << " *   -D" << device_macro[device] << "  (" << device << ")\n";
    for (const auto& [label, w] : contexts)
      head << " *       -D" << context_macro[label] << "  (best " << ms(w->time_ms) << ")\n";
  }
  head << " * A device without a context gets the configuration closest to the best in all its\n"
          " * contexts; no device target gets the one closest to the best in every context stored."
          "\n * A parameter defined already (-Dname=value, as a tuner passes it) is left as it is.";
  if (older)
    head << "\n * Left out: " << older << " context(s) of older versions of the kernel's source.";
  std::ostringstream out;
  out << "/* " << in_comment(head.str()) << " */\n#pragma once\n\n";

  bool first = true;
  for (const auto& [device, contexts] : by_device)
    for (const auto& [label, w] : contexts) {
      const size_t n = measured.at(w->context_id).best_ms.size();
      emit(out,
           std::string(first ? "#if" : "#elif") + " defined(" + device_macro[device] +
               ") && defined(" + context_macro[label] + ")",
           {json::parse(w->params_json), label + " on " + device + ": " + ms(w->time_ms) +
                                             ", the fastest of " + std::to_string(n) +
                                             " configuration(s) measured (run " +
                                             std::to_string(w->run_id) + ")"});
      first = false;
    }
  for (const auto& [device, contexts] : by_device) {
    std::vector<const WinnerRow*> list;
    for (const auto& [label, w] : contexts) list.push_back(w);
    emit(out, "#elif defined(" + device_macro[device] + ")", closest_everywhere(list, measured));
  }
  Pick fallback = closest_everywhere(everywhere, measured);
  fallback.why = "no GPUTUNE_TARGET_ given: " + fallback.why;
  emit(out, "#else", fallback);
  out << "#endif\n";
  return out.str();
}

}  // namespace gputune::db
