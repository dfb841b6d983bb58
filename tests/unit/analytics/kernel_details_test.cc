// NCCL 2.31+ details of an op (kernel_details.h): phases as the mean over channels, the
// symmetric kernels' sync wait, user tags with their per-communicator cap, kernel variants.

#include "agent/analytics/kernel_details.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Live;

class KernelDetailsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.OnTables({Live(9, 0, 8, 2), Live(9, 1, 8, 2)});
    registry_.EndPass(Clock::now());
    comm_ = registry_.Find(9);
  }
  double Sample(const std::string& series) {
    std::string text;
    metrics::TextWriter out(text);
    details_.Render(out);
    return testing::SampleValue(text, series);
  }
  std::string L(int rank, const std::string& extra = "") {
    return "{comm=\"" + registry_.Label(comm_->label) + "\",rank=\"" + std::to_string(rank) +
           "\",func=\"AllReduce\"" + extra + "}";
  }
  static void AddPhases(profiler::OpView& v, std::uint32_t sync0, std::uint32_t sync1,
                        std::uint32_t compute) {
    v.n_phase_channels = 2;
    v.phases[0] = {0, 0b011, {}, {sync0, compute, 0}};
    v.phases[1] = {1, 0b111, {}, {sync1, compute, 500}};
  }

  CommRegistry registry_{8, 4};
  KernelDetails details_;
  Comm* comm_ = nullptr;
};

TEST_F(KernelDetailsTest, PhasesAreTheMeanOverTheChannelsThatReportedThem) {
  profiler::OpView v = Coll(9, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 1'000'000, 5'000, 2);
  AddPhases(v, 300, 100, 2'000);
  v.op.weight = 4;  // plugin.record_one_in: the record stands for 4 ops
  details_.Observe(registry_, comm_->label, v);
  EXPECT_EQ(Sample("ncclscope_nccl_kernel_phase_ops_total" + L(0)), 4);
  EXPECT_NEAR(Sample("ncclscope_nccl_kernel_phase_seconds_total" + L(0, ",phase=\"initial_sync\"")),
              4 * 200e-9, 1e-15);
  EXPECT_NEAR(Sample("ncclscope_nccl_kernel_phase_seconds_total" + L(0, ",phase=\"compute\"")),
              4 * 2000e-9, 1e-15);
  // final_sync: reported by channel 1 only (NCCL skips zero-length phases), so its mean is 500.
  EXPECT_NEAR(Sample("ncclscope_nccl_kernel_phase_seconds_total" + L(0, ",phase=\"final_sync\"")),
              4 * 500e-9, 1e-15);
  // Not a symmetric kernel: its initial_sync is no peer wait.
  EXPECT_EQ(Sample("ncclscope_nccl_sync_wait_ops_total" + L(0)), 0);
  EXPECT_EQ(details_.SyncWaitOf(comm_->label, 0), nullptr);

  v.op.flags |= NCCLSCOPE_OP_SYMMETRIC;
  v.op.weight = 1;
  v.kernel_variant = NCCLSCOPE_KV_ALL_REDUCE_AGXLL_R;
  details_.Observe(registry_, comm_->label, v);
  EXPECT_EQ(Sample("ncclscope_nccl_sync_wait_ops_total" + L(0)), 1);
  EXPECT_NEAR(Sample("ncclscope_nccl_sync_wait_seconds_total" + L(0)), 200e-9, 1e-15);
  ASSERT_NE(details_.SyncWaitOf(comm_->label, 0), nullptr);
  EXPECT_EQ(details_.SyncWaitOf(comm_->label, 0)->ops, 1u);
  EXPECT_EQ(Sample("ncclscope_nccl_kernel_variant_ops_total" +
                   L(0, ",kernel_variant=\"AllReduce_AGxLL_R\"")),
            1);
}

TEST_F(KernelDetailsTest, TagsAreLabelValuesUpToTheCapThenOther) {
  for (std::uint64_t tag = 1; tag <= KernelDetails::kMaxTagsPerComm + 3; ++tag) {
    profiler::OpView v = Coll(9, 1, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, tag, 1'000'000, 1'000, 2);
    v.user_tag = tag * 1000;
    details_.Observe(registry_, comm_->label, v);
  }
  EXPECT_EQ(Sample("ncclscope_nccl_user_tag_ops_total" + L(1, ",user_tag=\"1000\"")), 1);
  EXPECT_NEAR(Sample("ncclscope_nccl_user_tag_gpu_seconds_total" + L(1, ",user_tag=\"1000\"")),
              1e-6, 1e-15);
  EXPECT_EQ(Sample("ncclscope_nccl_user_tag_ops_total" + L(1, ",user_tag=\"16000\"")), 1);
  EXPECT_TRUE(
      std::isnan(Sample("ncclscope_nccl_user_tag_ops_total" + L(1, ",user_tag=\"17000\""))));
  EXPECT_EQ(Sample("ncclscope_nccl_user_tag_ops_total" + L(1, ",user_tag=\"other\"")), 3);
  // Untagged operations are not counted here.
  profiler::OpView untagged = Coll(9, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 1'000'000, 1'000);
  details_.Observe(registry_, comm_->label, untagged);
  EXPECT_EQ(details_.series(), KernelDetails::kMaxTagsPerComm + 1);
}

}  // namespace
}  // namespace ncclscope::analytics
