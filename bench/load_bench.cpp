// A bounded load on a running `gputune serve` from a second process on loopback: every GET
// endpoint of the API (with real ids read from the daemon first) at a fixed total rate from a few
// keep-alive clients, and job submissions (one in three cancelled at once) at a fixed interval,
// for a given time; per-endpoint latency percentiles, errors (no answer, or another status than
// the endpoint's), and the daemon's and its workers' resident memory (VmRSS) every second.
// Before the load one job is submitted and waited for, so that a worker's run is among those read.
// Prints Markdown (bench/run_load_bench.sh writes it to bench/results/); exits 1 when there was an
// error, when the daemon's RSS grew by more than --max-growth-mib after the warm-up, or (with
// --enforce-targets) when a p99 is over its published target.
// Usage: load_bench --url URL --token TOKEN --pid PID --job JOB.json [--seconds 180]
//          [--read-rate 100] [--readers 4] [--submit-every 5] [--targets web-results.md]
//          [--max-growth-mib 64] [--only TEXT] [--arrivals even|poisson] [--trace FILE]
//          [--enforce-targets]
// --only TEXT: read only the endpoints whose path holds TEXT (at --read-rate in all), e.g. to
// measure one endpoint's latency floor on an otherwise idle daemon.
// --arrivals: the reads evenly spaced at --read-rate (the default), or arriving independently at
// that mean rate (poisson: at times two or more at once, as from many users).
// --trace FILE: every read as a CSV line (its lane, when it started, the client's time and the
// Server-Timing parts), to look at one endpoint's slow requests beside what ran at that moment.
#include <dirent.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string url, token, job, targets, only, trace;
  int pid = 0, readers = 4;
  double seconds = 180, read_rate = 100, submit_every = 5, max_growth_mib = 64;
  bool enforce_targets = false, poisson = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "load_bench: %s\nusage: load_bench --url URL --token TOKEN --pid PID --job JOB.json "
               "[--seconds S] [--read-rate R] [--readers N] [--submit-every S] [--targets FILE] "
               "[--max-growth-mib M] [--only TEXT] [--arrivals even|poisson] [--trace FILE] "
               "[--enforce-targets]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--enforce-targets") {
      o.enforce_targets = true;
      continue;
    }
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--url")
      o.url = v;
    else if (a == "--token")
      o.token = v;
    else if (a == "--job")
      o.job = v;
    else if (a == "--targets")
      o.targets = v;
    else if (a == "--only")
      o.only = v;
    else if (a == "--trace")
      o.trace = v;
    else if (a == "--arrivals") {
      if (v != "even" && v != "poisson") usage("--arrivals must be even or poisson, not " + v);
      o.poisson = v == "poisson";
    }

    else if (a == "--pid")
      o.pid = std::stoi(v);
    else if (a == "--readers")
      o.readers = std::max(1, std::stoi(v));
    else if (a == "--seconds")
      o.seconds = std::stod(v);
    else if (a == "--read-rate")
      o.read_rate = std::stod(v);
    else if (a == "--submit-every")
      o.submit_every = std::stod(v);
    else if (a == "--max-growth-mib")
      o.max_growth_mib = std::stod(v);
    else
      usage("unknown option " + a);
  }
  if (o.url.empty() || o.token.empty() || o.job.empty() || o.pid <= 0)
    usage("--url, --token, --pid and --job are required");
  if (o.seconds < 5 || o.read_rate <= 0 || o.submit_every <= 0)
    usage("--seconds must be 5 or more, the rates positive");
  return o;
}

/// VmRSS of a process in KiB (0 when it is gone).
long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

