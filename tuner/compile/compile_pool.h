/** \file tuner/compile/compile_pool.h
 * Owns: compiling while the run measures. A pool of NVRTC workers takes candidates in the order
 * they are submitted and hands each back as soon as it is compiled and inspected, so the measurer
 * never waits for a compile it does not need and the caller decides how far ahead to submit (the
 * search's look-ahead: tuner/search/search_stream.h).
 * Consumes: Candidates. Produces: their compiled code and resources (through `compile`, on a
 * worker thread; each candidate is written by one worker and read by the caller only once handed
 * back).
 * Runs after: the search stream chose what to compile; before: the measurer
 * (measure/measure.h), which takes what it hands back.
 * Must not: launch anything or touch the database. */
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "tuner/compile/candidate.h"

namespace gputune::tuner {

/// What a pool's worker does with a candidate for `run` and `replay` alike: the variant
/// (variant_to_compile), NVRTC through the cubin cache (cuda::compile_cached), its resources
/// read (inspect_cubin); the cubin's bytes are kept only with `keep_cubin` (a run that has a
/// device to load it on).
void compile_candidate(const Job& job, const std::string& source, const std::string& arch,
                       const cuda::CubinCache& cache, Candidate& c, bool keep_cubin);

class CompilePool {
 public:
  /// `compile(c)` fills c.compiled and c.inspected; it runs on a worker. `threads` workers (0:
  /// default_compile_threads()).
  CompilePool(int threads, std::function<void(Candidate&)> compile);
  /// Drops what no worker has started (left Compile::kNot) and waits for the running compiles.
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Queues `c` (Compile::kQueued); it must outlive its hand-back.
  void submit(Candidate& c);
  /// A compiled candidate (Compile::kDone), in the order they finished; waits up to `timeout`
  /// for one; nullptr when none finished in time or nothing is pending. An exception `compile`
  /// threw (a generator error) is thrown here.
  Candidate* wait(std::chrono::milliseconds timeout);
  /// wait() without waiting.
  Candidate* poll() { return wait(std::chrono::milliseconds(0)); }
  /// Submitted and not handed back yet.
  std::size_t pending() const;
  /// Drops what no worker has started (Ctrl-C): those go back to Compile::kNot.
  void drop_queued();
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  void work();
  std::function<void(Candidate&)> compile_;
  mutable std::mutex mu_;
  std::condition_variable queued_cv_, done_cv_;
  std::deque<Candidate*> queue_;
  struct Done {
    Candidate* c;
    std::exception_ptr error;
  };
  std::deque<Done> done_;
  std::size_t running_ = 0;
  bool quit_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace gputune::tuner
