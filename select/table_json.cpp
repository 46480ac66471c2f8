/** \file select/table_json.cpp
 * Owns: the decision file's JSON form, written by `gputune export --decisions` and read by
 * Table::open: {"format": "gputune-decisions", "version": 1, "kernels": [...]}; every field read
 * is checked, and an error names the field and the fix. */
#include <stdexcept>

#include "select/decision_table.h"

namespace gputune::select {

using nlohmann::json;

namespace {

json tree_json(const TreeNode& n) {
  if (n.leaf()) return {{"config", n.config}};
  return {{"dim", n.dim}, {"split", n.split}, {"lo", tree_json(*n.lo)}, {"hi", tree_json(*n.hi)}};
}

json figures_json(const LooFigures& f) {
  return {{"contexts", f.contexts},
          {"unknown", f.unknown},
          {"median", f.median},
          {"worst", f.worst},
          {"mean", f.mean}};
}

/// Reading, with the path of the field being read for errors.
struct Reader {
  std::string origin;
  [[noreturn]] void fail(const std::string& field, const std::string& problem,
                         const std::string& fix =
                             "write it again with `gputune export "
                             "--decisions`") const {
    throw std::invalid_argument(origin + ": field " + field + ": " + problem + ". Fix: " + fix +
                                ".");
  }
  const json& at(const json& j, const std::string& key, const std::string& field) const {
    if (!j.is_object()) fail(field, "is not an object");
    auto it = j.find(key);
    if (it == j.end()) fail(field + "." + key, "is missing");
    return *it;
  }
  std::string str(const json& j, const std::string& key, const std::string& field) const {
    const json& v = at(j, key, field);
    if (!v.is_string()) fail(field + "." + key, "is not a string");
    return v.get<std::string>();
  }
  double num(const json& j, const std::string& key, const std::string& field) const {
    const json& v = at(j, key, field);
    if (!v.is_number()) fail(field + "." + key, "is not a number");
    return v.get<double>();
  }
  const json& arr(const json& j, const std::string& key, const std::string& field) const {
    const json& v = at(j, key, field);
    if (!v.is_array()) fail(field + "." + key, "is not an array");
    return v;
  }
  TreeNode tree(const json& j, const std::string& field, int depth = 0) const {
    if (depth > 64) fail(field, "nests deeper than 64");
    TreeNode n;
    if (j.is_object() && j.contains("config")) {
      n.config = str(j, "config", field);
      return n;
    }
    n.dim = static_cast<int>(num(j, "dim", field));
    if (n.dim < 0 || n.dim > 2) fail(field + ".dim", "is not 0, 1 or 2");
    n.split = num(j, "split", field);
    n.lo = std::make_unique<TreeNode>(tree(at(j, "lo", field), field + ".lo", depth + 1));
    n.hi = std::make_unique<TreeNode>(tree(at(j, "hi", field), field + ".hi", depth + 1));
    return n;
  }
  LooFigures figures(const json& j, const std::string& field) const {
    LooFigures f;
    f.contexts = static_cast<int>(num(j, "contexts", field));
    f.unknown = static_cast<int>(num(j, "unknown", field));
    f.median = num(j, "median", field), f.worst = num(j, "worst", field);
    f.mean = num(j, "mean", field);
    return f;
  }
};

}  // namespace

json to_json(const DecisionTable& t, bool with_source) {
  json kernels = json::array();
  for (const KernelTable& k : t.kernels) {
    json configs = json::object();
    for (const auto& [key, params] : k.configs) configs[key] = json(params);
    json devices = json::array();
    for (const DeviceTable& d : k.devices) {
      json inputs = json::array();
      for (const TunedInput& in : d.inputs)
        inputs.push_back({{"label", in.label},
                          {"size", in.size},
                          {"values", in.values},
                          {"winner", in.winner},
                          {"best_ms", in.best_ms},
                          {"times_ms", in.times_ms}});
      json dj = {{"name", d.name},
                 {"arch", d.arch},
                 {"sm_count", d.sm_count},
                 {"method", to_string(d.method)},
                 {"contexts", inputs}};
      if (d.tree) dj["tree"] = tree_json(*d.tree);
      if (d.loo)
        dj["loo"] = {{"nearest", figures_json(d.loo->nearest)},
                     {"learned", figures_json(d.loo->learned)},
                     {"largest", figures_json(d.loo->largest)}};
      devices.push_back(std::move(dj));
    }
    json kj = {{"name", k.name},        {"hash", k.hash},
               {"job", k.job_document}, {"parameters", k.parameters},
               {"configs", configs},    {"devices", devices}};
    if (with_source && !k.source.empty()) kj["source"] = k.source;
    kernels.push_back(std::move(kj));
  }
  json out = {{"format", kDecisionFormat}, {"version", kDecisionVersion}, {"kernels", kernels}};
  if (!t.origin.empty()) out["source"] = t.origin;
  if (!t.generated.empty()) out["generated"] = t.generated;
  return out;
}

DecisionTable from_json(const json& j, const std::string& origin) {
  Reader r{origin};
  if (!j.is_object())
    r.fail("(top)", "is not a JSON object",
           "give a file written by `gputune "
           "export --decisions`");
  if (!j.contains("format") || j["format"] != kDecisionFormat)
    r.fail("format", std::string("is not \"") + kDecisionFormat + "\"",
           "give a file written by `gputune export --decisions`");
  const double version = r.num(j, "version", "(top)");
  if (version != kDecisionVersion)
    r.fail("version",
           "is " + json(version).dump() + "; this library reads version " +
               std::to_string(kDecisionVersion),
           "export it again with this gputune (`gputune export --decisions`)");
  DecisionTable t;
  t.origin = origin;
  if (j.contains("generated") && j["generated"].is_string()) t.generated = j["generated"];
  const json& kernels = r.arr(j, "kernels", "(top)");
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const std::string kf = "kernels[" + std::to_string(ki) + "]";
    const json& kj = kernels[ki];
    KernelTable k;
    k.name = r.str(kj, "name", kf), k.hash = r.str(kj, "hash", kf);
    k.job_document = r.str(kj, "job", kf);
    if (kj.contains("source")) k.source = r.str(kj, "source", kf);
    for (const json& p : r.arr(kj, "parameters", kf)) {
      if (!p.is_string()) r.fail(kf + ".parameters", "holds a name that is not a string");
      k.parameters.push_back(p.get<std::string>());
    }
    const json& configs = r.at(kj, "configs", kf);
    if (!configs.is_object()) r.fail(kf + ".configs", "is not an object");
    for (const auto& [key, params] : configs.items()) {
      if (!params.is_object()) r.fail(kf + ".configs." + key, "is not an object");
      nlohmann::ordered_json ordered = nlohmann::ordered_json::object();
      for (const std::string& name : k.parameters) {
        if (!params.contains(name))
          r.fail(kf + ".configs." + key, "has no value for parameter '" + name + "'");
        ordered[name] = nlohmann::ordered_json(params[name]);
      }
      k.configs.emplace(key, std::move(ordered));
    }
    const json& devices = r.arr(kj, "devices", kf);
    for (size_t di = 0; di < devices.size(); ++di) {
      const std::string df = kf + ".devices[" + std::to_string(di) + "]";
      const json& dj = devices[di];
      DeviceTable d;
      d.name = r.str(dj, "name", df), d.arch = r.str(dj, "arch", df);
      d.sm_count = static_cast<int>(r.num(dj, "sm_count", df));
      const std::string method = r.str(dj, "method", df);
      if (method == "nearest")
        d.method = How::kNearest;
      else if (method == "learned")
        d.method = How::kLearned;
      else
        r.fail(df + ".method", "is '" + method + "', not nearest or learned");
      const json& inputs = r.arr(dj, "contexts", df);
      for (size_t ii = 0; ii < inputs.size(); ++ii) {
        const std::string f = df + ".contexts[" + std::to_string(ii) + "]";
        const json& ij = inputs[ii];
        TunedInput in;
        in.label = r.str(ij, "label", f), in.winner = r.str(ij, "winner", f);
        in.best_ms = r.num(ij, "best_ms", f);
        for (const json& s : r.arr(ij, "size", f)) {
          if (!s.is_number_integer() || s.get<std::int64_t>() < 1)
            r.fail(f + ".size", "holds " + s.dump() + ", not a positive integer");
          in.size.push_back(s.get<std::int64_t>());
        }
        while (in.size.size() < 3) in.size.push_back(1);
        const json& values = r.at(ij, "values", f);
        if (!values.is_object()) r.fail(f + ".values", "is not an object");
        for (const auto& [name, v] : values.items()) {
          if (!v.is_number()) r.fail(f + ".values." + name, "is not a number");
          in.values[name] = v.get<double>();
        }
        const json& times = r.at(ij, "times_ms", f);
        if (!times.is_object()) r.fail(f + ".times_ms", "is not an object");
        for (const auto& [key, v] : times.items()) {
          if (!v.is_number()) r.fail(f + ".times_ms." + key, "is not a number");
          if (!k.configs.count(key))
            r.fail(f + ".times_ms." + key, "names a configuration not in " + kf + ".configs");
          in.times_ms[key] = v.get<double>();
        }
        if (!k.configs.count(in.winner))
          r.fail(f + ".winner", "names a configuration not in " + kf + ".configs");
        d.inputs.push_back(std::move(in));
      }
      if (dj.contains("tree")) {
        d.tree = r.tree(dj["tree"], df + ".tree");
        std::vector<const TreeNode*> stack{&*d.tree};
        while (!stack.empty()) {
          const TreeNode* n = stack.back();
          stack.pop_back();
          if (n->leaf() && !k.configs.count(n->config))
            r.fail(df + ".tree", "names a configuration not in " + kf + ".configs");
          if (!n->leaf()) stack.push_back(n->lo.get()), stack.push_back(n->hi.get());
        }
      }
      if (d.method == How::kLearned && !d.tree)
        r.fail(df + ".method", "is learned but the device has no tree");
      if (dj.contains("loo")) {
        const json& l = dj["loo"];
        d.loo = LooReport{r.figures(r.at(l, "nearest", df + ".loo"), df + ".loo.nearest"),
                          r.figures(r.at(l, "learned", df + ".loo"), df + ".loo.learned"),
                          r.figures(r.at(l, "largest", df + ".loo"), df + ".loo.largest")};
      }
      k.devices.push_back(std::move(d));
    }
    t.kernels.push_back(std::move(k));
  }
  return t;
}

}  // namespace gputune::select
