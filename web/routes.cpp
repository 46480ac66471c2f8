// The dashboard's and the daemon's HTTP API, route by route (Server::Impl's route groups, declared
// in web/server_impl.h): kernels, devices, contexts and tuned headers; runs, their measurements
// and what is derived from them, winners, the selection; charts; writes to the queue.
// Must not: hold server state or plumbing (server_impl.h, server.cpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "db/interchange.h"
#include "db/tuned_header.h"
#include "variants/hash.h"
#include "variants/space.h"
#include "web/charts.h"
#include "web/server_impl.h"

namespace gputune::web {

namespace {

/// A job's `files`: [{"path": "/abs/normal", "base64": "..."}], each path once.
std::vector<db::QueueFile> submitted_files(const json& body) {
  std::vector<db::QueueFile> out;
  if (!body.contains("files")) return out;
  if (!body["files"].is_array())
    throw HttpError{400, "files must be a list of {\"path\", \"base64\"} objects", "files"};
  std::set<std::string> seen;
  for (size_t i = 0; i < body["files"].size(); ++i) {
    const json& f = body["files"][i];
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("base64") ||
        !f["base64"].is_string())
      throw HttpError{400, at + " must be an object with string fields path and base64", at};
    db::QueueFile q;
    q.path = f["path"].get<std::string>();
    if (const std::string why = bad_submitted_path(q.path); !why.empty())
      throw HttpError{400, at + ".path '" + q.path + "' " + why, at + ".path"};
    if (!seen.insert(q.path).second)
      throw HttpError{400, at + ".path '" + q.path + "' is given twice", at + ".path"};
    auto bytes = base64_decode(f["base64"].get<std::string>());
    if (!bytes) throw HttpError{400, at + ".base64 is not base64", at + ".base64"};
    q.bytes = std::move(*bytes);
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace

/// The kernels, their devices, contexts and tuned headers.
void Server::Impl::kernel_routes() {
  get("/api/devices", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).devices());
  });
  get("/api/kernels", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).kernels());
  });
  get(R"(/api/kernels/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto k = db::Browser(store(), opt.source_command).kernel(path_id(req));
    if (!k) throw HttpError{404, "no such kernel", "id"};
    send_json(res, 200, *k);
  });
  // The kernel's winners as a C/C++ header (db/tuned_header.h), this version of its source only.
  get(R"(/api/kernels/(\d+)/header)", [this](const httplib::Request& req, httplib::Response& res) {
    auto k = db::Browser(store()).kernel(path_id(req));
    if (!k) throw HttpError{404, "no such kernel", "id"};
    const std::string name = (*k)["name"].get<std::string>();
    std::string text;
    try {
      text = db::tuned_header(
          store(), (*k)["hash"].get<std::string>(),
          {str_param(req, "context"), str_param(req, "device"), "the daemon's database", ""});
    } catch (const std::invalid_argument& e) {
      throw HttpError{404, e.what(), "id"};
    }
    std::string file = db::macro_suffix(name) + "_tuned.h";
    res.set_header("Content-Disposition", "attachment; filename=\"" + file + "\"");
    res.set_content(text, "text/x-c; charset=utf-8");
  });
  // Runtime selection (select::Table::choose) for a device and problem size: what `gputune best
  // --size` answers, with how it was obtained. The kernel by id (its name is used: the newest
  // version of its source answers) or by name.
  get(R"(/api/kernels/([^/]+)/select)",
      [this](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, select_answer(req));
      });
  get("/api/contexts", [this](const httplib::Request& req, httplib::Response& res) {
    std::string kernel = str_param(req, "kernel");
    if (kernel.empty()) throw HttpError{400, "kernel is required", "kernel"};
    json out = json::array();
    for (auto& c : store().contexts(kernel))
      out.push_back({{"id", c.id},
                     {"label", c.label},
                     {"device", c.device},
                     {"problem_size", json::parse(c.problem_size_json)},
                     {"arch", c.arch}});
    send_json(res, 200, out);
  });
}

