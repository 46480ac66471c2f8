// `gputune` end to end on a machine without a GPU (or with --no-gpu): everything up to timing runs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "db/store.h"
#include "test_util.h"
#include "tuner/common/command_line.h"
#include "tuner/tools/generate.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;
using test::run_gputune;

TEST(Cli, RunWithoutGpuCompilesInspectsAndStoresEverything) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  std::string args = "run '" + (test::examples_dir() / "vector_add.json").string() + "' --db '" +
                     db + "' --cache-dir '" + (dir / "cache").string() + "' --no-gpu";
  auto r = run_gputune(args);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("nothing was timed because no CUDA device was found"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("compiled 24"), std::string::npos) << r.out;
  db::Store store(db);
  auto ms = store.measurements(0);
  ASSERT_EQ(ms.size(), 48u);  // 24 configurations x 2 contexts
  for (auto& m : ms) {
    EXPECT_EQ(m.status, db::Status::kCompiled);
    ASSERT_TRUE(m.registers);
    EXPECT_GT(*m.registers, 0);
    ASSERT_TRUE(m.occupancy);
    EXPECT_GT(*m.occupancy, 0);
    EXPECT_EQ(m.cubin_hash.size(), 64u);
    EXPECT_FALSE(m.grid.empty());
  }
  auto run = store.run(ms[0].run_id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, db::RunStatus::kNoDevice);
  EXPECT_EQ(run->done, 48);                  // every pair decided ...
  EXPECT_EQ(store.timed_pairs(run->id), 0);  // ... and none timed, which `show` and `runs` say
  auto show = run_gputune("show " + std::to_string(run->id) + " --db '" + db + "'");
  EXPECT_NE(show.out.find("48/48 done, 0 timed"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("measured"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("nothing was timed; the compiled variants:\n  1M  compiled  "),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("\n  (14 more in 1M; -n N lists more)\n  16M  compiled  "),
            std::string::npos)
      << show.out;  // each context in the job's order, with its first 10
  EXPECT_EQ(store.contexts("vector_add").size(), 2u);
  EXPECT_TRUE(store.winners("vector_add").empty());  // nothing timed, nothing wins
  // Re-running serves every cubin from the cache.
  auto again = run_gputune(args);
  EXPECT_NE(again.out.find("(24 from cache)"), std::string::npos) << again.out;
  EXPECT_EQ(store.runs().size(), 2u);
}

// --resume names a run of this job, searched with the same strategy; anything else is bad input,
// said before anything is compiled.
TEST(Cli, ResumeIsCheckedBeforeAnythingIsCompiled) {
  test::TempDir dir;
  const std::string db = " --db '" + (dir / "g.db").string() + "'";
  const std::string cache = " --cache-dir '" + (dir / "cache").string() + "' --no-gpu";
  const std::string vector_add = "'" + (test::examples_dir() / "vector_add.json").string() + "'";
  const std::string matmul = "'" + (test::examples_dir() / "matmul.json").string() + "'";
  ASSERT_EQ(run_gputune("run " + vector_add + db + cache).exit_code, 3);
  ASSERT_EQ(run_gputune("prune " + vector_add + db + " --device h100-sxm").exit_code, 0);
  auto cubins = [&] {
    size_t n = 0;
    for (auto& e : fs::recursive_directory_iterator(dir / "cache"))
      n += e.path().extension() == ".cubin";
    return n;
  };
  const size_t before = cubins();
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {matmul + " --resume 1",
            "cannot resume run 1: it ran job 'vector_add', not 'matmul'. Fix: give the job "
            "file of that run, or leave out --resume"},
           {vector_add + " --resume 9", "cannot resume run 9: " + (dir / "g.db").string() +
                                            " has no such run. Fix: see `gputune runs --db "},
           {vector_add + " --resume 1 --strategy random",
            "cannot resume run 1: it searched with strategy brute_force, this job with random. "
            "Fix: add --strategy brute_force"},
           {vector_add + " --resume 2",
            "cannot resume run 2: it is a prune, which measured nothing that a run could go on "
            "with. Fix: leave out --resume"}}) {
    auto r = run_gputune("run " + c.args + db + cache);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find("field '--resume': " + c.says), std::string::npos) << r.out;
  }
  EXPECT_EQ(cubins(), before);  // matmul was not compiled
  EXPECT_EQ(db::Store((dir / "g.db").string()).runs().size(), 2u);
  EXPECT_EQ(run_gputune("run " + vector_add + " --resume 1" + db + cache).exit_code, 3);
}

