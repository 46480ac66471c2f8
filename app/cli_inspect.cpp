/** \file app/cli_inspect.cpp
 * Owns: the commands that look at what is stored or present: best, show, runs, cache, devices.
 * Must not: write measurements (they only read the database, except `best --header`'s file and
 * `cache`'s trimming; `best --header --runtime` writes select/runtime_header.h's header).
 */
#include <algorithm>
#include <array>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "cuda/cache_admin.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "db/tuned_header.h"
#include "select/decision_table.h"
#include "select/runtime_header.h"
#include "select/select.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/measure/device_info.h"
#include "tuner/tools/generate.h"

namespace gputune::app {
namespace {

std::string local_time(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%d %H:%M", &tm);
  return out;
}

/// "2048,2048" or "2048x2048" as sizes; none when a part is not a positive integer.
std::optional<std::vector<std::int64_t>> parse_size(const std::string& text) {
  std::vector<std::int64_t> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, text.find('x') != std::string::npos ? 'x' : ',')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 15)
      return std::nullopt;
    out.push_back(std::stoll(part));
    if (out.back() < 1) return std::nullopt;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

/// `best KERNEL --device NAME --size N[,N...]`: what gputune::select answers for that input,
/// tuned or not, and how it got it.
int best_for_size(db::Store& store, const cxxopts::ParseResult& r) {
  const std::string kernel = r["kernel"].as<std::string>();
  const std::string size_text = r["size"].as<std::string>();
  const auto size = parse_size(size_text);
  if (!size) {
    std::cerr << "gputune: --size '" << size_text
              << "' is not a problem size. Fix: positive integers joined by ',' or 'x', as "
                 "2048,2048\n";
    return tuner::kExitBadInput;
  }
  if (!r.count("device")) {
    std::cerr << "gputune: --size needs --device NAME (the GPU to choose for; `gputune best "
              << kernel << "` lists the devices it was tuned on)\n";
    return tuner::kExitBadInput;
  }
  select::Input input{*size, {}};
  if (r.count("value"))
    for (const std::string& nv : r["value"].as<std::vector<std::string>>()) {
      const auto eq = nv.find('=');
      char* end = nullptr;
      const double v = eq == std::string::npos ? 0 : std::strtod(nv.c_str() + eq + 1, &end);
      if (eq == std::string::npos || eq == 0 || !end || *end) {
        std::cerr << "gputune: --value '" << nv << "' is not NAME=NUMBER\n";
        return tuner::kExitBadInput;
      }
      input.values[nv.substr(0, eq)] = v;
    }
  auto table = select::Table::from(select::table_from_store(store, kernel));
  if (!table) {
    std::cerr << "gputune: " << table.error().message << "\n";
    return tuner::kExitBadInput;
  }
  // A kernel named by a hash prefix: the table holds it by name.
  std::string name = kernel;
  if (table->kernels().size() == 1) name = table->kernels().front();
  const std::string device = r["device"].as<std::string>();
  const std::string arch = string_option(r, "arch");
  const auto choice = table->choose(name, {device, arch}, input);
  if (!choice) {
    std::cerr << "gputune: " << choice.error().message << "\n";
    return choice.error().code == select::Error::Code::kUnknownKernel ? 2 : tuner::kExitBadInput;
  }
  const select::Choice& c = *choice;
  if (r.count("json")) {
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const auto& [n, v] : c.params) params[n] = v;
    nlohmann::ordered_json j = {{"kernel", c.kernel},   {"device", c.device},
                                {"size", *size},        {"how", select::to_string(c.how)},
                                {"from", c.from},       {"configuration", c.config},
                                {"parameters", params}, {"explain", c.explain()}};
    if (c.has_geometry) j["grid"] = c.grid, j["block"] = c.block;
    if (c.measured_ms) j["time_ms"] = *c.measured_ms;
    if (c.expected)
      j["leave_one_out"] = {{"contexts", c.expected->contexts},
                            {"unknown", c.expected->unknown},
                            {"median", c.expected->median},
                            {"worst", c.expected->worst}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << c.explain() << "\n";
  for (const auto& [n, v] : c.params) std::cout << "  " << n << " = " << v << "\n";
  if (c.has_geometry)
    std::cout << "  grid " << c.grid[0] << "," << c.grid[1] << "," << c.grid[2] << "  block "
              << c.block[0] << "," << c.block[1] << "," << c.block[2] << "\n";
  return 0;
}

/// `best KERNEL --header FILE --runtime`: the decision table as a self-contained C++17 header
/// (select/runtime_header.h).
int write_runtime_header(const cxxopts::ParseResult& r, db::Store& store,
                         const std::string& kernel) {
  if (r.count("context")) {
    std::cerr << "gputune: --context is given with --runtime: the runtime header chooses by "
                 "problem size at run time. Fix: leave --context out (or --runtime, for the "
                 "#define header of one context).\n";
    return tuner::kExitBadInput;
  }
  select::DecisionTable table = select::table_from_store(store, kernel);
  const std::string device = string_option(r, "device");
  std::string text;
  for (select::KernelTable& k : table.kernels) {
    if (!device.empty())
      std::erase_if(k.devices, [&](const select::DeviceTable& d) { return d.name != device; });
    try {
      text += select::runtime_header(k, {db_of(r), today_utc()});
    } catch (const std::invalid_argument& e) {
      std::cerr << "gputune: " << e.what() << "\n";
      return tuner::kExitBadInput;
    }
  }
  if (text.empty()) {
    std::cerr << "gputune: no winner stored for kernel '" << kernel
              << (device.empty() ? "" : "' on '" + device) << "' in " << db_of(r)
              << ". Fix: tune it first (`gputune run`), or name a kernel `gputune best` lists.\n";
    return tuner::kExitBadInput;
  }
  return write_output(r["header"].as<std::string>(), text);
}

}  // namespace

int cmd_best(int argc, char** argv) {
  auto o = command_options("gputune best", "Look up the stored winner of a kernel");
  o.add_options()("kernel", "kernel name or hash prefix", cxxopts::value<std::string>())(
      "context", "context label, e.g. 4096x4096", cxxopts::value<std::string>())(
      "device", "device name", cxxopts::value<std::string>())(
      "size", "choose for this problem size (tuned or not), e.g. 2048,2048: needs --device",
      cxxopts::value<std::string>())("arch",
                                     "--size: the device's architecture (sm_90), to "
                                     "choose from another GPU of it",
                                     cxxopts::value<std::string>())(
      "value", "--size: an input value NAME=NUMBER the job's contexts set (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "db", "database file", cxxopts::value<std::string>())("json", "print JSON")(
      "header", "write a C/C++ header of the winners to FILE ('-': stdout)",
      cxxopts::value<std::string>())(
      "runtime",
      "with --header: a C++17 header with choose(device, arch, sizes) (runtime selection)")(
      "h,help", "help");
  o.parse_positional({"kernel"});
  o.positional_help("KERNEL");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "kernel")) return *rc;
  db::Store store = existing_store(r);
  if (r.count("size")) return best_for_size(store, r);
  std::string kernel = r["kernel"].as<std::string>();
  auto ws = store.winners(kernel, string_option(r, "context"), string_option(r, "device"));
  // A naive kernel's winner is generated code: the command that writes its source. A run that
  // fell back to block shape only tuned the kernel as written: why, and no command.
  struct NaiveWinner {
    std::optional<std::string> command;
    std::string fallback;
  };
  auto naive_winner = [&](const db::WinnerRow& w) {
    NaiveWinner n;
    if (auto run = store.run(w.run_id); run && !run->naive_fallback.empty())
      n.fallback = run->naive_fallback;
    else if (run)
      n.command =
          tuner::generate_command(store.run_job_document(w.run_id), run->job_file, w.config_key);
    return n;
  };
  if (r.count("header") && r.count("runtime")) return write_runtime_header(r, store, kernel);
  if (r.count("header")) {
    db::HeaderOptions h{string_option(r, "context"), string_option(r, "device"), db_of(r),
                        today_utc()};
    std::string text;
    try {
      text = db::tuned_header(store, kernel, h);
    } catch (const std::invalid_argument& e) {
      std::cerr << "gputune: " << e.what() << "\n";
      return tuner::kExitBadInput;
    }
    // A naive kernel's winners are generated code: the #defines name what was chosen, and the
    // naive source ignores them.
    for (const db::WinnerRow& w : ws)
      if (auto cmd = naive_winner(w).command) {
        std::cerr << "gputune: note: kernel '" << w.kernel
                  << "' was tuned as a naive kernel: its winners are generated variants, which "
                     "these #defines do not make of its source; `"
                  << *cmd << "` writes the source of the winner for " << w.context_label << " on "
                  << w.device << " (`gputune best` shows every winner's command)\n";
        break;
      }
    return write_output(r["header"].as<std::string>(), text);
  }
  if (ws.empty()) {
    std::cerr << "gputune: no winner stored for kernel '" << kernel << "'";
    auto ctxs = store.contexts(kernel);
    if (!ctxs.empty()) {
      std::cerr << "; its contexts are:";
      for (auto& c : ctxs) std::cerr << " " << c.label << " (" << c.device << ")";
    }
    std::cerr << "\n";
    return 2;
  }
  for (auto& w : ws) {
    if (r.count("json")) {
      nlohmann::json j = {
          {"kernel", w.kernel},          {"context", w.context_label},
          {"device", w.device},          {"configuration", nlohmann::json::parse(w.params_json)},
          {"time_ms", w.time_ms},        {"run", w.run_id},
          {"provisional", w.provisional}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << w.kernel << "  " << w.context_label << "  " << w.device << "  " << w.time_ms
                << " ms  " << w.params_json << "\n";
      if (w.provisional)
        std::cout
            << "  provisional: the fastest first pass of run " << w.run_id
            << ", which stopped before re-measuring its top variants (`gputune run ... --resume "
            << w.run_id << "` finishes it)\n";
      if (const NaiveWinner n = naive_winner(w); n.command)
        std::cout << "  a generated variant of the naive kernel; its source: " << *n.command
                  << "\n";
      else if (!n.fallback.empty())
        std::cout << "  the naive kernel as written, launched at this block shape (tuned over "
                     "block shape only: "
                  << n.fallback << ")\n";
    }
  }
  return 0;
}

