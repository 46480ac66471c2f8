// Loading a job to tune: see tuning_job.h.
#include "tuner/common/tuning_job.h"

#include <memory>

#include "variants/instantiate.h"
#include "variants/naive/naive.h"

namespace gputune::tuner {

namespace fs = std::filesystem;

void prepare_naive(Job& job) {
  if (!job.naive) return;
  std::string source = load_kernel_source(job);
  try {
    // Headers are searched as NVRTC will search them: one beside the kernel is found whatever the
    // working directory.
    auto k = std::make_shared<naive::NaiveKernel>(naive::analyse_naive(
        source, job.kernel_name, job.kernel_file.filename().string(), job_options(job)));
    naive::apply_to_job(job, *k);
    // What the front end read in another spelling, or could not read: said once, wherever the
    // job is tuned or ranked (and kept in a run's log).
    for (const std::string& r : k->rewrites)
      job.notes.push_back(job.kernel_file.filename().string() + " " + r);
    job.naive_kernel = std::move(k);
  } catch (const naive::NaiveSourceError& e) {
    throw JobError(job.file.string(), "KernelSpecification.KernelName", e.what(),
                   "name a __global__ function of KernelFile, or fix the file so clang parses it");
  } catch (const naive::NaiveError& e) {
    job.naive_fallback = e.what();
    job.naive_threads = job.global_size;
    naive::apply_block_shape_only(job, job.global_size.y == "1" ? 1 : 2);
    // Said wherever the job is tuned or ranked (run, prune, replay, space): a user who asked for
    // generated variants gets the naive kernel at other block shapes, and must know why.
    job.notes.push_back(job.naive_fallback +
                        "; the naive kernel is outside the generator's subset, so it is tuned "
                        "over its block shape only, as written (`gputune generate " +
                        job.kernel_file.filename().string() + " --kernel " + job.kernel_name +
                        "` explains)");
  }
}

Job load_tuning_job(const fs::path& file) {
  Job job = load_job(file);
  prepare_naive(job);
  return job;
}

}  // namespace gputune::tuner
