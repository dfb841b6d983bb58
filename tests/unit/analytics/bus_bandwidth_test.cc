// nccl-tests' bus-bandwidth factors, checked against the numbers NCCL Inspector prints for the
// same operations (shared/reference/nccl-profiler-semantics.md §3.4, §3.6).

#include "agent/analytics/bus_bandwidth.h"

#include <gtest/gtest.h>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::analytics {
namespace {

TEST(BusBandwidthTest, FactorsPerCollectiveAndRankCount) {
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 100, 8).bus_factor, 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 100, 8).algo_bytes, 100);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_GATHER, 100, 8).algo_bytes, 800);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_GATHER, 100, 8).bus_factor, 7.0 / 8);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_REDUCE_SCATTER, 100, 4).bus_bytes(), 300);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_BROADCAST, 100, 4).bus_bytes(), 100);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_REDUCE, 100, 4).bus_bytes(), 100);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_SEND, 100, 4).bus_bytes(), 100);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_RECV, 100, 4).bus_bytes(), 100);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_TO_ALL, 100, 4).bus_bytes(), 300);
  // One rank moves nothing over links; unknown size or function: no model.
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 100, 1).bus_bytes(), 0);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 100, 0).algo_bytes, 0);
  EXPECT_DOUBLE_EQ(ModelFor(NCCLSCOPE_FUNC_SIGNAL, 100, 8).algo_bytes, 0);
}

TEST(BusBandwidthTest, SameNumbersAsNcclInspector) {
  // AllReduce of 1 GiB on 16 ranks in 4.001 ms: algbw 268.368364 GB/s, busbw 503.190682 GB/s.
  const BandwidthModel ar = ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 1ull << 30, 16);
  EXPECT_NEAR(ar.algo_bytes / 4.001e-3 / 1e9, 268.368364, 1e-5);
  EXPECT_NEAR(ar.bus_bytes() / 4.001e-3 / 1e9, 503.190682, 1e-5);
  // AllGather of 128 MiB per rank on 16 ranks in 4.001 ms: algbw 536.74, busbw 503.19 GB/s.
  const BandwidthModel ag = ModelFor(NCCLSCOPE_FUNC_ALL_GATHER, 128ull << 20, 16);
  EXPECT_NEAR(ag.algo_bytes / 4.001e-3 / 1e9, 536.74, 0.01);
  EXPECT_NEAR(ag.bus_bytes() / 4.001e-3 / 1e9, 503.19, 0.01);
}

}  // namespace
}  // namespace ncclscope::analytics
