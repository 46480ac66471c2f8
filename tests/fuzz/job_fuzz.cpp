// libFuzzer target: the T1 job reader (variants/job.h load_job: the JSON text, then parse_job)
// and the space it defines (variants/space.h build_space, within small limits), as `gputune run`
// reads a job. The input is the job file's bytes. JobError naming the file is the documented
// refusal; anything else is a finding.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "variants/job.h"
#include "variants/space.h"

using namespace gputune;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file = fuzz::scratch() / "job.json";
  fuzz::write_file(file, fuzz::text(data, size));
  try {
    Job job = load_job(file);
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
