// Latency against its baseline: learned from a key's first window, not moved by a fault, kept in
// the state directory under the communicator's name so that the next launch (another commHash)
// and the next agent compare with it at once; a corrupt file is counted and replaced.

#include "agent/analytics/detection/latency_baselines.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/exposition.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics::detection {
namespace {

using testutil::Coll;
using testutil::Init;
using testutil::Live;
using testutil::Origin;
using testutil::Text;

constexpr std::int64_t kNow = 1'800'000'000;

class LatencyBaselinesTest : public ::testing::Test {
 protected:
  // A communicator named "DP group 0" (rank 1 of 4 on 2 nodes) under a given commHash.
  Comm& Launch(std::uint64_t id) {
    registry_.OnCommInit(Origin("ring-" + std::to_string(id), 50), Init(id, 1, 4, 2, "DP group 0"));
    registry_.OnTables({Live(id, 1, 4, 2)});
    registry_.EndPass(now_);
    return registry_.Get(id);
  }
  void Ops(LatencyBaselines& b, Comm& comm, int n, std::uint64_t ns) {
    for (int i = 0; i < n; ++i) {
      const profiler::OpView v = Coll(comm.id, 1, NCCLSCOPE_FUNC_ALL_REDUCE, 64 << 20,
                                      static_cast<std::uint64_t>(i), 1'000'000, ns);
      b.OnOp(registry_, comm, registry_.RankOf(comm, 1), v.op, now_);
    }
  }
  void Window(LatencyBaselines& b) {
    now_ += LatencyBaselines::kMinWindow + std::chrono::seconds(1);
    b.EndPass(now_, kNow);
  }
  double Sample(const LatencyBaselines& b, const Comm& comm, const std::string& le) {
    return testing::SampleValue(Text(b), "ncclscope_nccl_op_latency_baseline_ratio_bucket{comm=\"" +
                                             registry_.Label(comm.label) +
                                             "\",rank=\"1\",func=\"AllReduce\",le=\"" + le + "\"}");
  }

  CommRegistry registry_{8, 4};
  Clock::time_point now_ = Clock::now();
};

TEST_F(LatencyBaselinesTest, LearnsTheP99AndIsNotMovedByAFault) {
  LatencyBaselines b;
  b.Configure("", 64, kNow);
  Comm& comm = Launch(0x11);
  Ops(b, comm, 99, 1'000'000);
  Ops(b, comm, 1, 1'200'000);
  const std::string text = Text(b);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_op_latency_unbaselined_total"), 100);
  Window(b);
  const auto size = static_cast<std::uint8_t>(9);  // 64MiB-256MiB
  EXPECT_NEAR(b.BaselineOf(comm.label, 1, NCCLSCOPE_FUNC_ALL_REDUCE, NCCLSCOPE_ALGO_RING,
                           NCCLSCOPE_PROTO_SIMPLE, size),
              1e-3, 1e-12);  // the 99th of 100 samples
  // Healthy ops at the baseline (two more windows: past the warm-up), then a fault at 2.2x: in
  // the (2, 2.5] bucket.
  for (int w = 0; w < 2; ++w) {
    Ops(b, comm, 99, 1'000'000);
    Ops(b, comm, 1, 1'200'000);
    Window(b);
  }
  Ops(b, comm, 100, 1'000'000);
  EXPECT_EQ(Sample(b, comm, "1.5"), 100 + 198 + 2);  // at the baseline, and the 1.2x ones
  Ops(b, comm, 100, 2'200'000);
  EXPECT_EQ(Sample(b, comm, "2"), 300);
  EXPECT_EQ(Sample(b, comm, "2.5"), 400);
  // Windows of the fault (over kAnomaly x the baseline) leave it alone.
  for (int w = 0; w < 20; ++w) {
    Ops(b, comm, 100, 2'200'000);
    Window(b);
  }
  EXPECT_NEAR(b.BaselineOf(comm.label, 1, NCCLSCOPE_FUNC_ALL_REDUCE, NCCLSCOPE_ALGO_RING,
                           NCCLSCOPE_PROTO_SIMPLE, size),
              1e-3, 1e-12);
  // Usual windows move it, slowly.
  Ops(b, comm, 100, 1'100'000);
  Window(b);
  const double moved = b.BaselineOf(comm.label, 1, NCCLSCOPE_FUNC_ALL_REDUCE, NCCLSCOPE_ALGO_RING,
                                    NCCLSCOPE_PROTO_SIMPLE, size);
  EXPECT_GT(moved, 1e-3);
  EXPECT_LT(moved, 1.1e-3);
}

TEST_F(LatencyBaselinesTest, BaselinesOutliveTheJobAndTheAgent) {
  testing::TempDir dir;
  {
    LatencyBaselines b;
    b.Configure(dir.path(), 64, kNow);
    Comm& first = Launch(0x21);
    Ops(b, first, 100, 1'000'000);
    Window(b);
    // The job restarts: another commHash, the same communicator name and shape.
    Comm& second = Launch(0x22);
    Ops(b, second, 10, 3'000'000);
    EXPECT_EQ(Sample(b, second, "3"), 10) << "compared with the first launch's baseline at once";
  }  // the agent stops: the store is saved
  std::ifstream file(dir.path() + "/" + LatencyBaselines::kFileName);
  std::stringstream saved;
  saved << file.rdbuf();
  EXPECT_NE(saved.str().find("DP%20group%200 4 2 1 AllReduce RING SIMPLE 64MiB-256MiB 0.001 "),
            std::string::npos)
      << saved.str();
  LatencyBaselines restarted;
  restarted.Configure(dir.path(), 64, kNow);
  EXPECT_EQ(testing::SampleValue(Text(restarted), "ncclscope_nccl_baselines_loaded"), 1);
  Comm& third = Launch(0x23);
  Ops(restarted, third, 5, 1'000'000);
  EXPECT_EQ(Sample(restarted, third, "1.5"), 5);
  EXPECT_EQ(testing::SampleValue(Text(restarted), "ncclscope_nccl_op_latency_unbaselined_total"),
            0);
}

TEST_F(LatencyBaselinesTest, ACorruptFileIsCountedAndReplaced) {
  testing::TempDir dir;
  const std::string path = dir.WriteFile(LatencyBaselines::kFileName, "garbage\n");
  LatencyBaselines b;
  b.Configure(dir.path(), 64, kNow);
  std::string text = Text(b);
  EXPECT_EQ(testing::SampleValue(
                text, "ncclscope_nccl_baseline_store_errors_total{op=\"load\",reason=\"corrupt\"}"),
            1);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_baselines"), 0);
  Comm& comm = Launch(0x31);
  Ops(b, comm, 100, 1'000'000);
  Window(b);
  b.Save();
  LatencyBaselines next;
  next.Configure(dir.path(), 64, kNow);
  text = Text(next);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_baselines_loaded"), 1);
  EXPECT_EQ(testing::SampleValue(
                text, "ncclscope_nccl_baseline_store_errors_total{op=\"load\",reason=\"corrupt\"}"),
            0);
}

}  // namespace
}  // namespace ncclscope::analytics::detection