// A resumed run goes on with the budget it planned with (or the one --budget gives), and refuses a
// job or kernel edited since: one run must not mix two spaces or two kernels.
TEST(Cli, AResumedRunKeepsItsBudgetAndRefusesAnEditedJobOrKernel) {
  test::TempDir dir;
  fs::copy(test::examples_dir() / "vector_add.json", dir / "job.json");
  fs::copy(test::examples_dir() / "vector_add.cu", dir / "vector_add.cu");
  const std::string base = "run '" + (dir / "job.json").string() + "' --db '" +
                           (dir / "g.db").string() + "' --cache-dir '" + (dir / "cache").string() +
                           "' --no-gpu --strategy random";
  // Runs `base + args`: the exit code and a line of what it says.
  auto expect = [&](const std::string& args, int code, const std::string& says) {
    auto r = run_gputune(base + args);
    EXPECT_EQ(r.exit_code, code) << args << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << ": " << r.out;
  };
  expect(" --budget 3", 3, "planned 4,");  // 3 and the default configuration
  auto budget_of_run_1 = [&] { return db::Store((dir / "g.db").string()).run(1)->budget; };
  EXPECT_EQ(budget_of_run_1(), 3);
  // Typed without --budget: the job has none, the run had 3.
  expect(" --resume 1", 3,
         "run 1 goes on with the budget it planned with: 3 configurations (the job says no "
         "budget)");
  expect(" --resume 1", 3, "planned 4,");
  // --budget says otherwise: that, and a note.
  expect(" --resume 1 --budget 5", 3,
         "run 1 planned with 3 configurations; it goes on with --budget 5 configurations");
  EXPECT_EQ(budget_of_run_1(), 5);

  // The same job written another way is the same job.
  const std::string text = test::read_file(dir / "job.json");
  test::write_file(dir / "job.json", nlohmann::json::parse(text).dump(2));
  expect(" --resume 1", 3, "no CUDA device");
  // Another space is not.
  std::string edited = text;
  edited.replace(edited.find("[1, 2, 4, 8]"), 12, "[1, 2, 4]");
  test::write_file(dir / "job.json", edited);
  expect(" --resume 1", 2,
         "field 'ConfigurationSpace': cannot resume run 1: the job changed since that run "
         "started (ConfigurationSpace differ). Fix: leave out --resume to start a new run");
  // Nor another kernel.
  test::write_file(dir / "job.json", text);
  test::write_file(dir / "vector_add.cu",
                   test::read_file(dir / "vector_add.cu") + "\n// edited since\n");
  expect(" --resume 1", 2,
         "field 'KernelSpecification.KernelFile': cannot resume run 1: the kernel's source "
         "changed since that run measured it");
  EXPECT_EQ(db::Store((dir / "g.db").string()).runs().size(), 1u);
}

