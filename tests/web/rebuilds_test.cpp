// web/rebuilds.h: the daemon's background rebuilds of slow cached results.
#include "web/rebuilds.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "web/thread_sched.h"

namespace gputune::web {
namespace {

// Each job runs on the one thread at nice 19, and a key is queued at most once while its job is
// queued or running: a stream of requests for a stale result makes one rebuild, not one each.
TEST(Rebuilds, RunsEachJobAtTheLowestPriorityOnceAtATimePerKey) {
  Rebuilds rebuilds(19);
  std::promise<void> started, gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> nice{-100}, runs_a{0}, runs_b{0};
  char name[16] = {};
  ASSERT_TRUE(rebuilds.post("a", [&] {
    nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    pthread_getname_np(pthread_self(), name, sizeof name);
    ++runs_a;
    started.set_value();
    open.wait();
  }));
  started.get_future().wait();
  EXPECT_FALSE(rebuilds.post("a", [&] { ++runs_a; })) << "a's job is running";
  EXPECT_TRUE(rebuilds.post("b", [&] { ++runs_b; }));
  EXPECT_FALSE(rebuilds.post("b", [&] { ++runs_b; })) << "b's job is queued";
  gate.set_value();
  rebuilds.drain();
  EXPECT_EQ(runs_a, 1);
  EXPECT_EQ(runs_b, 1);
  EXPECT_EQ(rebuilds.finished(), 2);
  EXPECT_EQ(nice, 19);
  EXPECT_STREQ(name, "gputune-rebuild") << "as top -H and perf show the thread";
  EXPECT_EQ(rebuilds.thread_nice(), 19);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), 0)
      << "only the rebuild thread is lowered";
  EXPECT_TRUE(rebuilds.post("a", [&] { ++runs_a; })) << "a key is free again once its job ran";
  rebuilds.drain();
  EXPECT_EQ(runs_a, 2);
}

TEST(Rebuilds, AJobThatThrowsIsReportedWithItsKeyAndTheThreadGoesOn) {
  Rebuilds rebuilds(0);
  std::atomic<bool> ran{false};
  testing::internal::CaptureStderr();
  rebuilds.post("cache /api/kernels/1/header?",
                [] { throw std::runtime_error("404 no such kernel"); });
  rebuilds.post("next", [&] { ran = true; });
  rebuilds.drain();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("rebuilding cache /api/kernels/1/header? failed: 404 no such kernel"),
            std::string::npos)
      << err;
  EXPECT_TRUE(ran);
  EXPECT_EQ(rebuilds.finished(), 2);
}

// Stopping (the daemon's shutdown) lets the job in progress finish, since it may be writing the
// cache, and drops the queued ones.
TEST(Rebuilds, StoppingWaitsForTheJobInProgressAndDropsTheQueuedOnes) {
  std::atomic<bool> first_done{false}, second_ran{false};
  std::promise<void> started;
  {
    Rebuilds rebuilds(19);
    rebuilds.post("first", [&] {
      started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      first_done = true;
    });
    rebuilds.post("second", [&] { second_ran = true; });
    started.get_future().wait();
  }
  EXPECT_TRUE(first_done);
  EXPECT_FALSE(second_ran);
}

// The run-queue wait the Server-Timing header reports grows while a thread is runnable but other
// threads hold every core: here as many spinning threads as cores, and one more.
TEST(ThreadSched, TheRunQueueWaitGrowsWhileEveryCoreIsBusy) {
  const long long before = thread_run_queue_ns();
  if (before < 0) GTEST_SKIP() << "the kernel gives no /proc/thread-self/schedstat";
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i)
    spinners.emplace_back([&] {
      while (!stop) {
      }
    });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
  }
  stop = true;
  for (auto& t : spinners) t.join();
  const long long after = thread_run_queue_ns();
  EXPECT_GT(after, before) << "300 ms on " << cores + 1 << " runnable threads for " << cores
                           << " cores, and no wait";
}

}  // namespace
}  // namespace gputune::web
