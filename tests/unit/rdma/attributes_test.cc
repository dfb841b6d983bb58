// Parsers of /sys/class/infiniband attribute text, on the formats the kernel prints.

#include "rdma/sysfs/attributes.h"

#include <gtest/gtest.h>

namespace ncclscope::rdma::sysfs {
namespace {

TEST(AttributesTest, StateAndPhysState) {
  auto state = ParseIdName("4: ACTIVE\n");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->id, 4);
  EXPECT_EQ(state->name, "ACTIVE");
  auto phys = ParseIdName("5: LinkUp\n");
  ASSERT_TRUE(phys);
  EXPECT_EQ(phys->id, 5);
  EXPECT_EQ(phys->name, "LinkUp");
  auto unknown = ParseIdName("9: <unknown>");  // the kernel's text for unknown phys states
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->id, 9);
  EXPECT_FALSE(ParseIdName("ACTIVE"));
  EXPECT_FALSE(ParseIdName(": ACTIVE"));
  EXPECT_FALSE(ParseIdName("x: ACTIVE"));
  EXPECT_FALSE(ParseIdName(""));
}

TEST(AttributesTest, RateInAllKernelForms) {
  auto ndr = ParseRate("400 Gb/sec (4X NDR)\n");
  ASSERT_TRUE(ndr);
  EXPECT_DOUBLE_EQ(ndr->gbps, 400);
  EXPECT_EQ(ndr->width, "4X");
  EXPECT_EQ(ndr->speed, "NDR");
  EXPECT_DOUBLE_EQ(ndr->BytesPerSecond(), 50e9);
  auto sdr = ParseRate("2.5 Gb/sec (1X SDR)");
  ASSERT_TRUE(sdr);
  EXPECT_DOUBLE_EQ(sdr->gbps, 2.5);
  EXPECT_EQ(sdr->width, "1X");
  auto hdr100 = ParseRate("100 Gb/sec (2X HDR)");  // HDR100: two lanes, still x4 data
  ASSERT_TRUE(hdr100);
  EXPECT_EQ(hdr100->width, "2X");
  auto iwarp = ParseRate("10 Gb/sec (4X)");  // i40iw: no speed name
  ASSERT_TRUE(iwarp);
  EXPECT_EQ(iwarp->width, "4X");
  EXPECT_EQ(iwarp->speed, "");
  auto bare = ParseRate("25 Gb/sec");
  ASSERT_TRUE(bare);
  EXPECT_DOUBLE_EQ(bare->gbps, 25);
  EXPECT_FALSE(ParseRate("fast"));
  EXPECT_FALSE(ParseRate("400 Mb/sec (4X NDR)"));
  EXPECT_FALSE(ParseRate("400 Gb/sec 4X NDR"));
}

TEST(AttributesTest, CountersAndNoPma) {
  auto value = ParseCounter("2880761508848\n");
  EXPECT_EQ(value.kind, CounterText::Kind::kValue);
  EXPECT_EQ(value.value, 2880761508848u);
  EXPECT_EQ(ParseCounter("18446744073709551615").value, 18446744073709551615u);
  EXPECT_EQ(ParseCounter("N/A (no PMA)\n").kind, CounterText::Kind::kNoPma);
  EXPECT_EQ(ParseCounter("18446744073709551616").kind, CounterText::Kind::kMalformed);
  EXPECT_EQ(ParseCounter("-1").kind, CounterText::Kind::kMalformed);
  EXPECT_EQ(ParseCounter("12abc").kind, CounterText::Kind::kMalformed);
  EXPECT_EQ(ParseCounter("").kind, CounterText::Kind::kMalformed);
}

TEST(AttributesTest, StateLabels) {
  EXPECT_EQ(StateLabel(1), "down");
  EXPECT_EQ(StateLabel(4), "active");
  EXPECT_EQ(StateLabel(42), "unknown");
}

}  // namespace
}  // namespace ncclscope::rdma::sysfs
