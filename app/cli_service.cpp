/** \file app/cli_service.cpp
 * Owns: the service commands: serve (the daemon, app/daemon.h), worker (its internal GPU
 * process), submit and cancel (clients of a running daemon's HTTP API, web/client.h).
 * Must not: speak HTTP itself or run jobs in the client.
 */
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/daemon.h"
#include "app/job_files.h"
#include "tuner/common/tuning_job.h"
#include "tuner/measure/arguments.h"
#include "variants/hash.h"
#include "web/client.h"
#include "web/server.h"

namespace gputune::app {
namespace {

std::string token_for(const cxxopts::ParseResult& r) {
  if (r.count("token")) return r["token"].as<std::string>();
  if (const char* t = std::getenv("GPUTUNE_TOKEN"); t && *t) return t;
  std::ifstream in(r["token-file"].as<std::string>());
  std::string t;
  std::getline(in, t);
  return t;
}

void add_client_options(cxxopts::Options& o) {
  o.add_options()("server", "daemon URL",
                  cxxopts::value<std::string>()->default_value("http://127.0.0.1:8080"))(
      "token", "write token (default: $GPUTUNE_TOKEN, else --token-file)",
      cxxopts::value<std::string>())("token-file", "file holding the token",
                                     cxxopts::value<std::string>()->default_value(
                                         db::default_database_path() + ".token"))("h,help", "help");
}

int print_reply(const web::Reply& rep, const std::string& what) {
  if (rep.status == 200 || rep.status == 201) {
    std::cout << what << ": " << rep.body.dump() << "\n";
    return 0;
  }
  std::cerr << "gputune: " << what << " failed";
  if (rep.status) std::cerr << " (HTTP " << rep.status << ")";
  std::cerr << ": " << rep.body.value("error", rep.body.dump());
  if (rep.body.contains("field") && !rep.body["field"].get<std::string>().empty())
    std::cerr << " [field " << rep.body["field"].get<std::string>() << "]";
  std::cerr << "\n";
  return rep.status == 0 ? 1 : 2;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  auto o = command_options(
      "gputune serve",
      "Daemon: HTTP API and dashboard; one worker process per GPU tunes queued jobs");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "port", "TCP port", cxxopts::value<int>()->default_value("8080"))(
      "bind", "address to listen on (loopback by default)",
      cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "kernel-timeout", "seconds a single measurement may take before its worker is killed",
      cxxopts::value<double>()->default_value("120"))("cache-dir", "cubin cache folder",
                                                      cxxopts::value<std::string>())(
      "no-gpu", "start no workers")("compile-nice", kCompileNiceHelp, cxxopts::value<int>())(
      "rebuild-nice", "nice steps (0-19) of the background rebuilds of slow cached results",
      cxxopts::value<int>()->default_value("19"))("h,help", "help");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, nullptr)) return *rc;
  ServeOptions so;
  so.compile_nice = apply_compile_nice(r);
  so.rebuild_nice = r["rebuild-nice"].as<int>();
  if (so.rebuild_nice < 0 || so.rebuild_nice > 19)
    throw std::invalid_argument("--rebuild-nice " + std::to_string(so.rebuild_nice) +
                                ": give nice steps from 0 (normal priority) to 19");
  so.db_path = db_of(r);
  so.port = r["port"].as<int>();
  so.bind = r["bind"].as<std::string>();
  so.kernel_timeout_s = r["kernel-timeout"].as<double>();
  if (so.port < 0 || so.port > 65535) throw std::invalid_argument("--port must be 0..65535");
  if (so.kernel_timeout_s <= 0) throw std::invalid_argument("--kernel-timeout must be positive");
  if (r.count("cache-dir")) so.cache_dir = r["cache-dir"].as<std::string>();
  so.no_gpu = r.count("no-gpu") > 0;
  so.self_exe = std::filesystem::read_symlink("/proc/self/exe").string();
  return serve(so);
}

int cmd_worker(int argc, char** argv) {
  auto o = command_options("gputune worker", "(internal) a daemon worker process for one GPU");
  o.add_options()("db", "database file", cxxopts::value<std::string>())(
      "device", "CUDA device ordinal", cxxopts::value<int>()->default_value("0"))(
      "cache-dir", "cubin cache folder", cxxopts::value<std::string>())(
      "compile-nice", kCompileNiceHelp, cxxopts::value<int>());
  auto r = o.parse(argc, argv);
  apply_compile_nice(r);
  WorkerOptions wo;
  wo.db_path = db_of(r);
  wo.device = r["device"].as<int>();
  if (r.count("cache-dir")) wo.cache_dir = r["cache-dir"].as<std::string>();
  return run_worker(wo);
}

int cmd_submit(int argc, char** argv) {
  auto o = command_options("gputune submit", "Queue a job on a running daemon");
  o.add_options()("job", "T1 job file", cxxopts::value<std::string>());
  add_client_options(o);
  o.parse_positional({"job"});
  o.positional_help("JOB");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "job")) return *rc;
  std::string file = r["job"].as<std::string>();
  Job job =
      tuner::load_tuning_job(file);  // the same checks as `gputune run`, before anything is sent
  const std::string kernel_source = load_kernel_source(job);
  // Sized as `run` sizes them before compiling: a BinaryRaw input that is missing or of the wrong
  // size is this machine's to fix, not the worker's to find.
  for (const ContextSpec& ctx : job.contexts)
    tuner::make_arguments(job, ctx, tuner::ArgumentContents::SizesOnly);
  // The headers and inputs the job reads travel with it: the daemon's worker runs it elsewhere.
  nlohmann::json files = nlohmann::json::array();
  std::size_t bytes = kernel_source.size();
  for (const JobFile& f : job_files(job, kernel_source)) {
    files.push_back({{"path", f.path}, {"base64", base64_encode(f.bytes)}});
    bytes += f.bytes.size() * 4 / 3;
  }
  if (bytes > web::kMaxJobRequestBytes) {
    std::cerr << "gputune: " << file << ": the kernel and the " << files.size()
              << " file(s) it reads come to " << (bytes >> 20) << " MiB as sent; a daemon takes "
              << (web::kMaxJobRequestBytes >> 20)
              << " MiB at most. Fix: fill large inputs with FillType Random or Constant instead of "
                 "BinaryRaw, or run the job with `gputune run`\n";
    return tuner::kExitBadInput;
  }
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  nlohmann::json body = {{"name", job.name},
                         {"job_file", std::filesystem::absolute(file).lexically_normal().string()},
                         // the text load_tuning_job read and checked (a number beyond a double
                         // among them refused there), not the file read a second time
                         {"document", nlohmann::json::parse(job.document)},
                         {"kernel_source", kernel_source},
                         {"files", files}};
  if (!ec) body["cwd"] = cwd.lexically_normal().string();
  return print_reply(web::post_json(r["server"].as<std::string>(), "/api/jobs", token_for(r), body),
                     "submitted");
}

int cmd_cancel(int argc, char** argv) {
  auto o = command_options("gputune cancel", "Cancel a queued or running job");
  o.add_options()("id", "job id (see the dashboard or /api/queue)", cxxopts::value<long>());
  add_client_options(o);
  o.parse_positional({"id"});
  o.positional_help("ID");
  auto r = o.parse(argc, argv);
  if (auto rc = help_or_missing(o, r, "id")) return *rc;
  return print_reply(web::post_json(r["server"].as<std::string>(),
                                    "/api/jobs/" + std::to_string(r["id"].as<long>()) + "/cancel",
                                    token_for(r), {}),
                     "cancel");
}

}  // namespace gputune::app