/// The children of `pid` (its workers), from /proc/*/stat.
std::vector<int> children(int pid) {
  std::vector<int> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const int p = std::atoi(e->d_name);
    if (p <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(p) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // the name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid) out.push_back(p);
  }
  closedir(d);
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

std::string ms(double x) {
  char b[32];
  std::snprintf(b, sizeof b, x < 10 ? "%.2f ms" : "%.1f ms", x);
  return b;
}

/// "31.99ms", "233.00us", "1.2s" (wrk's units) in ms.
double wrk_ms(const std::string& s) {
  double x = std::atof(s.c_str());
  if (s.find("us") != std::string::npos) return x / 1000;
  if (s.find("ms") != std::string::npos) return x;
  if (s.find('s') != std::string::npos) return x * 1000;
  return x;
}

/// The published p99 per endpoint: the table rows "| `PATH` | rps | p50 | p90 | p99 |".
std::map<std::string, double> published_p99(const std::string& file) {
  std::map<std::string, double> out;
  std::ifstream in(file);
  std::string line;
  static const std::regex row(R"(^\| `([^`]+)` \|[^|]*\|[^|]*\|[^|]*\| *([0-9.]+[a-z]+) *\|)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out[m[1]] = wrk_ms(m[2]);
  }
  return out;
}

/// The handler's time, and its thread's CPU time, from a response's "Server-Timing: ...,
/// app;dur=MS, cpu;dur=MS" (NaN without).
struct ServerTime {
  double wall = NAN, cpu = NAN, queue = NAN;
};
ServerTime server_ms(const httplib::Result& r) {
  if (!r) return {};
  const std::string timing = r->get_header_value("Server-Timing");
  auto metric = [&](const std::string& name) {
    const auto at = timing.find(name + ";dur=");
    return at == std::string::npos ? NAN : std::atof(timing.c_str() + at + name.size() + 5);
  };
  return {metric("app"), metric("cpu"), metric("queue")};
}

struct Stats {
  std::mutex mu;
  /// as the client saw it; the handler's own, its CPU time and its wait for a core
  /// (Server-Timing)
  std::vector<double> ms, server, cpu, queue;
  /// per request: the handler's time neither on a core nor waiting for one (a lock, the disk),
  /// and the client's time outside the handler (the connection, both sides' wake-ups)
  std::vector<double> blocked, outside;
  long errors = 0;
  std::string last_error;
  void add(double t, bool ok, const std::string& why, ServerTime server_t = {}) {
    std::lock_guard<std::mutex> lock(mu);
    ms.push_back(t);
    if (!std::isnan(server_t.wall)) server.push_back(server_t.wall);
    if (!std::isnan(server_t.cpu)) cpu.push_back(server_t.cpu);
    if (!std::isnan(server_t.queue)) queue.push_back(server_t.queue);
    if (!std::isnan(server_t.wall)) outside.push_back(std::max(0.0, t - server_t.wall));
    if (!std::isnan(server_t.wall) && !std::isnan(server_t.cpu) && !std::isnan(server_t.queue))
      blocked.push_back(std::max(0.0, server_t.wall - server_t.cpu - server_t.queue));
    if (!ok) ++errors, last_error = why;
  }
};

struct Endpoint {
  std::string path;
  Stats stats;
};

json get_json(httplib::Client& c, const std::string& path) {
  auto r = c.Get(path.c_str());
  if (!r || r->status != 200)
    throw std::runtime_error(
        "GET " + path + ": " +
        (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error())));
  return json::parse(r->body);
}

}  // namespace