// --strategy and --budget replace the job's GPUTune.Search.Strategy and Budget (a model proof
// measures a whole space with brute force whatever the job says); bad values are refused.
TEST(Cli, StrategyAndBudgetFromTheCommandLine) {
  test::TempDir dir;
  const std::string base = "run '" + (test::examples_dir() / "matmul.json").string() + "' --db '" +
                           (dir / "g.db").string() + "' --cache-dir '" + (dir / "cache").string() +
                           "' --no-gpu";
  auto r = run_gputune(base + " --strategy random --budget 5");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  // Five random configurations, and the default one as the reference.
  EXPECT_NE(r.out.find("planned 6,"), std::string::npos) << r.out;
  auto bad = run_gputune(base + " --strategy bogus");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("'--strategy': unknown strategy 'bogus'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("brute_force, random, portfolio or model_guided"), std::string::npos)
      << bad.out;
  auto zero = run_gputune(base + " --budget 0");
  EXPECT_EQ(zero.exit_code, 2) << zero.out;
  EXPECT_NE(zero.out.find("'--budget'"), std::string::npos) << zero.out;
}

// Without a GPU there are no rates, so a model_guided run has nothing to predict with: it applies
// the resource rules and does not parse a single variant for the traffic model.
TEST(Cli, AModelGuidedRunWithoutAGpuSkipsTheTrafficAnalysis) {
  test::TempDir dir;
  const fs::path cache = dir / "cache";
  auto r = run_gputune("run '" + (test::examples_dir() / "vector_add.json").string() + "' --db '" +
                       (dir / "g.db").string() + "' --cache-dir '" + cache.string() +
                       "' --no-gpu --strategy model_guided");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("gputune: model: not run without a GPU (no rates to predict with"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gputune: pruner: resources 0 spills 0 duplicate "), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("variants predicted"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(cache));  // the cubins are there
  EXPECT_FALSE(fs::exists(cache / "traffic")) << "a traffic analysis ran";
  EXPECT_NE(r.out.find("compiled and inspected 24 of 24 variants"), std::string::npos) << r.out;
}

// The cache folder: `gputune cache` shows and limits it; a run that wrote to a cache over its
// limit trims the least recently used entries, and one that only read from it does not look.
TEST(Cli, TheCacheIsShownLimitedAndTrimmedAfterARunThatFilledIt) {
  test::TempDir dir;
  const fs::path cache = dir / "cache";
  const std::string key(64, 'a');
  for (const char* ext : {".cubin", ".json"}) {  // an entry last used yesterday, 2 MiB
    fs::create_directories(cache / "aa");
    test::write_file(cache / "aa" / (key + ext), std::string(1 << 20, 'x'));
    fs::last_write_time(cache / "aa" / (key + ext),
                        fs::file_time_type::clock::now() - std::chrono::hours(24));
  }
  test::write_file(cache / "keep.txt", "not the cache's");
  const std::string c = " --cache-dir '" + cache.string() + "'";
  const std::string run = "run '" + (test::examples_dir() / "vector_add.json").string() +
                          "' --no-gpu -q --db '" + (dir / "g.db").string() + "'" + c;
  auto limited = [](const std::string& size, const std::string& args) {
    return test::run_command("GPUTUNE_CACHE_MAX_SIZE=" + size + " '" + GPUTUNE_BINARY + "' " +
                             args);
  };
  auto r = limited("1M", run);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("removed 1 entry (2.0 MiB)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(cache / "aa" / (key + ".cubin")));
  auto show = run_gputune("cache" + c);
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("cubins         24 compiled variants"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("of 10.0 GiB (the default)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("other files    1 not written by gputune"), std::string::npos)
      << show.out;

  // Everything from the cache: nothing written, so nothing trimmed, even far over the limit.
  r = limited("1K", run);
  EXPECT_NE(r.out.find("(24 from cache)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("removed"), std::string::npos) << r.out;

  // A limit of the folder's own, kept for later commands.
  show = run_gputune("cache --max-size 100K" + c);
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("removed "), std::string::npos) << show.out;
  EXPECT_EQ(test::read_file(cache / "max-size"), "102400\n");
  EXPECT_NE(show.out.find("of 100.0 KiB (" + (cache / "max-size").string() + ")"),
            std::string::npos)
      << show.out;
  r = run_gputune(run);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("limit (" + (cache / "max-size").string()), std::string::npos) << r.out;

  for (const char* bad : {"cache --max-size lots", "cache --clear --max-size 1G", "cache extra",
                          "cache --cache-dir -"}) {
    r = run_gputune(std::string(bad) +
                    (std::string(bad).find("cache-dir") == std::string::npos ? c : ""));
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("Fix:"), std::string::npos) << bad << "\n" << r.out;
  }
  r = run_gputune("cache --clear" + c);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("total          0 B on disk"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(cache / "keep.txt"));
}

TEST(Cli, SpaceCountAndList) {
  auto job = "'" +
             (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json").string() +
             "'";
  auto c = run_gputune("space " + job + " --count");
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_EQ(c.out, "11130\n");
  auto l = run_gputune("space " + job + " --list");
  EXPECT_EQ(l.exit_code, 0);
  std::istringstream in(l.out);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.size(), 8u);
    ++n;
  }
  EXPECT_EQ(n, 11130u);
  auto summary = run_gputune("space " + job);
  EXPECT_NE(summary.out.find("\"tile_size_x > 1 or tile_stride_x == 0\" removed 1696"),
            std::string::npos)
      << summary.out;
}

TEST(Cli, ImportBestShowAndExport) {
  test::TempDir dir;
  std::string db = " --db '" + (dir / "g.db").string() + "'";
  auto imp = run_gputune(
      "import '" +
      (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string() + "'" +
      db);
  ASSERT_EQ(imp.exit_code, 0) << imp.out;
  EXPECT_NE(imp.out.find("imported 11130 measurements"), std::string::npos) << imp.out;
  auto best = run_gputune("best dedispersion_kernel --json" + db);
  ASSERT_EQ(best.exit_code, 0) << best.out;
  auto j = nlohmann::json::parse(best.out);
  EXPECT_EQ(j["device"], "NVIDIA RTX A4000");
  EXPECT_EQ(j["configuration"].size(), 8u);
  auto miss = run_gputune("best no_such_kernel" + db);
  EXPECT_EQ(miss.exit_code, 2);
  EXPECT_NE(miss.out.find("no winner stored"), std::string::npos);
  auto show = run_gputune("show 1" + db);
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("correct: 11130"), std::string::npos) << show.out;
  EXPECT_EQ(run_gputune("show 99" + db).exit_code, 2);
  // `runs`: a table with a header, and each run's message.
  auto runs = run_gputune("runs" + db);
  EXPECT_EQ(runs.exit_code, 0);
  EXPECT_EQ(runs.out.rfind("run  status    job                  progress     timed  started", 0),
            0u)
      << runs.out;
  EXPECT_NE(runs.out.find("  1  imported  dedispersion_kernel  11130/11130  11130  "),
            std::string::npos)
      << runs.out;
  EXPECT_NE(runs.out.find("imported from "), std::string::npos) << runs.out;
  // Reading commands never create a database: a mistyped --db is an error naming it.
  const std::string missing = (dir / "typo.db").string();
  for (const std::string cmd : {"runs", "show 1", "best dedispersion_kernel", "export --t4"}) {
    auto r = run_gputune(cmd + " --db '" + missing + "'");
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("field '--db': there is no database at " + missing), std::string::npos)
        << cmd << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(missing));
  auto out = (dir / "t4.json").string();
  auto ex = run_gputune("export --t4 --run 1 -o '" + out + "'" + db);
  ASSERT_EQ(ex.exit_code, 0) << ex.out;
  auto t4 = nlohmann::json::parse(test::read_file(out));
  EXPECT_EQ(t4["results"].size(), 11130u);
  // The import is labelled as the T1 job labels its ProblemSize, so the export replays against
  // the job at that context, and the cache itself at the context of its problem_size.
  EXPECT_EQ(t4["metadata"]["gputune"]["context"], "25000x2048");
  const std::string job =
      (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json").string();
  auto replayed = run_gputune("replay '" + job + "' --measurements '" + out + "' --seeds 3");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.out;
  EXPECT_NE(replayed.out.find("measurements: T4 export of dedispersion_kernel, context 25000x2048 "
                              "on NVIDIA RTX A4000, problem size [25000, 2048, 1]\nspace 11130 "
                              "configurations; the measurements hold 11130, of which 11130 match"),
            std::string::npos)
      << replayed.out;
  replayed = run_gputune(
      "replay '" + job + "' --measurements '" +
      (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string() +
      "' --seeds 3");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.out;
  EXPECT_NE(replayed.out.find("measurements: Kernel Tuner cache of dedispersion_kernel on NVIDIA "
                              "RTX A4000, problem size [25000, 2048, 1], the job's context "
                              "25000x2048\nspace 11130"),
            std::string::npos)
      << replayed.out;
}

TEST(Examples, EveryVariantOfEveryExampleCompiles) {
  test::TempDir dir;
  for (const char* ex : {"vector_add", "matmul", "transpose", "convolution", "sgemm"}) {
    auto r = run_gputune(
        std::string("prune '") + (test::examples_dir() / (std::string(ex) + ".json")).string() +
        "' --device h100-sxm --no-store --cache-dir '" + (dir / "cache").string() + "'");
    EXPECT_EQ(r.exit_code, 0) << ex << ": " << r.out;
    EXPECT_NE(r.out.find(", 0 failed to compile"), std::string::npos) << ex << ": " << r.out;
  }
}

TEST(Cli, GenerateWritesNaiveKernelVariantsThatAgreeOnTheCpu) {
  test::TempDir dir;
  const auto naive = test::source_dir() / "configs" / "naive";
  auto r = run_gputune("generate '" + (naive / "transpose.cu").string() +
                       "' --kernel transpose --job '" + (naive / "transpose.json").string() +
                       "' --out '" + (dir / "v").string() + "' --limit 12 --check --size 37,29");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("out (written): write direct|shared"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all 12 variants agree with the naive kernel on the CPU (context 37x29)"),
            std::string::npos)
      << r.out;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "v"))
    files += e.path().extension() == ".cu";
  EXPECT_EQ(files, 12u);
  // No such kernel: a clear error naming the kernels the file has, not a block-shape fallback.
  auto bad = run_gputune("generate '" + (naive / "transpose.cu").string() + "' --kernel nope");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("no __global__ function named 'nope'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("the file has: transpose"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("block shape"), std::string::npos) << bad.out;
}

// `generate --config` writes one configuration's variant: by its key (as `best`, `show` and
// `prune` print it) or a JSON line of `space --list`; without --out the source alone goes to
// stdout. A key or object that is not in the space is bad input naming the parameters' order.
TEST(Cli, GenerateWritesOneConfigurationByItsKeyOrItsJson) {
  test::TempDir dir;
  const std::string mm = (test::source_dir() / "configs" / "naive" / "mm.cu").string();
  const std::string key = "16,4,8,8,8,shared,global,32,2,threads,4,0,0,0";
  // stdout alone (stderr, where the analysis goes, dropped in a subshell).
  auto src = test::run_command(std::string("( '") + GPUTUNE_BINARY + "' generate '" + mm +
                               "' --kernel mm --config " + key + " 2>/dev/null )");
  ASSERT_EQ(src.exit_code, 0) << src.out;
  EXPECT_EQ(src.out.rfind("// Generated by gputune from the naive kernel 'mm' (mm.cu).\n", 0), 0u)
      << src.out;
  EXPECT_NE(src.out.find("// bx16_by4_mx8_my8_u8_a-shared_b-global_tk32_st2_v4\n"),
            std::string::npos)
      << src.out;
  EXPECT_NE(src.out.find("__launch_bounds__(64) mm("), std::string::npos) << src.out;
  EXPECT_EQ(src.out.find("naive kernel 'mm': 2-D"), std::string::npos) << src.out;
  // The same configuration as a JSON object, written to a folder: exactly one file, the same text.
  auto one = run_gputune(
      "generate '" + mm + "' --kernel mm --out '" + (dir / "v").string() +
      "' --config '{\"block_size_x\": 16, \"block_size_y\": 4, \"merge_x\": 8, \"merge_y\": 8, "
      "\"unroll\": 8, \"cache_a\": \"shared\", \"cache_b\": \"global\", \"tile_k\": 32, "
      "\"stages\": 2, \"launch_bounds\": \"threads\", \"vector\": 4, \"pad\": 0, \"transpose\": 0, "
      "\"warp_x\": 0}'");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  EXPECT_NE(one.out.find("wrote 1 of 1258988 variants"), std::string::npos) << one.out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "v")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename(), "mm_bx16_by4_mx8_my8_u8_a-shared_b-global_tk32_st2_v4.cu");
  EXPECT_EQ(test::read_file(files[0]), src.out);
  // Not in the space: the order of the values, and where to copy a key from.
  auto bad = run_gputune("generate '" + mm + "' --kernel mm --config 16,4,8");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--config 16,4,8: no configuration of the space (1258988 valid) has these "
                         "values. Fix: give the values in the order block_size_x, block_size_y, "
                         "merge_x, merge_y, unroll, cache_a, cache_b, tile_k, stages, "
                         "launch_bounds, vector, pad, transpose, warp_x"),
            std::string::npos)
      << bad.out;
  auto partial = run_gputune("generate '" + mm +
                             "' --kernel mm --config '{\"block_size_x\": 16, "
                             "\"tile\": 8}'");
  EXPECT_EQ(partial.exit_code, 2) << partial.out;
  EXPECT_NE(partial.out.find("--config: missing block_size_y, merge_x"), std::string::npos)
      << partial.out;
  EXPECT_NE(partial.out.find("not parameters of this space: tile. Fix: give every parameter"),
            std::string::npos)
      << partial.out;
  auto check = run_gputune("generate '" + mm + "' --kernel mm --config " + key + " --check");
  EXPECT_EQ(check.exit_code, 2) << check.out;
  EXPECT_NE(check.out.find("--check runs the variants it writes: give --out DIR"),
            std::string::npos)
      << check.out;
}