int cmd_show(int argc, char** argv) {
  auto o = command_options("gputune show", "Show a run and its measurements");
  o.add_options()("run", "run id", cxxopts::value<long>())("db", "database file",
                                                           cxxopts::value<std::string>())(
      "n,limit", "measurements to list per context", cxxopts::value<int>()->default_value("10"))(
      "failures", "list failures with their reasons")("h,help", "help");
  o.parse_positional({"run"});
  o.positional_help("RUN");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "run")) return *rc;
  db::Store store = existing_store(r);
  auto run = store.run(r["run"].as<long>());
  if (!run) {
    std::cerr << "gputune: no run " << r["run"].as<long>() << " in " << db_of(r)
              << " (see `gputune runs`)\n";
    return 2;
  }
  std::cout << "run " << run->id << " (" << run->uid << ") job " << run->job_name << " ["
            << run->job_file << "]\n"
            << "status " << run->status << ", strategy " << run->strategy << ", " << run->done
            << "/" << run->total << " done, " << store.timed_pairs(run->id) << " timed, started "
            << run->started_at << ", finished " << run->finished_at;
  if (run->seconds_spent) {  // what the job's time budget counts, over all the run's processes
    std::ostringstream spent;
    spent << std::fixed << std::setprecision(1) << *run->seconds_spent;
    std::cout << ", " << spent.str() << " s measuring";
  }
  if (run->budget) std::cout << ", budget " << *run->budget << " configurations";
  std::cout << "\n" << run->message << "\n";
  if (const auto plan = store.run_plan(run->id); plan && plan->searched)
    std::cout << "plan: " << plan->summary << "\n";
  if (!run->naive_fallback.empty())
    std::cout << "block shape only: " << run->naive_fallback
              << " (the naive kernel is outside the generator's subset; its variants are the "
                 "kernel as written, launched at each block shape)\n";
  {
    std::istringstream notes(run->notes);
    for (std::string n; std::getline(notes, n);)
      if (!n.empty()) std::cout << "note: " << n << "\n";
  }
  auto ms = store.measurements(run->id);
  // Per outcome; what the pruner removed, per rule.
  std::map<std::string, int> counts;
  for (auto& m : ms) {
    if (m.status == db::Status::kConstraints && m.reason.rfind("pruned by rule ", 0) == 0) {
      counts[m.reason.substr(0, m.reason.find(':'))]++;  // "pruned by rule spills"
    } else {
      counts[m.status.str()]++;
    }
  }
  for (auto& [k, v] : counts) std::cout << "  " << k << ": " << v << "\n";
  // The timed variants, fastest first; with --failures what failed or was removed. A run that
  // timed nothing (no GPU, a prune) lists what it compiled, fastest predicted first.
  const size_t limit = static_cast<size_t>(std::max(r["limit"].as<int>(), 0));
  const bool failures = r.count("failures") > 0;
  std::vector<const db::MeasurementRow*> list;
  for (const auto& m : ms)
    if (failures ? m.status.failed() : m.status == db::Status::kCorrect) list.push_back(&m);
  if (!failures && list.empty()) {
    for (const auto& m : ms)
      if (m.status == db::Status::kCompiled) list.push_back(&m);
    const auto predicted = [](const db::MeasurementRow* m) {
      return m->predicted_ms.value_or(std::numeric_limits<double>::infinity());
    };
    std::stable_sort(list.begin(), list.end(), [&](auto* a, auto* b) {
      return a->context_label != b->context_label ? a->context_label < b->context_label
                                                  : predicted(a) < predicted(b);
    });
    if (!list.empty())
      std::cout << "nothing was timed; the compiled variants"
                << (list.front()->predicted_ms ? ", fastest predicted first" : "") << ":\n";
  }
  // Each context in the order the run measured them (its job's), each with its first `limit`.
  std::map<std::int64_t, std::vector<const db::MeasurementRow*>> by_context;
  for (const auto* m : list) by_context[m->context_id].push_back(m);
  for (const auto& [context, rows] : by_context) {
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      const auto& m = *rows[i];
      std::cout << "  " << m.context_label << "  " << m.status << "  ";
      if (m.time_ms) std::cout << *m.time_ms << " ms  ";
      if (m.predicted_ms && !m.time_ms) std::cout << "predicted " << *m.predicted_ms << " ms  ";
      if (m.registers) std::cout << *m.registers << " regs  ";
      if (m.occupancy) std::cout << "occ " << *m.occupancy << "  ";
      std::cout << m.params_json;
      if (!m.reason.empty()) std::cout << "  (" << m.reason << ")";
      std::cout << "\n";
    }
    if (rows.size() > limit)
      std::cout << "  (" << rows.size() - limit << " more in " << rows.front()->context_label
                << "; -n N lists more)\n";
  }
  return 0;
}

