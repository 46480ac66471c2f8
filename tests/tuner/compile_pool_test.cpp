#include "tuner/compile_pool.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gputune::tuner