// A naive job's document gives the command that writes a winner's source (what `best` prints
// beside a naive kernel's winner, and `best --header` notes); a parametric job's gives none.
TEST(Cli, ANaiveWinnersSourceCommandRunsAndWritesThatVariant) {
  const fs::path job = test::source_dir() / "configs" / "naive" / "mm.json";
  const std::string key = "16,4,8,8,8,shared,global,32,2,threads,4,0,0,0";
  const auto cmd = tuner::generate_command(test::read_file(job), job.string(), key);
  ASSERT_TRUE(cmd.has_value());
  const std::string mm = (job.parent_path() / "mm.cu").lexically_normal().string();
  EXPECT_EQ(*cmd, "gputune generate " + tuner::shell_quote(mm) + " --kernel mm --job " +
                      tuner::shell_quote(job.string()) + " --config " + key);
  auto src = test::run_command("( '" + std::string(GPUTUNE_BINARY) + "'" + cmd->substr(7) +
                               " 2>/dev/null )");
  ASSERT_EQ(src.exit_code, 0) << src.out;
  EXPECT_NE(src.out.find("// bx16_by4_mx8_my8_u8_a-shared_b-global_tk32_st2_v4\n"),
            std::string::npos)
      << src.out;
  const fs::path parametric = test::examples_dir() / "vector_add.json";
  EXPECT_FALSE(tuner::generate_command(test::read_file(parametric), parametric.string(), "128,2"));
  EXPECT_FALSE(tuner::generate_command("not json", "/x/job.json", key));
  EXPECT_FALSE(tuner::generate_command(R"({"GPUTune": {"Naive": true}})", "/x/job.json", key));
}

