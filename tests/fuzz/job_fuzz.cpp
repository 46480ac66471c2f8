// libFuzzer target: the T1 job reader (variants/job.h parse_job) and the space it defines
// (variants/space.h build_space, within small limits), as `gputune run` and the daemon's
// POST /api/jobs read a job. The input is the job file's text; text that is not JSON is skipped
// (nlohmann's parser is not ours). JobError is the documented refusal, and it must name the file;
// anything else is a finding.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_util.h"
#include "variants/job.h"
#include "variants/space.h"

using namespace gputune;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded()) return 0;
  static const std::filesystem::path file = fuzz::scratch() / "job.json";
  try {
    Job job = parse_job(doc, file);
    // Small limits: a space beyond them is refused (JobError) in milliseconds, not seconds.
    Space space = build_space(job, SpaceLimits{100'000, 2'000'000});
    if (space.empty()) (void)space.explain_empty();
    (void)default_key(job);
  } catch (const JobError& e) {
    if (std::string(e.what()).find(file.string()) == std::string::npos)
      fuzz::finding(std::string("a JobError that does not name the file: ") + e.what());
  }
  return 0;
}
