#include "tuner/compile/compile_pool.h"

namespace gputune::tuner {

void compile_candidate(const Job& job, const std::string& source, const std::string& arch,
                       const cuda::CubinCache& cache, Candidate& c, bool keep_cubin) {
  cuda::CompiledVariant compiled =
      cuda::compile_cached(variant_to_compile(job, source, c.config), arch, cache);
  c.inspected = compiled.ok ? inspect_cubin(compiled) : Inspected{false, "compile failed", {}};
  if (!keep_cubin) std::string().swap(compiled.cubin);  // nothing will load it
  c.compiled = std::move(compiled);
}

CompilePool::CompilePool(int threads, std::function<void(Candidate&)> compile)
    : compile_(std::move(compile)) {
  if (threads <= 0) threads = cuda::default_compile_threads();
  for (int t = 0; t < threads; ++t)
    workers_.emplace_back([this] {
      cuda::lower_compile_thread_priority();
      work();
    });
}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    for (Candidate* c : queue_) c->state = Candidate::Compile::kNot;
    queue_.clear();
  }
  queued_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void CompilePool::submit(Candidate& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.state = Candidate::Compile::kQueued;
    queue_.push_back(&c);
  }
  queued_cv_.notify_one();
}

void CompilePool::work() {
  for (;;) {
    Candidate* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queued_cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;  // quit_
      c = queue_.front();
      queue_.pop_front();
      ++running_;
    }
    std::exception_ptr error;
    try {
      compile_(*c);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      done_.push_back({c, error});
    }
    done_cv_.notify_all();
  }
}

Candidate* CompilePool::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_.empty() && (queue_.empty() && running_ == 0)) return nullptr;
  if (!done_cv_.wait_for(lock, timeout, [&] { return !done_.empty(); })) return nullptr;
  Done d = done_.front();
  done_.pop_front();
  lock.unlock();
  if (d.error) std::rethrow_exception(d.error);
  d.c->state = Candidate::Compile::kDone;
  return d.c;
}

std::size_t CompilePool::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_ + done_.size();
}

void CompilePool::drop_queued() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Candidate* c : queue_) c->state = Candidate::Compile::kNot;
  queue_.clear();
}

}  // namespace gputune::tuner