// `cmake --install` gives a gputune that runs from its prefix and reads the device files installed
// beside it (a device only the installed folder has is found), not the source tree's.
TEST(Cli, AnInstalledGputuneReadsTheDeviceFilesInstalledBesideIt) {
  fs::path prefix = fs::path(GPUTUNE_TEST_STATE_DIR) / "install";
  fs::remove_all(prefix);
  auto install = test::run_command(std::string("'") + GPUTUNE_CMAKE + "' --install '" +
                                   GPUTUNE_BUILD_DIR + "' --prefix '" + prefix.string() + "'");
  ASSERT_EQ(install.exit_code, 0) << install.out;
  fs::path exe = prefix / "bin" / "gputune";
  fs::path devices = prefix / "share" / "gputune" / "devices";
  ASSERT_TRUE(fs::exists(exe)) << install.out;
  ASSERT_TRUE(fs::exists(devices / "h100-sxm.json")) << install.out;
  EXPECT_TRUE(fs::exists(prefix / "share" / "gputune" / "examples" / "vector_add.json"));
  EXPECT_TRUE(fs::exists(prefix / "share" / "gputune" / "naive" / "mm.json"));

  // A device file only the installed folder has.
  std::ifstream in(devices / "h100-sxm.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto j = nlohmann::json::parse(text);
  j["name"] = "Installed Only GPU";
  j["aliases"] = nlohmann::json::array({"installed-only-gpu"});
  std::ofstream(devices / "installed-only.json") << j.dump(2);

  const std::string job =
      (fs::path(GPUTUNE_SOURCE_DIR) / "configs/examples/vector_add.json").string();
  auto r = test::run_command("env -u GPUTUNE_DEVICES_DIR '" + exe.string() + "' prune '" + job +
                             "' --device installed-only --no-store --cache-dir -");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Installed Only GPU"), std::string::npos) << r.out;
  // The build tree's binary reads the source tree, which has no such device.
  auto b =
      test::run_command(std::string("env -u GPUTUNE_DEVICES_DIR '") + GPUTUNE_BINARY + "' prune '" +
                        job + "' --device installed-only --no-store --cache-dir -");
  EXPECT_EQ(b.exit_code, 2) << b.out;
  EXPECT_NE(b.out.find("h100-sxm"), std::string::npos) << "lists the known devices: " << b.out;
  fs::remove_all(prefix);
}

TEST(Cli, StartsAndExplainsWithoutADriver) {
  auto help = run_gputune("");
  EXPECT_NE(help.out.find("usage: gputune COMMAND"), std::string::npos);
  auto dev = run_gputune("devices");
  EXPECT_NE(dev.out.find("NVRTC"), std::string::npos) << dev.out;
  if (dev.exit_code == 3) {
    EXPECT_NE(dev.out.find("no CUDA device"), std::string::npos) << dev.out;
  }
  EXPECT_EQ(run_gputune("frobnicate").exit_code, 2);
}

// Ctrl-C while `run` compiles (the stream compiles and stores as it goes): no further variant is
// compiled, the run is stored as interrupted with what it decided, each of those in the cubin
// cache, and the exit code is 5; `--resume` goes on from there and decides each configuration of
// each context exactly once.
TEST(Cli, CtrlCWhileCompilingStopsAtOnceAndTheResumeDecidesEachConfigurationOnce) {
  test::TempDir dir;
  const fs::path cache = dir / "cache";
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  const std::string job = (test::examples_dir() / "matmul.json").string();  // 726 variants
  auto cached = [&] {
    size_t n = 0;
    if (fs::exists(cache))
      for (const auto& e : fs::recursive_directory_iterator(cache))
        n += e.path().extension() == ".cubin";
    return n;
  };
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "run", job.c_str(), "--db", db.c_str(), "--cache-dir",
          cache.c_str(), "-j", "2", "--no-gpu", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 1200 && cached() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(cached(), 4u) << test::read_file(log);
  kill(pid, SIGINT);
  const auto status = test::wait_for_child(pid, 30);
  const std::string out = test::read_file(log);
  ASSERT_TRUE(status) << "not stopped within 30 s: " << out;
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  EXPECT_EQ(WEXITSTATUS(*status), 5) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex("interrupted after (\\d+) measurements; run 1 can be resumed")))
      << out;
  const size_t stored = std::stoul(m[1]);
  {
    db::Store store(db);
    EXPECT_EQ(store.run(1)->status, db::RunStatus::kInterrupted);
    EXPECT_EQ(store.measurements(1).size(), stored);
  }
  EXPECT_LT(stored, 726u * 2);
  // Each stored configuration is in the cache; beyond them, at most the look-ahead (two per
  // compile worker) compiled and was not stored yet.
  EXPECT_GE(cached(), std::min<size_t>(stored, 726));
  EXPECT_LE(cached(), stored + 4) << out;
  // The resume decides the rest, each (context, configuration) once, the cache serving the rest.
  auto resumed = run_gputune("run '" + job + "' --db '" + db + "' --cache-dir '" + cache.string() +
                             "' -j 2 --no-gpu --resume 1");
  EXPECT_EQ(resumed.exit_code, 3) << resumed.out;
  db::Store store(db);
  std::map<std::pair<std::int64_t, std::string>, int> seen;
  for (const auto& row : store.measurements(1)) ++seen[{row.context_id, row.config_key}];
  EXPECT_EQ(seen.size(), 726u * 2);
  for (const auto& [pair, n] : seen) EXPECT_EQ(n, 1) << pair.second;
  EXPECT_EQ(store.run(1)->status, db::RunStatus::kNoDevice);
}

