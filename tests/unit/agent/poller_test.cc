// The background poller: first run at once, then every interval with +-10% jitter; stops
// promptly even with a long interval; a task can ask for its own next delay.

#include "agent/core/poller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ncclscope {
namespace {

using std::chrono::milliseconds;

TEST(PollerTest, JitterStaysWithinTenPercent) {
  std::mt19937_64 rng(42);
  const std::chrono::nanoseconds interval = std::chrono::seconds(10);
  bool below = false, above = false;
  for (int i = 0; i < 1000; ++i) {
    const auto d = Poller::Jittered(interval, rng);
    ASSERT_GE(d, std::chrono::seconds(9));
    ASSERT_LE(d, std::chrono::seconds(11));
    below = below || d < interval;
    above = above || d > interval;
  }
  EXPECT_TRUE(below && above) << "no spread: agents of a cluster would poll in lockstep";
}

TEST(PollerTest, RunsAtOnceThenPeriodicallyAndStopsPromptly) {
  std::atomic<int> runs{0};
  Poller poller;
  poller.Start(milliseconds(20), [&] {
    ++runs;
    return std::chrono::nanoseconds(0);
  });
  for (int i = 0; i < 200 && runs < 5; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_GE(runs.load(), 5);
  poller.Stop();
  const int after = runs.load();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(runs.load(), after);
  EXPECT_FALSE(poller.running());

  // A one-hour interval does not delay Stop().
  std::atomic<int> once{0};
  poller.Start(std::chrono::hours(1), [&] {
    ++once;
    return std::chrono::nanoseconds(0);
  });
  for (int i = 0; i < 200 && once == 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  poller.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(once.load(), 1);
}

TEST(PollerTest, TaskChoosesItsNextDelay) {
  std::atomic<int> runs{0};
  Poller poller;
  poller.Start(std::chrono::hours(1), [&] {
    ++runs;
    return milliseconds(5);  // e.g. retry soon
  });
  for (int i = 0; i < 200 && runs < 3; ++i) std::this_thread::sleep_for(milliseconds(10));
  poller.Stop();
  EXPECT_GE(runs.load(), 3);
}

}  // namespace
}  // namespace ncclscope