int run(const Options& o) {
  httplib::Client setup(o.url);
  setup.set_read_timeout(120, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer " + o.token}};

  // The job to submit: its kernel beside it, one small context per submission.
  const std::filesystem::path job_path(o.job);
  json doc = json::parse(std::ifstream(job_path));
  const auto kernel_path =
      job_path.parent_path() / doc["KernelSpecification"]["KernelFile"].get<std::string>();
  std::ifstream kin(kernel_path);
  const std::string kernel((std::istreambuf_iterator<char>(kin)), std::istreambuf_iterator<char>());
  doc["GPUTune"]["Measurement"] = {{"Repeats", 3}, {"WarmUp", 1}};
  std::atomic<int> submission{0};
  auto job_body = [&] {
    json d = doc;
    const int n = submission++;
    d["GPUTune"]["Contexts"] = {
        {{"Name", "load-" + std::to_string(n % 4)}, {"ProblemSize", {4096 << (n % 4)}}}};
    return json({{"document", d}, {"kernel_source", kernel}, {"name", "load"}}).dump();
  };

  // Seed: one job tuned to the end, so that a worker's kernel and run are read too.
  std::int64_t seeded_run = 0;
  {
    auto r = setup.Post("/api/jobs", auth, job_body(), "application/json");
    if (!r || r->status != 201) {
      std::fprintf(stderr, "load_bench: the seed job was refused: %s\n",
                   r ? r->body.c_str() : httplib::to_string(r.error()).c_str());
      return 1;
    }
    const auto id = json::parse(r->body)["id"].get<std::int64_t>();
    const auto until = Clock::now() + std::chrono::seconds(300);
    while (Clock::now() < until && !seeded_run) {
      for (auto& q : get_json(setup, "/api/queue?limit=1000"))
        if (q["id"] == id && q["status"] == "done") seeded_run = q["run_id"].get<std::int64_t>();
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    if (!seeded_run) {
      std::fprintf(stderr, "load_bench: the seed job was not done within 300 s\n");
      return 1;
    }
  }

  // Real ids: the largest run (the one the published targets read), its kernel, device and
  // contexts; the seed's run for the live-run views and the T4 download.
  json runs = get_json(setup, "/api/runs?limit=1000");
  json big = runs[0];
  for (auto& r : runs)
    if (r["total"].get<std::int64_t>() > big["total"].get<std::int64_t>()) big = r;
  const std::string run = std::to_string(big["id"].get<std::int64_t>());
  const std::string kernel_name = big["job"].get<std::string>();
  std::string kernel_id;
  for (auto& k : get_json(setup, "/api/kernels"))
    if (k["name"] == kernel_name) kernel_id = std::to_string(k["id"].get<std::int64_t>());
  json contexts = get_json(setup, "/api/contexts?kernel=" + kernel_name);
  const json& ctx = contexts[std::min<size_t>(2, contexts.size() - 1)];
  const json& ctx_label = contexts[std::min<size_t>(3, contexts.size() - 1)];
  const std::string cid = std::to_string(ctx["id"].get<std::int64_t>());
  const std::string label = ctx_label["label"].get<std::string>();
  const std::string device = httplib::detail::encode_query_param(ctx["device"].get<std::string>());
  const std::string small = std::to_string(seeded_run);
  json small_run = get_json(setup, "/api/runs/" + small);
  const std::string small_label = small_run["contexts"][0]["label"].get<std::string>();

  std::vector<std::string> paths = {
      // The published ones (bench/run_web_benchmarks.sh), with the same ids on its database.
      "/api/runs/" + run + "/measurements?limit=50",
      "/api/runs/" + run + "/measurements?limit=50&status=correct&sort=occupancy&order=desc",
      "/api/runs/" + run + "/measurements?limit=50&context=" + cid + "&sort=time_ms",
      "/api/runs/" + run + "/measurements?limit=50&offset=5000&sort=registers",
      "/api/runs?limit=20", "/api/runs/" + run,
      "/api/best?kernel=" + kernel_name + "&context=" + label, "/api/winners?limit=20",
      "/api/kernels/" + kernel_id, "/api/runs/" + run + "/best.svg",
      // Every other GET endpoint.
      "/api/devices", "/api/kernels",
      "/api/kernels/" + kernel_id + "/header?device=" + device + "&context=" + label,
      "/api/kernels/" + kernel_id + "/select?device=" + device + "&size=3000",
      "/api/contexts?kernel=" + kernel_name, "/api/runs/" + run + "/best_over_time",
      "/api/runs/" + run + "/parameters", "/api/runs/" + run + "/predicted",
      "/api/runs/" + run + "/scatter.svg", "/api/runs/" + run + "/parameters.svg",
      "/api/contexts/" + cid + "/history", "/api/contexts/" + cid + "/history.svg",
      "/api/queue?limit=50", "/api/runs/" + small,
      "/api/runs/" + small + "/measurements?limit=50&sort=time_ms",
      "/api/runs/" + small + "/t4?context=" + small_label, "/"};
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  for (auto& p : paths)
    if (o.only.empty() || p.find(o.only) != std::string::npos)
      endpoints.push_back(std::make_unique<Endpoint>()), endpoints.back()->path = p;
  if (endpoints.empty()) usage("--only " + o.only + " matches no endpoint");
  Endpoint submit, cancel;
  submit.path = "POST /api/jobs";
  cancel.path = "POST /api/jobs/ID/cancel";

  // Warm-up: each endpoint twice (derived results are computed and cached on first use). One
  // that took over 100 ms either time (a result rebuilt whenever a measurement is added may be
  // fast the second time) is read by a client of its own, one request at a time, so that it
  // does not hold back the readers of the others; every endpoint gets the same rate at most.
  std::vector<Endpoint*> fast, slow;
  for (auto& e : endpoints) {
    double took[2];
    int status = 0;
    for (double& t : took) {
      auto t0 = Clock::now();
      auto r = setup.Get(e->path.c_str());
      t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      status = r ? r->status : 0;
    }
    std::fprintf(stderr, "warm-up %-90s %d %.0f ms, then %.0f ms\n", e->path.c_str(), status,
                 took[0], took[1]);
    (std::max(took[0], took[1]) > 100 ? slow : fast).push_back(e.get());
  }

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  // steady_clock is CLOCK_MONOTONIC: a trace's times line up with perf's (perf record -k 1)
  std::fprintf(stderr, "load_bench: the reads start at CLOCK_MONOTONIC %.6f s\n",
               std::chrono::duration<double>(start.time_since_epoch()).count());
  // One schedule for all reads: slot k at start + k / rate, each endpoint in turn, the slow ones
  // spread evenly among the others. Each slot belongs to one client: a slow endpoint's to the
  // slow lane's, a fast one's to the fast clients in turn. Without one schedule (each lane its
  // own clock from `start`) both lanes cycled their endpoints with the same period, so the same
  // pairs (the slow lane's first endpoint and the fast lane's first) arrived at the same instant
  // every cycle, and the lighter one always waited for a core behind the other.
  std::vector<Endpoint*> order;
  for (size_t i = 0, next_slow = 0; i < fast.size() || next_slow < slow.size();) {
    // the slow endpoint j goes at about position (j + 0.5) * N / |slow| of the N
    const double due = slow.empty() ? 0
                                    : (static_cast<double>(next_slow) + 0.5) *
                                          static_cast<double>(endpoints.size()) /
                                          static_cast<double>(slow.size());
    if (next_slow < slow.size() && (i == fast.size() || static_cast<double>(order.size()) >= due))
      order.push_back(slow[next_slow++]);
    else
      order.push_back(fast[i++]);
  }
  const std::set<const Endpoint*> is_slow(slow.begin(), slow.end());
  // The slots' times: evenly spaced, or (--arrivals poisson) independent arrivals at the same
  // mean rate, as many users' reads would be (a fixed seed, so that runs compare).
  std::vector<Clock::time_point> slot_at;
  {
    std::mt19937_64 random(47);
    std::exponential_distribution<double> gap(o.read_rate);
    double t = 0;
    for (std::size_t k = 0; t < o.seconds; ++k) {
      slot_at.push_back(
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
      t = o.poisson ? t + gap(random) : static_cast<double>(k + 1) / o.read_rate;
    }
  }
  struct Traced {
    const Endpoint* endpoint;
    int lane;  ///< the fast lane's clients 0.., the slow lane -1
    double at, took;
    ServerTime server;
  };
  std::mutex trace_mu;
  std::vector<Traced> trace;
  // Reads the slots of client `lane` (-1: the slow lane's) on one keep-alive connection.
  auto read_lane = [&](int lane) {
    httplib::Client c(o.url);
    c.set_keep_alive(true);
    c.set_read_timeout(60, 0);
    std::size_t fast_seen = 0;  // fast slots before slot k: they go to the fast clients in turn
    for (std::size_t k = 0; k < slot_at.size(); ++k) {
      Endpoint& e = *order[k % order.size()];
      const bool mine =
          is_slow.count(&e) ? lane == -1 : static_cast<int>(fast_seen++ % o.readers) == lane;
      if (!mine) continue;
      const auto at = slot_at[k];
      if (Clock::now() - at > std::chrono::seconds(1)) continue;  // behind: skip, no burst
      std::this_thread::sleep_until(at);
      const auto t0 = Clock::now();
      auto r = c.Get(e.path.c_str());
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const bool ok = r && r->status == 200;
      e.stats.add(took, ok,
                  r ? std::to_string(r->status) + " " + r->body.substr(0, 200)
                    : httplib::to_string(r.error()),
                  server_ms(r));
      if (!o.trace.empty()) {
        std::lock_guard<std::mutex> lock(trace_mu);
        trace.push_back({&e, lane, std::chrono::duration<double, std::milli>(t0 - start).count(),
                         took, server_ms(r)});
      }
    }
  };
  std::vector<std::thread> threads;
  if (!fast.empty())
    for (int t = 0; t < o.readers; ++t) threads.emplace_back([&, t] { read_lane(t); });
  if (!slow.empty()) threads.emplace_back([&] { read_lane(-1); });
  std::atomic<long> submitted{0}, cancelled{0};
  threads.emplace_back([&] {
    httplib::Client c(o.url);
    c.set_keep_alive(true);
    // A POST goes out as its header and then its body: without this, Nagle holds the body until
    // the daemon's delayed ACK of the header, 40 ms, counted as the submission's latency.
    c.set_tcp_nodelay(true);
    c.set_read_timeout(60, 0);
    auto next = start;
    for (int n = 0;; ++n) {
      // not past the end: with --submit-every longer than the run, the one submission is all
      std::this_thread::sleep_until(
          std::min(next, std::chrono::time_point_cast<Clock::duration>(end)));
      if (Clock::now() >= end) break;
      const std::string body = job_body();
      auto t0 = Clock::now();
      auto r = c.Post("/api/jobs", auth, body, "application/json");
      double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const bool ok = r && r->status == 201;
      submit.stats.add(took, ok,
                       r ? std::to_string(r->status) + " " + r->body.substr(0, 200)
                         : httplib::to_string(r.error()),
                       server_ms(r));
      submitted += ok;
      if (ok && n % 3 == 2) {  // one in three cancelled at once (409 if it already finished)
        const std::string path = "/api/jobs/" +
                                 std::to_string(json::parse(r->body)["id"].get<std::int64_t>()) +
                                 "/cancel";
        t0 = Clock::now();
        auto rc = c.Post(path.c_str(), auth, "", "application/json");
        took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        const bool cok = rc && (rc->status == 200 || rc->status == 409);
        cancel.stats.add(took, cok,
                         rc ? std::to_string(rc->status) + " " + rc->body.substr(0, 200)
                            : httplib::to_string(rc.error()),
                         server_ms(rc));
        cancelled += cok;
      }
      next += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(o.submit_every));
    }
  });
  // Memory, every second.
  struct Sample {
    double t;
    long daemon_kib, workers_kib;
    int workers;
    long requests;
  };
  std::vector<Sample> samples;
  auto requests_so_far = [&] {
    long n = 0;
    for (auto& e : endpoints) {
      std::lock_guard<std::mutex> lock(e->stats.mu);
      n += static_cast<long>(e->stats.ms.size());
    }
    return n;
  };
  for (int s = 0;; ++s) {
    const auto at = start + std::chrono::seconds(s);
    std::this_thread::sleep_until(at);
    if (at > end) break;
    Sample x{std::chrono::duration<double>(Clock::now() - start).count(), rss_kib(o.pid), 0, 0,
             requests_so_far()};
    for (int w : children(o.pid)) x.workers_kib += rss_kib(w), ++x.workers;
    samples.push_back(x);
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  if (!o.trace.empty()) {
    std::ofstream out(o.trace);
    out << "endpoint,lane,at_ms,took_ms,handler_ms,cpu_ms,queue_ms\n";
    std::sort(trace.begin(), trace.end(),
              [](const Traced& a, const Traced& b) { return a.at < b.at; });
    for (const auto& r : trace)
      out << '"' << r.endpoint->path << "\"," << r.lane << ',' << r.at << ',' << r.took << ','
          << r.server.wall << ',' << r.server.cpu << ',' << r.server.queue << '\n';
    if (!out) std::fprintf(stderr, "load_bench: cannot write the trace %s\n", o.trace.c_str());
  }

  // The report.
  const auto targets =
      o.targets.empty() ? std::map<std::string, double>{} : published_p99(o.targets);
  long errors = 0, requests = 0;
  int over_target = 0;
  // "handler p99": the server's own time (Server-Timing), without the connection and the client;
  // "its CPU p99": the CPU time its thread used (the rest of the handler's time it waited, for a
  // core or a lock); "its wait for a core p99": the time it was runnable but not running
  // (/proc/thread-self/schedstat); "blocked p99": the rest of a handler's time, on a lock or the
  // disk; "outside p99": a request's time outside the handler, the connection and the wake-ups
  // of both sides. Each is its own p99. The published p99s are wrk's, as a client sees them.
  std::printf(
      "| endpoint | requests | errors | p50 | p90 | p99 | max | handler p99 | its CPU p99 | "
      "its wait for a core p99 | blocked p99 | outside p99 | published p99 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto row = [&](Endpoint& e) {
    const auto& v = e.stats.ms;
    requests += static_cast<long>(v.size()), errors += e.stats.errors;
    std::string target = "";
    if (auto it = targets.find(e.path); it != targets.end()) {
      const bool within = percentile(v, 0.99) <= it->second;
      over_target += !within;
      target = ms(it->second) + (within ? " (within)" : " (**over**)");
    }
    const auto &h = e.stats.server, &cpu = e.stats.cpu, &queue = e.stats.queue;
    const auto &blocked = e.stats.blocked, &outside = e.stats.outside;
    std::printf("| `%s` | %zu | %ld | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                e.path.c_str(), v.size(), e.stats.errors, ms(percentile(v, 0.5)).c_str(),
                ms(percentile(v, 0.9)).c_str(), ms(percentile(v, 0.99)).c_str(),
                ms(v.empty() ? NAN : *std::max_element(v.begin(), v.end())).c_str(),
                h.empty() ? "" : ms(percentile(h, 0.99)).c_str(),
                cpu.empty() ? "" : ms(percentile(cpu, 0.99)).c_str(),
                queue.empty() ? "" : ms(percentile(queue, 0.99)).c_str(),
                blocked.empty() ? "" : ms(percentile(blocked, 0.99)).c_str(),
                outside.empty() ? "" : ms(percentile(outside, 0.99)).c_str(), target.c_str());
    if (e.stats.errors)
      std::fprintf(stderr, "errors on %s, last: %s\n", e.path.c_str(), e.stats.last_error.c_str());
  };
  for (auto& e : endpoints) row(*e);
  std::string slow_list;
  for (Endpoint* e : slow) slow_list += (slow_list.empty() ? "`" : ", `") + e->path + "`";
  row(submit);
  row(cancel);
  std::printf("\n%ld requests in %.1f s (%.1f/s), %ld errors; %ld jobs submitted, %ld cancelled\n",
              requests, wall, static_cast<double>(requests) / wall, errors, submitted.load(),
              cancelled.load());
  if (!slow.empty())
    std::printf("\nRead by a client of their own, one at a time (over 100 ms in the warm-up): %s\n",
                slow_list.c_str());

  // RSS: after the warm-up (the first fifth, at least 3 s) against the largest of the last fifth.
  const size_t n = samples.size();
  const size_t base_i = std::min(n - 1, std::max<size_t>(3, n / 5));
  long last_max = 0, last_workers_max = 0, peak = 0;
  for (size_t i = n - std::max<size_t>(1, n / 5); i < n; ++i)
    last_max = std::max(last_max, samples[i].daemon_kib),
    last_workers_max = std::max(last_workers_max, samples[i].workers_kib);
  for (auto& s : samples) peak = std::max(peak, s.daemon_kib);
  const double growth = static_cast<double>(last_max - samples[base_i].daemon_kib) / 1024;
  const double worker_growth =
      static_cast<double>(last_workers_max - samples[base_i].workers_kib) / 1024;
  std::printf("\n### RSS (VmRSS, MiB), every %zu s of %zu samples\n\n", std::max<size_t>(1, n / 20),
              n);
  std::printf(
      "| t (s) | daemon | workers (sum) | workers | requests so far |\n|---|---|---|---|---|\n");
  for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 20))
    std::printf("| %.0f | %.1f | %.1f | %d | %ld |\n", samples[i].t, samples[i].daemon_kib / 1024.0,
                samples[i].workers_kib / 1024.0, samples[i].workers, samples[i].requests);
  if ((n - 1) % std::max<size_t>(1, n / 20) != 0)  // the last sample, unless it was printed
    std::printf("| %.0f | %.1f | %.1f | %d | %ld |\n", samples[n - 1].t,
                samples[n - 1].daemon_kib / 1024.0, samples[n - 1].workers_kib / 1024.0,
                samples[n - 1].workers, samples[n - 1].requests);
  std::printf(
      "\ndaemon RSS: %.1f MiB at %.0f s (after warm-up), %.1f MiB at most in the last fifth "
      "(growth %+.1f MiB, bound %.0f), peak %.1f MiB; workers: growth %+.1f MiB\n",
      samples[base_i].daemon_kib / 1024.0, samples[base_i].t, last_max / 1024.0, growth,
      o.max_growth_mib, peak / 1024.0, worker_growth);
  std::fflush(stdout);
  bool ok = errors == 0 && growth <= o.max_growth_mib && submitted > 0;
  if (o.enforce_targets && over_target) ok = false;
  if (!ok)
    std::fprintf(stderr, "load_bench: FAILED (errors %ld, growth %.1f MiB, %d over target)\n",
                 errors, growth, over_target);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
}
