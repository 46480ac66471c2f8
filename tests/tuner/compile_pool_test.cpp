#include "tuner/compile/compile_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace gputune::tuner {
namespace {

using namespace std::chrono_literals;

// The pool hands back each candidate as soon as it is compiled, in the order they finished: a
// slow compile does not hold back the ones after it.
TEST(CompilePool, HandsBackEachCandidateAsItFinishes) {
  std::vector<Candidate> cs(4);
  for (size_t i = 0; i < cs.size(); ++i) cs[i].index = i;
  CompilePool pool(2, [](Candidate& c) {
    std::this_thread::sleep_for(c.index == 0 ? 600ms : 20ms);
    c.compiled.ok = true;
  });
  for (auto& c : cs) pool.submit(c);
  EXPECT_EQ(cs[3].state, Candidate::Compile::kQueued);
  std::vector<size_t> back;
  while (back.size() < cs.size()) {
    Candidate* c = pool.wait(2000ms);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->state, Candidate::Compile::kDone);
    EXPECT_TRUE(c->compiled.ok);
    back.push_back(c->index);
  }
  EXPECT_EQ(back.back(), 0u) << "the slow one came back last";
  EXPECT_EQ(pool.pending(), 0u);
  EXPECT_EQ(pool.wait(10ms), nullptr) << "nothing pending: no wait";
}

// What no worker started is dropped by a stop (and by the pool's end) and left not compiled; a
// generator error on a worker is thrown where the candidate is handed back.
TEST(CompilePool, DropsWhatIsNotStartedAndRethrowsWhatAWorkerThrew) {
  std::atomic<int> started{0};
  std::vector<Candidate> cs(6);
  for (size_t i = 0; i < cs.size(); ++i) cs[i].index = i;
  {
    CompilePool pool(1, [&](Candidate& c) {
      ++started;
      std::this_thread::sleep_for(100ms);
      if (c.index == 0) throw std::runtime_error("generator error in configuration 0");
    });
    for (auto& c : cs) pool.submit(c);
    std::this_thread::sleep_for(30ms);
    pool.drop_queued();
    EXPECT_THROW(pool.wait(2000ms), std::runtime_error);
  }
  EXPECT_EQ(started, 1);
  for (size_t i = 1; i < cs.size(); ++i) EXPECT_EQ(cs[i].state, Candidate::Compile::kNot) << i;
}

int thread_nice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

// Compiles run below the priority of the thread that measures (--compile-nice, 10 by default),
// so that measuring and the daemon's HTTP threads get a core at once; the caller keeps its own.
TEST(CompilePool, CompilesRunAtTheCompileNiceBelowTheCaller) {
  const int caller = thread_nice();
  for (int steps : {7, 0}) {
    cuda::set_compile_nice(steps);
    std::atomic<int> seen{-100};
    {
      CompilePool pool(1, [&](Candidate&) { seen = thread_nice(); });
      Candidate c;
      pool.submit(c);
      ASSERT_NE(pool.wait(2000ms), nullptr);
    }
    EXPECT_EQ(seen, std::min(19, caller + steps)) << steps << " steps";
    EXPECT_EQ(thread_nice(), caller) << "the caller's own priority is unchanged";
  }
  cuda::set_compile_nice(10);
  EXPECT_EQ(cuda::compile_nice(), 10);
  EXPECT_THROW(cuda::set_compile_nice(20), std::invalid_argument);
  EXPECT_THROW(cuda::set_compile_nice(-1), std::invalid_argument);
  EXPECT_EQ(cuda::compile_nice(), 10) << "a refused value changes nothing";
}

}  // namespace
}  // namespace gputune::tuner
