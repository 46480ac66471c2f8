/** \file app/main.cpp
 * gputune: the command line. A thin shell over the libraries: main() names every command and
 * dispatches to its function (app/cli.h; one file per command group), and turns errors into
 * messages and exit codes (tuner/common/exit_codes.h).
 */
#include <cxxopts.hpp>
#include <iostream>
#include <stdexcept>
#include <string>

#include "app/cli.h"
#include "db/store.h"
#include "pruner/device_spec.h"
#include "tuner/common/exit_codes.h"
#include "variants/job.h"

using namespace gputune;

namespace {

const char* kUsage = R"(gputune: GPU kernel autotuner

usage: gputune COMMAND [options]

tuning:
  run JOB            compile, verify and time every configuration of a T1 job; store it all
  batch SUITE...     run every job of a suite (suite files, folders, jobs); report regressions
  space JOB          --count: number of valid configurations; --list: each as a JSON line
  generate FILE.cu   rewrite a naive kernel (--kernel NAME) into variants (--out DIR, --check)
  check JOB          run configurations on the CPU against the reference (--size 37, no GPU needed)
  prune JOB          compile for a device (--device NAME, no GPU needed) and apply the pruning rules
  replay JOB         score strategies (and the pruner) against recorded measurements (--measurements FILE)
inspection:
  best KERNEL        the stored winner(s) of a kernel (--context LABEL, --device NAME; --size N,N: any input)
  show RUN           a run's summary and its measurements
  runs               the most recent runs
  cache              what the cubin and analysis cache holds; --max-size SIZE limits it, --clear
  devices            the CUDA devices the driver reports (or why there are none)
interchange:
  export --t4        T4 results of a run (--run ID, --context LABEL, -o FILE)
  export --decisions the decision table gputune::select reads at run time (FILE, --kernel NAME)
  import FILE        a Kernel Tuner cache or T4 file as measurements of its device (--kernel, --device)
  db merge OUT SHARD...  merge databases of several machines into OUT (idempotent, one transaction)
service:
  serve              the daemon: HTTP API + dashboard, one worker process per GPU tuning queued jobs
  submit JOB         queue a job on a running daemon (--server URL)
  cancel ID          cancel a queued or running job (--server URL)

Run `gputune COMMAND --help` for a command's options.
exit codes: 0 ok, 1 internal error, 2 bad input, 3 no CUDA device (compiled, stored, not timed),
            4 no correct variant, 5 interrupted, 6 check: some configurations differ,
            7 batch: a context's best time regressed)";

}  // namespace

int main(int argc, char** argv) {
  using namespace gputune::app;
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage << "\n";
    return argc < 2 ? tuner::kExitBadInput : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::cout << "gputune " << GPUTUNE_VERSION << "\n";
    return 0;
  }
  try {
    if (cmd == "run") return cmd_run(argc - 1, argv + 1);
    if (cmd == "batch") return cmd_batch(argc - 1, argv + 1);
    if (cmd == "space") return cmd_space(argc - 1, argv + 1);
    if (cmd == "generate") return cmd_generate(argc - 1, argv + 1);
    if (cmd == "check") return cmd_check(argc - 1, argv + 1);
    if (cmd == "best") return cmd_best(argc - 1, argv + 1);
    if (cmd == "prune") return cmd_prune(argc - 1, argv + 1);
    if (cmd == "replay") return cmd_replay(argc - 1, argv + 1);
    if (cmd == "show") return cmd_show(argc - 1, argv + 1);
    if (cmd == "runs") return cmd_runs(argc - 1, argv + 1);
    if (cmd == "export") return cmd_export(argc - 1, argv + 1);
    if (cmd == "import") return cmd_import(argc - 1, argv + 1);
    if (cmd == "db") return cmd_db(argc - 1, argv + 1);
    if (cmd == "devices") return cmd_devices();
    if (cmd == "cache") return cmd_cache(argc - 1, argv + 1);
    if (cmd == "serve") return cmd_serve(argc - 1, argv + 1);
    if (cmd == "worker") return cmd_worker(argc - 1, argv + 1);
    if (cmd == "submit") return cmd_submit(argc - 1, argv + 1);
    if (cmd == "cancel") return cmd_cancel(argc - 1, argv + 1);
    std::cerr << "gputune: unknown command '" << cmd << "'\n" << kUsage << "\n";
    return tuner::kExitBadInput;
  } catch (const JobError& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const pruner::DeviceError& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const db::DbError& e) {
    std::cerr << "gputune: database error: " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "gputune " << cmd << ": " << e.what() << " (see `gputune " << cmd << " --help`)\n";
    return tuner::kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "gputune " << cmd << ": " << e.what() << "\n";
    return tuner::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "gputune: error: " << e.what() << "\n";
    return tuner::kExitInternal;
  }
}
