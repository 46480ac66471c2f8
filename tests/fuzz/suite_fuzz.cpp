// libFuzzer target: the suite reader of `gputune batch` (app/batch.h collect_suite): a suite file
// naming job files, folders and other suites (cycles, repeats, depth), every job then loaded as
// `run` loads it. The input is the suite file's text, at suites/fuzz.json in a scratch folder
// beside the shipped examples/ and naive/ (links to configs/), so "../examples/matmul.json",
// "../naive" and "fuzz.json" itself resolve. JobError naming a file is the documented refusal;
// anything else escaping is a finding.
#include <cstdint>
#include <string>

#include "app/batch.h"
#include "fuzz_util.h"
#include "variants/job.h"

using namespace gputune;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path suite = [] {
    const std::filesystem::path configs = std::filesystem::path(GPUTUNE_SOURCE_DIR) / "configs";
    std::filesystem::create_directories(fuzz::scratch() / "suites");
    for (const char* name : {"examples", "naive"})
      std::filesystem::create_directory_symlink(configs / name, fuzz::scratch() / name);
    return fuzz::scratch() / "suites" / "fuzz.json";
  }();
  fuzz::write_file(suite, fuzz::text(data, size));
  try {
    (void)app::collect_suite({suite.string()});
  } catch (const JobError& e) {
    if (e.file.empty()) fuzz::finding(std::string("a JobError that names no file: ") + e.what());
  }
  return 0;
}
