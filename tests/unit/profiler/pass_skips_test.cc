// What a pass over the ring directory leaves out when nothing asks for it, and what it must not
// lose by doing so (agent/profiler/ring_directory.h): the directory is listed only when it changed,
// when the last listing left files for later, or once a second; a ring that delivered records in
// the last pass is not asked for its lock, yet its writer's death is still found and every record
// delivered exactly once.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/profiler/ring_directory.h"
#include "plugin/ring/ring_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::testing {
namespace {

struct CountingSink : profiler::RecordSink {
  std::vector<std::uint64_t> seqs;
  void OnCommTables(const std::vector<profiler::LiveComm>&) override {}
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView& v) override {
    seqs.push_back(v.op.seq);
  }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record&) override {}
};

ring::RingGeometry Tiny() {
  return ring::RingGeometry{.lanes = 1, .lane_capacity = 16, .comm_slots = 1};
}

void WriteOp(ring::RingWriter& writer, std::uint64_t seq) {
  ncclscope_op_record op =
      analytics::testutil::Coll(7, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, seq, 0, 0).op;
  op.h.type = NCCLSCOPE_REC_OP;
  ASSERT_TRUE(writer.Write(&op, 1, 0));
}

std::unique_ptr<ring::RingWriter> NewRing(const std::string& dir) {
  auto writer = std::make_unique<ring::RingWriter>();
  ncclscope::ring::RingError error;
  EXPECT_TRUE(writer->Create(dir.c_str(), Tiny(), {"pod", "1", "job"}, &error)) << error;
  return writer;
}

TEST(PassSkipsTest, AQuietDirectoryIsListedWhenItChangesOrOnceASecond) {
  TempDir dir;
  std::vector<std::unique_ptr<ring::RingWriter>> writers;
  writers.push_back(NewRing(dir.path()));
  writers.push_back(NewRing(dir.path()));
  profiler::DirectoryLimits limits;
  limits.opens_per_pass = 1;  // the first listing leaves a ring for the next one
  profiler::RingDirectory directory(dir.path(), limits);
  CountingSink sink;
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().listings, 1u);
  EXPECT_EQ(directory.snapshot().rings_live, 1u);
  // Quiet for longer than the two seconds in which a change may hide in its timestamp tick.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  directory.Poll(sink);  // the last listing left a ring: listed, whatever the directory says
  EXPECT_EQ(directory.snapshot().listings, 2u);
  EXPECT_EQ(directory.snapshot().rings_live, 2u);
  directory.Poll(sink);  // nothing changed, nothing left, listed less than a second ago
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().listings, 2u);
  writers.push_back(NewRing(dir.path()));  // a new name changes the directory
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().listings, 3u);
  EXPECT_EQ(directory.snapshot().rings_live, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  directory.Poll(sink);  // once a second in any case
  EXPECT_GE(directory.snapshot().listings, 4u);
}

TEST(PassSkipsTest, ABusyRingsWriterDeathIsFoundAndNothingIsLostOrDoubled) {
  TempDir dir;
  auto writer = NewRing(dir.path());
  profiler::RingDirectory directory(dir.path(), {});
  CountingSink sink;
  for (std::uint64_t seq = 1; seq <= 3; ++seq) WriteOp(*writer, seq);
  directory.Poll(sink);  // delivered: the next pass does not ask for the lock
  for (std::uint64_t seq = 4; seq <= 5; ++seq) WriteOp(*writer, seq);
  writer->Close();  // the writer dies with records still in its ring
  int passes = 0;
  while (directory.snapshot().rings_reclaimed == 0 && passes < 10) {
    directory.Poll(sink);
    ++passes;
  }
  EXPECT_EQ(directory.snapshot().rings_reclaimed, 1u);
  EXPECT_LE(passes, 3);  // its records, a pass without any (the lock asked), reclaimed
  EXPECT_EQ(sink.seqs, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(directory.snapshot().rings_live, 0u);
}

}  // namespace
}  // namespace ncclscope::testing