int cmd_runs(int argc, char** argv) {
  auto o = command_options("gputune runs", "List recent runs");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "n,limit", "how many", cxxopts::value<int>()->default_value("20"))("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  const int limit = r["limit"].as<int>();
  if (limit < 1) {
    std::cerr << "gputune runs: --limit " << limit << ": give a positive number of runs\n";
    return tuner::kExitBadInput;
  }
  db::Store store = existing_store(r);
  const auto runs = store.runs(limit);
  if (runs.empty()) {
    std::cout << "no runs in " << db_of(r) << "\n";
    return 0;
  }
  // Columns as wide as their widest entry; the message (why a run failed or stopped) last.
  // progress: (context, variant) pairs decided of those planned; timed: those with a verified
  // time (none without a GPU, none for `prune`).
  std::vector<std::array<std::string, 6>> rows{
      {"run", "status", "job", "progress", "timed", "started"}};
  for (const auto& run : runs)
    rows.push_back({std::to_string(run.id), std::string(text(run.status)), run.job_name,
                    std::to_string(run.done) + "/" + std::to_string(run.total),
                    std::to_string(store.timed_pairs(run.id)), run.started_at});
  std::array<size_t, 6> width{};
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 0; c < rows[i].size(); ++c)
      std::cout << (c == 0 || c == 4 ? std::string(width[c] - rows[i][c].size(), ' ') + rows[i][c]
                                     : rows[i][c] + std::string(width[c] - rows[i][c].size(), ' '))
                << "  ";
    std::string message = i == 0 ? "message" : runs[i - 1].message;
    if (const size_t nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    if (message.size() > 100) message = message.substr(0, 97) + "...";
    std::cout << message << "\n";
  }
  if (runs.size() == static_cast<size_t>(limit))
    std::cout << "(the " << limit << " most recent; -n N lists more)\n";
  return 0;
}