json Server::Impl::select_answer(const httplib::Request& req) {
  std::string kernel = req.matches[1];
  if (!kernel.empty() &&
      std::all_of(kernel.begin(), kernel.end(), [](unsigned char c) { return std::isdigit(c); })) {
    auto k = kernel.size() > 18 ? std::nullopt : db::Browser(store()).kernel(std::stoll(kernel));
    if (!k) throw HttpError{404, "no kernel with id " + kernel, "id"};
    kernel = (*k)["name"].get<std::string>();
  }
  const std::string device = str_param(req, "device"), arch = str_param(req, "arch", 40);
  if (device.empty())
    throw HttpError{400,
                    "device is required: the GPU's name as the driver gives it, e.g. "
                    "device=NVIDIA%20H100%2080GB%20HBM3 (the kernel page lists its devices)",
                    "device"};
  const std::string size_text = str_param(req, "size");
  if (size_text.empty())
    throw HttpError{400, "size is required: the problem size, e.g. size=2048,2048", "size"};
  select::Input input;
  static const std::regex one("[0-9]{1,15}");
  size_t at = 0;
  while (at <= size_text.size()) {
    const size_t end = std::min(size_text.find_first_of(",x", at), size_text.size());
    const std::string part = size_text.substr(at, end - at);
    if (!std::regex_match(part, one) || std::stoll(part) < 1)
      throw HttpError{400,
                      "size '" + size_text + "': '" + part +
                          "' is not a positive integer. Fix: give the problem size as positive "
                          "integers separated by commas, e.g. size=2048,2048",
                      "size"};
    input.problem_size.push_back(std::stoll(part));
    at = end + 1;
  }
  for (const auto& [name, v] : req.params)
    if (name.rfind("value.", 0) == 0) {
      char* rest = nullptr;
      const double x = std::strtod(v.c_str(), &rest);
      if (v.empty() || *rest || !std::isfinite(x))
        throw HttpError{400, name + " must be a number", name};
      input.values[name.substr(6)] = x;
    }
  auto choice = selection(kernel).choose(kernel, {device, arch}, input);
  if (!choice) {
    const select::Error& e = choice.error();
    const bool unknown = e.code == select::Error::Code::kUnknownKernel ||
                         e.code == select::Error::Code::kUnknownDevice;
    const bool bad = e.code == select::Error::Code::kBadInput;
    throw HttpError{unknown ? 404
                    : bad   ? 400
                            : 422,
                    e.message,
                    e.code == select::Error::Code::kUnknownKernel   ? "id"
                    : e.code == select::Error::Code::kUnknownDevice ? "device"
                    : bad                                           ? "size"
                                                                    : ""};
  }
  const select::Choice& c = *choice;
  json params = json::array();
  for (const auto& [name, value] : c.params) params.push_back({{"name", name}, {"value", value}});
  json expected = nullptr;
  if (c.expected)
    expected = {{"contexts", c.expected->contexts},
                {"unknown", c.expected->unknown},
                {"median", c.expected->median},
                {"worst", c.expected->worst},
                {"mean", c.expected->mean}};
  return {{"kernel", c.kernel},
          {"device", c.device},
          {"asked", {{"device", device}, {"arch", arch}, {"size", input.problem_size}}},
          {"how", select::to_string(c.how)},
          {"config", c.config},
          {"params", params},
          {"from", c.from},
          {"measured_ms", c.measured_ms ? json(*c.measured_ms) : json(nullptr)},
          {"expected", expected},
          {"grid", c.has_geometry ? json(c.grid) : json(nullptr)},
          {"block", c.has_geometry ? json(c.block) : json(nullptr)},
          {"dynamic_smem", c.has_geometry ? json(c.dynamic_smem) : json(nullptr)},
          {"explain", c.explain()}};
}

