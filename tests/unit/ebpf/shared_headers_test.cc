// The two headers that define words shared across a process boundary, the plugin's ring format
// and the BPF programs' interface, are included together (the agent reads both): no enum,
// constant or struct of one may collide with the other's. This file not compiling is the failure;
// the test checks that each kept its own counter set.

#include <gtest/gtest.h>

#include "ncclscope/bpf_intf.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::ebpf {
namespace {

TEST(SharedHeadersTest, TheRingAndBpfInterfaceHeadersCompileTogether) {
  EXPECT_EQ(static_cast<int>(NCCLSCOPE_BPF_COUNTER_COUNT), 4);
  EXPECT_STREQ(ncclscope_counter_name(NCCLSCOPE_CTR_LATE_EVENT), "late_event");
}

}  // namespace
}  // namespace ncclscope::ebpf