int cmd_cache(int argc, char** argv) {
  auto o = command_options("gputune cache",
                           "What the cache of compiled variants and traffic analyses holds, and "
                           "its size limit. After a command that wrote to it, a cache over its "
                           "limit loses its least recently used entries down to 90% of the limit.");
  o.add_options()("cache-dir",
                  "the cache folder (default: $GPUTUNE_CACHE_DIR, else ~/.cache/gputune)",
                  cxxopts::value<std::string>())(
      "max-size", "set the size limit (10G, 500M; 0: none; default 10G) and trim to it now",
      cxxopts::value<std::string>())(
      "clear", "remove every entry (the limit stays; other files are never touched)")("h,help",
                                                                                      "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  if (!r.unmatched().empty())
    throw JobError("command line", r.unmatched().front(),
                   "an argument `gputune cache` does not take", "see `gputune cache --help`");
  const std::string option = r.count("cache-dir") ? r["cache-dir"].as<std::string>() : "";
  if (option == "-")
    throw JobError("command line", "--cache-dir", "'-' (no cache) has nothing to show or trim",
                   "name the cache folder, or leave --cache-dir out for the default one");
  const std::filesystem::path dir = tuner::cache_for(option).dir();
  auto print_removed = [](const cuda::TrimResult& t) {
    std::cout << "removed " << t.removed_entries
              << (t.removed_entries == 1 ? " entry (" : " entries (")
              << cuda::format_size(t.removed_bytes) << ")\n";
  };
  if (r.count("clear") && r.count("max-size"))
    throw JobError("command line", "--clear", "given with --max-size",
                   "give one: --clear empties the cache, --max-size limits it");
  std::optional<cuda::TrimResult> trimmed;  // its `after` is what the folder holds now
  if (r.count("clear")) {
    trimmed = cuda::trim_cache(dir, 0);
    print_removed(*trimmed);
  } else if (r.count("max-size")) {
    const std::uint64_t bytes =
        cuda::size_of(r["max-size"].as<std::string>(), "command line", "--max-size");
    cuda::set_cache_limit(dir, bytes);
    if (const char* env = std::getenv("GPUTUNE_CACHE_MAX_SIZE"); env && *env)
      std::cout << "note: GPUTUNE_CACHE_MAX_SIZE=" << env
                << " is set and overrides this limit while it is\n";
    if (bytes > 0) {
      trimmed = cuda::trim_cache(dir, bytes);
      print_removed(*trimmed);
    }
  }
  const cuda::CacheUsage u = trimmed ? trimmed->after : cuda::cache_usage(dir);
  const cuda::CacheLimit limit = cuda::cache_limit(dir);
  std::error_code ec;
  std::cout << "cache folder   " << dir.string()
            << (std::filesystem::exists(dir, ec) ? "" : " (not created yet: nothing cached)")
            << "\n"
            << "cubins         " << u.cubins.entries << " compiled variants, "
            << cuda::format_size(u.cubins.bytes) << "\n"
            << "traffic        " << u.traffic.entries << " analysis reports, "
            << cuda::format_size(u.traffic.bytes) << "\n";
  if (u.abandoned.entries > 0)
    std::cout << "unfinished     " << u.abandoned.entries << " writes abandoned over an hour ago, "
              << cuda::format_size(u.abandoned.bytes) << " (the next trim removes them)\n";
  std::cout << "total          " << cuda::format_size(u.bytes()) << " on disk of "
            << (limit.bytes ? cuda::format_size(limit.bytes) : std::string("no limit")) << " ("
            << (limit.source == "default" ? "the default" : limit.source) << ")\n";
  if (u.oldest_use > 0)
    std::cout << "last used      " << local_time(u.oldest_use) << " (least recently used entry) to "
              << local_time(u.newest_use) << "\n";
  if (u.other_files > 0)
    std::cout << "other files    " << u.other_files
              << " not written by gputune's caches (never removed)\n";
  return 0;
}

int cmd_devices() {
  const auto& d = cuda::Driver::instance();
  std::cout << "NVRTC " << cuda::nvrtc_version() << "\n";
  if (!d.available()) {
    std::cout << "no CUDA device: " << d.unavailable_reason() << "\n"
              << "gputune can still build spaces, compile and inspect variants (`gputune run` "
                 "stores them and exits with code 3), import and export results.\n";
    return tuner::kExitNoDevice;
  }
  std::cout << "driver " << d.version() << "\n";
  for (int i = 0; i < d.device_count(); ++i) {
    auto info = tuner::query_device(i);
    std::cout << i << ": " << info.name << "  " << info.limits.arch() << "  "
              << info.limits.sm_count << " SMs  " << info.total_mem / (1 << 20) << " MiB\n";
  }
  return 0;
}

}  // namespace gputune::app