/// Runs, their measurements and what is derived from them (JSON), winners, the queue.
void Server::Impl::run_routes() {
  get("/api/runs", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).runs(static_cast<int>(int_param(req, "limit", 20, 1, 1000)),
                                        int_param(req, "offset", 0, 0, INT64_MAX / 2)));
  });
  get(R"(/api/runs/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto r = db::Browser(store()).run(path_id(req));
    if (!r) throw HttpError{404, "no such run", "id"};
    send_json(res, 200, *r);
  });
  // One tuning problem of a run (a context; a kernel where several share its label) as a T4
  // results file (db::export_t4); 400 with the list of its problems when the choice is open.
  get(R"(/api/runs/(\d+)/t4)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::int64_t id = path_id(req);
    if (!store().run(id)) throw HttpError{404, "no such run", "id"};
    const std::string context = str_param(req, "context"), kernel = str_param(req, "kernel");
    std::string text;
    try {
      text = db::export_t4(store(), id, context, kernel);
    } catch (const std::invalid_argument& e) {
      throw HttpError{400, e.what(), "context"};
    }
    std::string file = "run" + std::to_string(id) + (context.empty() ? "" : "-" + context);
    for (char& ch : file)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
    res.set_header("Content-Disposition", "attachment; filename=\"" + file + ".t4.json\"");
    res.set_content(text + "\n", "application/json");
  });
  get(R"(/api/runs/(\d+)/measurements)",
      [this](const httplib::Request& req, httplib::Response& res) {
        db::MeasurementQuery q;
        q.run_id = path_id(req);
        q.context_id = int_param(req, "context", 0, 0, INT64_MAX / 2);
        q.status = str_param(req, "status", 20);
        q.search = str_param(req, "q", 200);
        if (req.has_param("sort")) q.sort = str_param(req, "sort", 20);
        std::string order = req.has_param("order") ? str_param(req, "order", 4) : "asc";
        if (order != "asc" && order != "desc")
          throw HttpError{400, "order must be asc or desc", "order"};
        q.descending = order == "desc";
        q.limit = static_cast<int>(int_param(req, "limit", 50, 1, 1000));
        q.offset = int_param(req, "offset", 0, 0, INT64_MAX / 2);
        if (!store().run(q.run_id)) throw HttpError{404, "no such run", "id"};
        send_json(res, 200, db::Browser(store()).measurements(q));
      });
  get(R"(/api/runs/(\d+)/best_over_time)",
      [this](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, db::Browser(store()).best_over_time(path_id(req)));
      });
  get(R"(/api/runs/(\d+)/parameters)", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).parameter_effects(
                  path_id(req), int_param(req, "context", 0, 0, INT64_MAX / 2)));
  });
  get(R"(/api/runs/(\d+)/predicted)", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).predicted_vs_measured(path_id(req)));
  });
  get("/api/winners", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).winners(static_cast<int>(int_param(req, "limit", 20, 1, 1000))));
  });
  get("/api/best", [this](const httplib::Request& req, httplib::Response& res) {
    std::string kernel = str_param(req, "kernel");
    if (kernel.empty()) throw HttpError{400, "kernel is required", "kernel"};
    auto ws = store().winners(kernel, str_param(req, "context"), str_param(req, "device"));
    if (ws.empty()) throw HttpError{404, "no winner stored for this kernel and context", "kernel"};
    json out = json::array();
    for (auto& w : ws)
      out.push_back({{"kernel", w.kernel},
                     {"context", w.context_label},
                     {"device", w.device},
                     {"time_ms", w.time_ms},
                     {"configuration", json::parse(w.params_json)},
                     {"key", w.config_key},
                     {"run_id", w.run_id}});
    send_json(res, 200, out);
  });
  get(R"(/api/contexts/(\d+)/history)",
      [this](const httplib::Request& req, httplib::Response& res) {
        auto h = db::Browser(store()).context_history(path_id(req));
        if (!h) throw HttpError{404, "no such context", "id"};
        send_json(res, 200, *h);
      });
  get("/api/queue", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).queue(static_cast<int>(int_param(req, "limit", 50, 1, 1000))));
  });
}

/// Charts (SVG).
void Server::Impl::chart_routes() {
  auto svg = [](httplib::Response& res, const std::string& body) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(body, "image/svg+xml");
  };
  get(R"(/api/runs/(\d+)/best.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        db::Browser b(store());
        std::int64_t id = path_id(req);
        auto run = b.run(id);
        if (!run) throw HttpError{404, "no such run", "id"};
        std::map<std::int64_t, Series> by_ctx;
        for (auto& p : b.best_over_time(id)) {
          auto& s = by_ctx[p["context_id"].get<std::int64_t>()];
          s.x.push_back(p["index"].get<double>());
          s.y.push_back(p["best_ms"].get<double>());
        }
        std::vector<Series> series;
        for (auto& c : (*run)["contexts"]) {
          auto it = by_ctx.find(c["id"].get<std::int64_t>());
          if (it == by_ctx.end()) continue;
          it->second.name = c["label"].get<std::string>();
          series.push_back(it->second);
        }
        // A log time axis: the default configuration (85 ms) and the region where tuning happens
        // (5-6 ms) both readable.
        svg(res, line_chart("Best time so far", series, "correct measurements",
                            "best time (log scale)", true, Axis::log_ms));
      });
  get(R"(/api/runs/(\d+)/scatter.svg)", [this, svg](const httplib::Request& req,
                                                    httplib::Response& res) {
    Series pts;
    for (auto& p : db::Browser(store()).predicted_vs_measured(path_id(req))) {
      pts.x.push_back(p["predicted_ms"].get<double>());
      pts.y.push_back(p["time_ms"].get<double>());
    }
    svg(res, pts.x.empty()
                 ? empty_chart("Measured vs predicted", "no model predictions stored for this run")
                 : scatter_chart("Measured vs predicted", pts, "predicted time (log scale)",
                                 "measured time (log scale)", true, Axis::log_ms));
  });
  get(R"(/api/runs/(\d+)/parameters.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        std::vector<BarGroup> groups;
        auto eff = db::Browser(store()).parameter_effects(
            path_id(req), int_param(req, "context", 0, 0, INT64_MAX / 2));
        for (auto& p : eff["parameters"]) {
          if (p["values"].size() < 2) continue;  // a parameter with one value has no effect to show
          BarGroup g;
          g.name = p["parameter"].get<std::string>();
          for (auto& v : p["values"]) {
            g.labels.push_back(v["value"].is_string() ? v["value"].get<std::string>()
                                                      : v["value"].dump());
            g.values.push_back(v["best_ms"].get<double>());
          }
          groups.push_back(std::move(g));
        }
        svg(res, bar_chart("Best time per parameter value", groups, "best time", Axis::ms));
      });
  get(R"(/api/contexts/(\d+)/history.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        auto h = db::Browser(store()).context_history(path_id(req));
        if (!h) throw HttpError{404, "no such context", "id"};
        Series s;
        s.name = (*h)["context"].get<std::string>() + " on " + (*h)["device"].get<std::string>();
        for (auto& p : (*h)["runs"]) {
          s.x.push_back(p["run_id"].get<double>());
          s.y.push_back(p["best_ms"].get<double>());
        }
        svg(res, line_chart("Winning time per run: " + (*h)["kernel"].get<std::string>(), {s},
                            "run", "winning time (log scale)", false, Axis::log_ms));
      });
}