// A naive space of 576,460 variants (mm) compiled by brute force: each variant's source is
// generated as a compile worker reaches it, so the first compile starts within seconds (before,
// every source was generated first: about 90 s and gigabytes here) and Ctrl-C stops it at once.
TEST(Cli, ALargeNaiveSpaceStartsCompilingAtOnceAndStopsOnCtrlC) {
  test::TempDir dir;
  const fs::path cache = dir / "cache";
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  // mm's job without its budget of 200: brute force plans every variant.
  nlohmann::json doc =
      nlohmann::json::parse(test::read_file(test::source_dir() / "configs" / "naive" / "mm.json"));
  doc["GPUTune"].erase("Budget");
  doc["GPUTune"].erase("Search");
  test::write_file(dir / "mm.json", doc.dump());
  test::write_file(dir / "mm.cu",
                   test::read_file(test::source_dir() / "configs" / "naive" / "mm.cu"));
  const std::string job = (dir / "mm.json").string();
  auto cached = [&] {
    size_t n = 0;
    std::error_code ec;
    if (fs::exists(cache, ec))
      for (const auto& e : fs::recursive_directory_iterator(cache, ec))
        n += e.path().extension() == ".cubin";
    return n;
  };
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "run", job.c_str(), "--db", db.c_str(), "--cache-dir",
          cache.c_str(), "-j", "2", "--no-gpu", "--strategy", "brute_force",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  for (int i = 0; i < 1200 && cached() < 1; ++i)  // at most 60 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double first_cubin_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  kill(-pid, SIGINT);
  const auto status = test::wait_for_child(pid, 30);
  kill(-pid, SIGKILL);
  const std::string out = test::read_file(log);
  ASSERT_GE(cached(), 1u) << "no variant compiled within " << first_cubin_s << " s: " << out;
  ASSERT_TRUE(status) << "not stopped within 30 s: " << out;
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  EXPECT_EQ(WEXITSTATUS(*status), 5) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex("interrupted after (\\d+) measurements; run 1 can be resumed")))
      << out;
  EXPECT_LE(std::stoul(m[1]), cached());  // what was decided was compiled, and is in the cache
  EXPECT_NE(out.find("compile failures 0"), std::string::npos) << out;
}

