// The reader's pace (agent/profiler/pass_pacer.h): each wait aims to find the fullest lane ~40 %
// full, between plugin.poll_interval and plugin.poll_interval_max; a lane half full brings it back
// to plugin.poll_interval at once; and the fill that paces them is what the pass really found.

#include "agent/profiler/pass_pacer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/profiler/ring_directory.h"
#include "plugin/ring/ring_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

struct CountingSink : profiler::RecordSink {
  std::uint64_t ops = 0;
  void OnCommTables(const std::vector<profiler::LiveComm>&) override {}
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView&) override { ++ops; }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record&) override {}
};

TEST(PassPacerTest, QuietPassesSpreadOutAndAFillingLaneBringsThemBack) {
  profiler::PassPacer pacer(milliseconds(100), milliseconds(500));
  EXPECT_EQ(pacer.wait(), milliseconds(100));
  // Empty or nearly: the wait doubles, up to the maximum.
  EXPECT_EQ(pacer.AfterPass(0), milliseconds(200));
  EXPECT_EQ(pacer.AfterPass(10), milliseconds(400));
  EXPECT_EQ(pacer.AfterPass(0), milliseconds(500));
  EXPECT_EQ(pacer.AfterPass(0), milliseconds(500));
  // 20 % full in 500 ms: 1,000 ms would find it at 40 %, but the maximum holds.
  EXPECT_EQ(pacer.AfterPass(200), milliseconds(500));
  // 45 % full: the wait that finds it at 40 %.
  EXPECT_EQ(pacer.AfterPass(450), nanoseconds(milliseconds(500)) * 400 / 450);
  // Half full: back to the minimum at once.
  EXPECT_EQ(pacer.AfterPass(500), milliseconds(100));
  // The full load: ~24 % of a 2,048-record lane in 100 ms settles at ~40 % per pass.
  EXPECT_EQ(pacer.AfterPass(244), nanoseconds(milliseconds(100)) * 400 / 244);
  EXPECT_EQ(pacer.AfterPass(400), nanoseconds(milliseconds(100)) * 400 / 244);
  // Growth is at most twice the last wait, and never below the minimum.
  pacer.SetBounds(milliseconds(100), milliseconds(1000));
  EXPECT_EQ(pacer.AfterPass(100), milliseconds(200));
  EXPECT_EQ(pacer.AfterPass(490), nanoseconds(milliseconds(200)) * 400 / 490);
  pacer.SetBounds(milliseconds(100), milliseconds(1000));
  EXPECT_EQ(pacer.AfterPass(499), milliseconds(100));
  // New bounds start over at the minimum.
  pacer.SetBounds(milliseconds(50), milliseconds(1000));
  EXPECT_EQ(pacer.wait(), milliseconds(50));
}

TEST(PassPacerTest, AMaximumAtOrBelowTheMinimumKeepsEveryWaitAtTheMinimum) {
  profiler::PassPacer equal(milliseconds(100), milliseconds(100));
  profiler::PassPacer below(milliseconds(100), milliseconds(20));
  for (int pass = 0; pass < 5; ++pass) {
    EXPECT_EQ(equal.AfterPass(0), milliseconds(100));
    EXPECT_EQ(below.AfterPass(0), milliseconds(100));
  }
}

TEST(PassPacerTest, APassReportsItsFullestLane) {
  TempDir dir;
  ring::RingWriter writer;
  ring::RingGeometry geometry{.lanes = 2, .lane_capacity = 64, .comm_slots = 1};
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), geometry, {"pod", "1", "job"}, &error)) << error;
  ncclscope_op_record op =
      analytics::testutil::Coll(7, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 1, 0, 0).op;
  op.h.type = NCCLSCOPE_REC_OP;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(writer.Write(&op, 1, 0));  // lane 0: 40 of 64
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(writer.Write(&op, 1, 1));   // lane 1: 8 of 64
  profiler::RingDirectory directory(dir.path());
  CountingSink sink;
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().fullest_lane_permille, 40u * 1000 / 64);
  directory.Poll(sink);  // nothing new
  EXPECT_EQ(directory.snapshot().fullest_lane_permille, 0u);
}

// The headroom the pacer's longest wait relies on (pass_pacer.h): a writer thread whose lane
// fills during a long wait spills into the next lanes instead of dropping, and the first pass
// that finds a lane half full brings the wait back to poll_interval.
TEST(PassPacerTest, ABurstDuringTheLongestWaitSpillsIntoTheNextLanesAndBringsThePaceBack) {
  TempDir dir;
  ring::RingWriter writer;
  ring::RingGeometry geometry;  // the default ring's lanes: 16 x 2,048 records
  geometry.comm_slots = 1;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), geometry, {"pod", "1", "job"}, &error)) << error;
  CountingSink sink;
  profiler::RingDirectory directory(dir.path());
  profiler::PassPacer pacer(milliseconds(100), milliseconds(500));
  for (int pass = 0; pass < 4; ++pass) {
    directory.Poll(sink);
    pacer.AfterPass(directory.snapshot().fullest_lane_permille);
  }
  ASSERT_EQ(pacer.wait(), milliseconds(500));  // quiet: the longest wait
  // 500 ms of a writer thread at 8,000 records per second: twice its lane.
  ncclscope_op_record op =
      analytics::testutil::Coll(7, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 1, 0, 0).op;
  op.h.type = NCCLSCOPE_REC_OP;
  constexpr int kBurst = 4000;
  for (int i = 0; i < kBurst; ++i) ASSERT_TRUE(writer.Write(&op, 1, 0)) << "record " << i;
  directory.Poll(sink);
  EXPECT_EQ(sink.ops, static_cast<std::uint64_t>(kBurst));
  EXPECT_EQ(directory.snapshot().dropped_ring_full, 0u);
  EXPECT_EQ(directory.snapshot().fullest_lane_permille, 1000u);  // the writer's own lane: full
  EXPECT_EQ(pacer.AfterPass(directory.snapshot().fullest_lane_permille), milliseconds(100));
}

}  // namespace
}  // namespace ncclscope::testing