/// Writes: the queue.
void Server::Impl::write_routes() {
  http.Post(
      "/api/jobs", wrap(true, [this](const httplib::Request& req, httplib::Response& res) {
        if (req.body.size() > kMaxJobRequestBytes)
          throw HttpError{413, "job too large (" + mib(kMaxJobRequestBytes) + " at most)", "body"};
        json body = json::parse(req.body);
        if (!body.is_object()) throw HttpError{400, "expected a JSON object", "body"};
        if (!body.contains("document") || !body["document"].is_object())
          throw HttpError{400, "document (the T1 job as a JSON object) is required", "document"};
        if (!body.contains("kernel_source") || !body["kernel_source"].is_string())
          throw HttpError{400, "kernel_source (the kernel file's text) is required",
                          "kernel_source"};
        auto optional_string = [&](const char* key, const char* fallback) {
          if (!body.contains(key)) return std::string(fallback);
          if (!body[key].is_string())
            throw HttpError{400, std::string(key) + " must be a string", key};
          return body[key].get<std::string>();
        };
        db::QueueItem q;
        q.name = optional_string("name", "");
        q.job_file = optional_string("job_file", "submitted.json");
        // Absolute as `submit` sends it, else a name the worker puts under a folder of its own.
        if (const std::string why =
                q.job_file.find('/') != std::string::npos ? bad_submitted_path(q.job_file)
                : q.job_file.find('\0') != std::string::npos ||
                        q.job_file.size() > kMaxSubmittedNameBytes || q.job_file == "." ||
                        q.job_file == ".." || q.job_file.empty()
                    ? "is not a file name"
                    : "";
            !why.empty())
          throw HttpError{400, "job_file " + why, "job_file"};
        // Validate the job as `gputune run` would, before it is queued.
        Job job = parse_job(body["document"], q.job_file);
        Space space = build_space(job);
        if (space.empty())
          throw HttpError{400, space.explain_empty(), "ConfigurationSpace.Conditions"};
        check_kernel_name(job, body["kernel_source"].get<std::string>());
        if (q.name.empty()) q.name = job.name;
        q.document = body["document"].dump();
        q.kernel_file = job.kernel_file.filename().string();
        q.kernel_source = body["kernel_source"].get<std::string>();
        q.client_cwd = optional_string("cwd", "");
        if (!q.client_cwd.empty() && !bad_submitted_path(q.client_cwd).empty())
          throw HttpError{400, "cwd " + bad_submitted_path(q.client_cwd), "cwd"};
        std::vector<db::QueueFile> files = submitted_files(body);
        std::int64_t id = store().enqueue(q, files);
        send_json(res, 201,
                  {{"id", id},
                   {"status", "queued"},
                   {"configurations", space.size()},
                   {"files", files.size()}});
      }));
  http.Post(R"(/api/jobs/(\d+)/cancel)",
            wrap(true, [this](const httplib::Request& req, httplib::Response& res) {
              std::int64_t id = path_id(req);
              auto item = store().queue_item(id);
              if (!item) throw HttpError{404, "no such job", "id"};
              if (!store().request_cancel(id))
                throw HttpError{409,
                                "job " + std::to_string(id) + " is already " +
                                    std::string(db::text(item->status)),
                                "id"};
              send_json(res, 200, queue_item_json(*store().queue_item(id)));
            }));
}

}  // namespace gputune::web