// NVRTC installs SIGINT/SIGTERM handlers of its own during the first compile of a process (its
// front end); one that catches a signal ends the process with exit code 4, which in gputune's table
// means "no correct variant". A kernel whose compile-time evaluation keeps NVRTC's front end busy
// (about 1 s, tests/data/slow_compile) makes that window wide: a SIGTERM
// 0.3 s in ends `prune` as the signal does, and stops `run` cleanly (exit 5, the run stored as
// interrupted with nothing measured).
TEST(Cli, AStopSignalDuringNvrtcsFirstCompileIsGputunesNotNvrtcs) {
  test::TempDir dir;
  const std::string file = (test::source_dir() / "tests/data/slow_compile/slow.json").string();
  const std::string db = (dir / "g.db").string();
  const std::string log = (dir / "out.txt").string();
  // Starts gputune with `args`, sends SIGTERM 0.3 s later; the wait status.
  auto stopped = [&](std::vector<std::string> args) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
        _exit(126);
      std::vector<char*> argv{const_cast<char*>(GPUTUNE_BINARY)};
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(GPUTUNE_BINARY, argv.data());
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  };
  int status = stopped({"prune", file, "--device", "h200", "--no-store", "--cache-dir", "-"});
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
      << (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status)) : "")
      << test::read_file(log);
  status = stopped({"run", file, "--no-gpu", "--db", db, "--cache-dir", "-"});
  ASSERT_TRUE(WIFEXITED(status)) << test::read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 5) << test::read_file(log);
  EXPECT_NE(test::read_file(log).find("interrupted after 0 measurements; run 1 can be resumed"),
            std::string::npos)
      << test::read_file(log);
}

}  // namespace
}  // namespace gputune
