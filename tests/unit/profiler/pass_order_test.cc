// The order of one pass over the ring directory (agent/profiler/record_sink.h): the live rings'
// communicator tables first, then the records. A communicator a live table lists is known (sized,
// its local ranks placed) before its records arrive, so they are counted as they are drained;
// only a record whose communicator neither a table nor a comm-init record describes waits for
// the end of the pass.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "agent/core/text_exposition.h"
#include "agent/profiler/ring_directory.h"
#include "plugin/ring/ring_writer.h"
#include "tests/support/exposition.h"
#include "tests/support/op_record.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {
namespace {

constexpr std::uint64_t kListed = 0x42;    // in the ring's communicator table
constexpr std::uint64_t kUnlisted = 0x43;  // in no table, no comm-init record

// What a sink is handed, in order: "tables" or "op <comm>".
struct OrderSink : profiler::RecordSink {
  std::vector<std::string> calls;
  void OnCommTables(const std::vector<profiler::LiveComm>& comms) override {
    calls.push_back("tables " + std::to_string(comms.size()));
  }
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView& v) override {
    calls.push_back("op " + std::to_string(v.op.comm_id));
  }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record&) override {}
};

// A ring whose table lists kListed (rank 0 of 4 on this node) and that holds one AllReduce of
// kListed and one of kUnlisted, written by this process (its flock keeps the ring alive).
class PassOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ring::RingGeometry geometry{.lanes = 1, .lane_capacity = 16, .comm_slots = 2};
    ncclscope::ring::RingError error;
    ASSERT_TRUE(writer_.Create(dir_.path().c_str(), geometry, {"pod-a", "1", "job"}, &error))
        << error;
    ncclscope_comm_slot* slot = writer_.comm_slot(0);
    slot->comm_id = kListed;
    slot->rank = 0;
    slot->nranks = 4;
    slot->nnodes = 1;
    slot->state = NCCLSCOPE_COMM_LIVE;
    WriteAllReduce(kListed);
    WriteAllReduce(kUnlisted);
  }

  void WriteAllReduce(std::uint64_t comm) {
    ncclscope_op_record op = AllReduceRecord(comm, 1);
    op.proto = NCCLSCOPE_PROTO_SIMPLE;
    op.datatype = NCCLSCOPE_DT_INT8;
    op.count = op.bytes = 1 << 20;
    ASSERT_TRUE(writer_.Write(&op, 1, 0));
  }

  TempDir dir_;
  ring::RingWriter writer_;
};

std::string Render(const analytics::NcclAnalytics& a) {
  std::string text;
  metrics::TextWriter out(text);
  a.Render(out, 10'000'000'000);
  return text;
}

std::string OpsOf(std::uint64_t comm) {
  char prefix[96];
  std::snprintf(prefix, sizeof(prefix), "ncclscope_nccl_ops_total{comm=\"0x%016llx\",rank=\"0\"",
                static_cast<unsigned long long>(comm));
  return prefix;
}

TEST_F(PassOrderTest, TheTablesComeBeforeTheRecords) {
  profiler::RingDirectory directory(dir_.path());
  OrderSink sink;
  directory.Poll(sink);
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"tables 1", "op 66", "op 67"}));
  sink.calls.clear();
  directory.Poll(sink);  // every pass, even with nothing new
  EXPECT_EQ(sink.calls, std::vector<std::string>{"tables 1"});
}

TEST_F(PassOrderTest, AListedCommunicatorsOpIsCountedWhileTheRingIsDrained) {
  profiler::RingDirectory directory(dir_.path());
  analytics::NcclAnalytics analytics;
  directory.Poll(analytics);
  // Before the pass ends: the listed communicator's op is in, the unlisted one's waits.
  std::string text = Render(analytics);
  EXPECT_NE(text.find(OpsOf(kListed)), std::string::npos) << text;
  EXPECT_EQ(text.find(OpsOf(kUnlisted)), std::string::npos) << text;
  analytics.EndPass(analytics::Clock::now());
  text = Render(analytics);
  EXPECT_NE(text.find(OpsOf(kUnlisted)), std::string::npos) << "held until the pass's end";
}

}  // namespace
}  // namespace ncclscope::testing
