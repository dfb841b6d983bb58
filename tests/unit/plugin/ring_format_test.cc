// The ring format end to end at the byte level: the plugin's writer against the agent's validating
// reader, including every way a ring can be wrong (it is another process's file: untrusted).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "agent/profiler/record_decoder.h"
#include "agent/profiler/ring_file.h"
#include "plugin/ring/ring_writer.h"
#include "tests/support/op_record.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {
namespace {

using profiler::CorruptReason;
using profiler::RingFile;

struct Collect : profiler::RecordSink {
  std::vector<profiler::OpView> ops;
  std::vector<ncclscope_proxy_op_record> proxy;
  std::vector<ncclscope_comm_init_record> inits;
  std::vector<ncclscope_comm_finalize_record> finals;
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record& r) override {
    inits.push_back(r);
  }
  void OnCommFinalize(const profiler::RingOrigin&,
                      const ncclscope_comm_finalize_record& r) override {
    finals.push_back(r);
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView& v) override { ops.push_back(v); }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record& r) override {
    proxy.push_back(r);
  }
};

class RingFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ring::RingGeometry geometry{.lanes = 2, .lane_capacity = 16, .comm_slots = 4};
    ncclscope::ring::RingError error;
    ASSERT_TRUE(writer_.Create(dir_.path().c_str(), geometry, {"host-a", "9.9", "job-7"}, &error))
        << error;
  }

  std::unique_ptr<RingFile> Open() {
    std::string reason;
    auto file = RingFile::Open(writer_.path(), &reason);
    EXPECT_NE(file, nullptr) << reason;
    return file;
  }

  void Write(ncclscope_op_record op, std::uint32_t lane = 0) {
    ASSERT_TRUE(writer_.Write(&op, 1, lane));
  }

  // The raw bytes of lane `lane`'s slot `slot` in the writer's mapping.
  unsigned char* Slot(std::uint32_t lane, std::uint32_t slot) {
    auto* base = reinterpret_cast<unsigned char*>(writer_.header());
    return base + writer_.header()->data_offset +
           (static_cast<std::size_t>(lane) * 16 + slot) * NCCLSCOPE_RECORD_SIZE;
  }
  ncclscope_lane* Lane(std::uint32_t lane) {
    auto* base = reinterpret_cast<unsigned char*>(writer_.header());
    return reinterpret_cast<ncclscope_lane*>(base + writer_.header()->lanes_offset +
                                             lane * NCCLSCOPE_LANE_SIZE);
  }

  TempDir dir_;
  ring::RingWriter writer_;
};

// The checksum is part of the format: a plugin and an agent of different versions must agree on
// it. The value is the original block-by-block definition's (ncclscope_ring.h), computed once.
TEST(RingChecksumTest, KeepsTheFormatsValue) {
  unsigned char record[NCCLSCOPE_RECORD_SIZE];
  for (std::size_t i = 0; i < sizeof(record); ++i) {
    record[i] = static_cast<unsigned char>(i * 37 + 11);
  }
  EXPECT_EQ(ncclscope_checksum(record, sizeof(record)), 0x5660282fu);
  // The checksum field (bytes 4-7 of the header's first word) does not count; every other does.
  unsigned char changed[NCCLSCOPE_RECORD_SIZE];
  std::memcpy(changed, record, sizeof(record));
  changed[5] ^= 0xFF;
  EXPECT_EQ(ncclscope_checksum(changed, sizeof(changed)), 0x5660282fu);
  for (std::size_t at : {std::size_t{0}, std::size_t{8}, std::size_t{33}, std::size_t{255}}) {
    std::memcpy(changed, record, sizeof(record));
    changed[at] ^= 0x01;
    EXPECT_NE(ncclscope_checksum(changed, sizeof(changed)), 0x5660282fu) << "byte " << at;
  }
}

// The definition, one block and one word at a time, against ncclscope_checksum (written for
// speed, issue 42) over records of every byte value pattern a seeded generator gives.
TEST(RingChecksumTest, MatchesTheBlockByBlockDefinition) {
  const auto definition = [](const unsigned char* bytes, std::size_t size) {
    std::uint64_t a = 0x6e63636c73636f70ULL;
    std::uint64_t b = 0;
    for (std::size_t block = 0; block + 32 <= size; block += 32) {
      std::uint64_t s = 0;
      for (std::size_t word = 0; word < 4; ++word) {
        std::uint64_t w = 0;
        std::memcpy(&w, bytes + block + word * 8, 8);
        if (block == 0 && word == 0) w &= 0xFFFFFFFFULL;  // the checksum field counts as zero
        s += w;
      }
      a += s;
      b += a;
    }
    return static_cast<std::uint32_t>(a ^ (a >> 32) ^ b ^ (b >> 29));
  };
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;
  alignas(64) unsigned char record[NCCLSCOPE_RECORD_SIZE + 8];
  for (int round = 0; round < 2000; ++round) {
    for (unsigned char& byte : record) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      byte = static_cast<unsigned char>(state >> 56);
    }
    const unsigned char* at = record + round % 8;  // aligned and not
    for (const std::size_t size :
         {std::size_t{32}, std::size_t{96}, std::size_t{NCCLSCOPE_RECORD_SIZE}}) {
      ASSERT_EQ(ncclscope_checksum(at, size), definition(at, size)) << "round " << round;
    }
  }
}

// The writer's checksum of a record in its ring slot (RecordChecksum, two lanes at a time) is the
// format's, over records of every byte value pattern a seeded generator gives.
TEST(RingChecksumTest, TheWritersChecksumIsTheFormats) {
  std::uint64_t state = 0x2545F4914F6CDD1DULL;
  alignas(64) unsigned char record[NCCLSCOPE_RECORD_SIZE];
  for (int round = 0; round < 2000; ++round) {
    for (unsigned char& byte : record) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      byte = static_cast<unsigned char>(state >> 56);
    }
    if (round % 3 == 0) std::memset(record + 8 * (round % 32), 0xFF, 8);  // carries in both lanes
    ASSERT_EQ(ring::RecordChecksum(record), ncclscope_checksum(record, sizeof(record)))
        << "round " << round;
  }
}

TEST_F(RingFormatTest, RecordsRoundTripWithTheirOrigin) {
  Write(AllReduceRecord(0xAB, 1, 3));
  ncclscope_proxy_op_record net{};
  net.h.type = NCCLSCOPE_REC_PROXY_OP;
  net.comm_id = 0xAB;
  net.bytes = 4096;
  net.channel = 5;
  net.is_send = 1;
  net.start_ns = 10;
  net.end_ns = 20;
  net.weight = 8;
  ASSERT_TRUE(writer_.Write(&net, 1, 1));
  // The same with a weight no record_one_in gives: skipped as corrupt, its sums never multiplied.
  ncclscope_proxy_op_record heavy = net;
  heavy.weight = NCCLSCOPE_MAX_RECORD_ONE_IN + 1;
  ASSERT_TRUE(writer_.Write(&heavy, 1, 1));
  auto file = Open();
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->origin().hostname, "host-a");
  EXPECT_EQ(file->origin().job_id, "job-7");
  EXPECT_EQ(file->origin().pid, getpid());
  Collect sink;
  const profiler::DrainStats stats = file->Drain(sink);
  EXPECT_EQ(stats.records, 2u);
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kField)], 1u);
  ASSERT_EQ(sink.ops.size(), 1u);
  EXPECT_EQ(sink.ops[0].op.seq, 1u);
  EXPECT_EQ(sink.ops[0].n_channels, 3u);
  EXPECT_EQ(sink.ops[0].channels[2].end_off_ns, 300u);
  ASSERT_EQ(sink.proxy.size(), 1u);
  EXPECT_EQ(sink.proxy[0].bytes, 4096u);
  EXPECT_EQ(sink.proxy[0].weight, 8u);
  // Consumed: a second drain finds nothing, and neither does a restarted reader.
  EXPECT_EQ(file->Drain(sink).records, 0u);
  EXPECT_EQ(Open()->Drain(sink).records, 0u);
}

TEST_F(RingFormatTest, FullLanesDropAndCountInsteadOfOverwriting) {
  // 2 lanes x 16: the writer spills into the second lane, then drops.
  for (int i = 0; i < 40; ++i) {
    auto op = AllReduceRecord(0xAB, static_cast<std::uint64_t>(i));
    writer_.Write(&op, 1, 0);
  }
  auto file = Open();
  profiler::RingHeaderSnapshot header;
  ASSERT_TRUE(file->ReadHeader(&header));
  EXPECT_EQ(header.dropped_ring_full, 8u);
  Collect sink;
  EXPECT_EQ(file->Drain(sink).records, 32u);
  // The oldest records survive (nothing was overwritten): seq 0..31.
  std::vector<std::uint64_t> seqs;
  for (const auto& v : sink.ops) seqs.push_back(v.op.seq);
  std::sort(seqs.begin(), seqs.end());
  EXPECT_EQ(seqs.front(), 0u);
  EXPECT_EQ(seqs.back(), 31u);
  // Space is reusable once consumed.
  auto op = AllReduceRecord(0xAB, 99);
  EXPECT_TRUE(writer_.Write(&op, 1, 0));
}

TEST_F(RingFormatTest, BusyLanesCountAsContention) {
  Lane(0)->busy = 1;
  Lane(1)->busy = 1;
  auto op = AllReduceRecord(0xAB, 1);
  EXPECT_FALSE(writer_.Write(&op, 1, 0));
  EXPECT_EQ(writer_.header()->counters[NCCLSCOPE_CTR_DROPPED_CONTENTION], 1u);
  Lane(1)->busy = 0;
  EXPECT_TRUE(writer_.Write(&op, 1, 0));
}

TEST_F(RingFormatTest, CorruptRecordsAreSkippedAndCountedByReason) {
  for (int i = 0; i < 8; ++i) Write(AllReduceRecord(0xAB, static_cast<std::uint64_t>(i), 2));
  // 0: flipped bit -> checksum. 1: stale position -> position. 2: unknown type, 3: bad func,
  // 4: bytes that do not match count x size, 5: a weight beyond any record_one_in (it would
  // multiply the record's sums), all with a correct checksum. 6 (the largest weight), 7 valid.
  Slot(0, 0)[40] ^= 0x01;
  auto rewrite = [&](std::uint32_t slot, auto&& change) {
    ncclscope_op_record op{};
    std::memcpy(&op, Slot(0, slot), sizeof(op));
    change(op);
    op.h.checksum = 0;
    op.h.checksum = ncclscope_checksum(&op, sizeof(op));
    std::memcpy(Slot(0, slot), &op, sizeof(op));
  };
  rewrite(1, [](ncclscope_op_record& op) { op.h.position = 17; });
  rewrite(2, [](ncclscope_op_record& op) { op.h.type = 77; });
  rewrite(3, [](ncclscope_op_record& op) { op.func = 200; });
  rewrite(4, [](ncclscope_op_record& op) { op.bytes = 5; });
  rewrite(5, [](ncclscope_op_record& op) { op.weight = NCCLSCOPE_MAX_RECORD_ONE_IN + 1; });
  rewrite(6, [](ncclscope_op_record& op) { op.weight = NCCLSCOPE_MAX_RECORD_ONE_IN; });
  auto file = Open();
  Collect sink;
  ::testing::internal::CaptureStderr();
  const profiler::DrainStats stats = file->Drain(sink);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kChecksum)], 1u);
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kPosition)], 1u);
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kType)], 1u);
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kField)], 3u);
  ASSERT_EQ(sink.ops.size(), 2u);
  EXPECT_EQ(sink.ops[0].op.seq, 6u);
  EXPECT_EQ(sink.ops[1].op.seq, 7u);
  // The first rejection of each reason is logged with the check it failed; the rest are counted.
  EXPECT_NE(log.find("position 0, type 3 (reason=checksum, failed check: header.checksum)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("position 1, type 3 (reason=position, failed check: header.position)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("position 2, type 77 (reason=type, failed check: header.type)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("position 3, type 3 (reason=field, failed check: op.func)"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("position 4"), std::string::npos) << log;  // a second field rejection
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4) << log;
  // Later drains of the same ring log no reason twice.
  Write(AllReduceRecord(0xAB, 8, 2));
  rewrite(8, [](ncclscope_op_record& op) { op.algo = 99; });
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(file->Drain(sink).corrupt[static_cast<int>(CorruptReason::kField)], 1u);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(RecordDecoderTest, NamesTheCheckARecordFailed) {
  auto inspect = [](ncclscope_op_record op) {
    op.h.type = NCCLSCOPE_REC_OP;  // as the writer stamps them
    op.h.layout = NCCLSCOPE_RECORD_LAYOUT;
    op.h.position = 5;
    op.h.checksum = 0;
    op.h.checksum = ncclscope_checksum(&op, sizeof(op));
    unsigned char bytes[NCCLSCOPE_RECORD_SIZE] = {};
    std::memcpy(bytes, &op, sizeof(op));
    return profiler::InspectRecord(bytes, 5);
  };
  const ncclscope_op_record valid = AllReduceRecord(0xAB, 1, 2);
  EXPECT_EQ(inspect(valid).reason, CorruptReason::kNone);
  EXPECT_EQ(inspect(valid).check, "");
  ncclscope_op_record op = valid;
  op.n_timed = 3;  // two channels timed in the mask
  EXPECT_EQ(inspect(op).reason, CorruptReason::kField);
  EXPECT_EQ(inspect(op).check, "op.n_timed != popcount(op.channel_mask)");
  op = valid;
  op.gpu_end_ns = op.gpu_start_ns - 1;
  EXPECT_EQ(inspect(op).check, "op.gpu_end_ns < op.gpu_start_ns");
  op = valid;
  op.rank = -2;
  EXPECT_EQ(inspect(op).check, "op.rank");
}

TEST_F(RingFormatTest, ContinuationsMustMatchTheirOp) {
  // An op announcing 20 timed channels needs one continuation record right behind it.
  unsigned char buffer[2 * NCCLSCOPE_RECORD_SIZE] = {};
  ncclscope_op_record op = AllReduceRecord(0xAB, 3, 20);
  op.n_continuations = 1;
  std::memcpy(buffer, &op, sizeof(op));
  ncclscope_op_channels_record cont{};
  cont.h.type = NCCLSCOPE_REC_OP_CHANNELS;
  cont.comm_id = op.comm_id;
  cont.seq = op.seq;
  cont.op_index = op.op_index;
  cont.part = 1;
  cont.first = 16;
  cont.n = 4;
  for (std::uint32_t i = 0; i < 4; ++i) cont.ch[i] = {i, 1000 + i};
  std::memcpy(buffer + NCCLSCOPE_RECORD_SIZE, &cont, sizeof(cont));
  ASSERT_TRUE(writer_.Write(buffer, 2, 0));
  cont.seq = 4;  // belongs to another op
  op.seq = 4;
  std::memcpy(buffer, &op, sizeof(op));
  cont.seq = 999;
  std::memcpy(buffer + NCCLSCOPE_RECORD_SIZE, &cont, sizeof(cont));
  ASSERT_TRUE(writer_.Write(buffer, 2, 0));
  auto file = Open();
  Collect sink;
  ::testing::internal::CaptureStderr();
  const profiler::DrainStats stats = file->Drain(sink);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("positions 0-3 (reason=continuation)"), std::string::npos) << log;
  ASSERT_EQ(sink.ops.size(), 2u);
  EXPECT_EQ(sink.ops[0].n_channels, 20u);
  EXPECT_EQ(sink.ops[0].channel_ids[19], 19);
  EXPECT_EQ(sink.ops[0].channels[19].end_off_ns, 1003u);
  EXPECT_EQ(sink.ops[1].n_channels, 16u);  // delivered with what could be trusted
  EXPECT_EQ(stats.corrupt[static_cast<int>(CorruptReason::kContinuation)], 2u);
}

TEST_F(RingFormatTest, NonsensicalLaneCursorsAreResynced) {
  Write(AllReduceRecord(0xAB, 1));
  Lane(0)->head = 1'000'000;  // a writer gone wild
  auto file = Open();
  Collect sink;
  EXPECT_EQ(file->Drain(sink).lane_resyncs, 1u);
  EXPECT_EQ(Lane(0)->tail, 1'000'000u);
  // And a consumer gone wild: the writer does not trust a tail beyond head and uses another lane.
  Lane(1)->tail = 5;
  auto op = AllReduceRecord(0xAB, 2);
  EXPECT_TRUE(writer_.Write(&op, 1, 1));
  EXPECT_EQ(Lane(1)->head, 0u);
  EXPECT_EQ(Lane(0)->head, 1'000'001u);
  EXPECT_EQ(file->Drain(sink).records, 1u);
  EXPECT_EQ(sink.ops.back().op.seq, 2u);
}

TEST_F(RingFormatTest, BadHeadersAreRejectedWithAReason) {
  const std::string path = writer_.path();
  auto patch = [&](std::size_t offset, std::uint64_t value, std::size_t size) {
    auto* bytes = reinterpret_cast<unsigned char*>(writer_.header());
    std::memcpy(bytes + offset, &value, size);
  };
  auto reason_of = [&] {
    std::string reason;
    auto file = RingFile::Open(path, &reason);
    return file == nullptr ? reason : std::string("accepted");
  };
  EXPECT_EQ(reason_of(), "accepted");
  patch(offsetof(ncclscope_ring_header, magic), 0x1234, 8);
  EXPECT_EQ(reason_of(), "magic");
  patch(offsetof(ncclscope_ring_header, magic), NCCLSCOPE_RING_MAGIC, 8);
  patch(offsetof(ncclscope_ring_header, version), 2, 4);
  EXPECT_EQ(reason_of(), "version");
  patch(offsetof(ncclscope_ring_header, version), NCCLSCOPE_RING_VERSION, 4);
  patch(offsetof(ncclscope_ring_header, record_size), 128, 4);
  EXPECT_EQ(reason_of(), "format");
  patch(offsetof(ncclscope_ring_header, record_size), NCCLSCOPE_RECORD_SIZE, 4);
  patch(offsetof(ncclscope_ring_header, lane_capacity), 17, 4);
  EXPECT_EQ(reason_of(), "geometry");
  patch(offsetof(ncclscope_ring_header, lane_capacity), 16, 4);
  patch(offsetof(ncclscope_ring_header, lane_count), 100000, 4);
  EXPECT_EQ(reason_of(), "geometry");
  patch(offsetof(ncclscope_ring_header, lane_count), 2, 4);
  EXPECT_EQ(reason_of(), "accepted");
  ASSERT_EQ(::truncate(path.c_str(), 8192), 0);
  EXPECT_EQ(reason_of(), "size");
  std::string reason;
  EXPECT_EQ(RingFile::Open(dir_.path() + "/absent.ring", &reason), nullptr);
  EXPECT_EQ(reason, "open");
}

TEST_F(RingFormatTest, TruncationUnderTheReaderBreaksTheRingNotTheAgent) {
  Write(AllReduceRecord(0xAB, 1));
  auto file = Open();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(::truncate(writer_.path(), 4096), 0);  // the owner shrinks its file
  Collect sink;
  file->Drain(sink);  // would be SIGBUS without the guard
  EXPECT_FALSE(file->healthy());
  profiler::RingHeaderSnapshot header;
  EXPECT_FALSE(file->ReadHeader(&header));
  EXPECT_TRUE(file->ReadCommTable().empty());
}

// The agent reads only the comm slots the plugin says it took (header.comm_slots_used): a live
// slot above it is not read; 0 (a plugin before the field) and values beyond the table (a hostile
// writer) read the whole table.
TEST_F(RingFormatTest, CommTableReadsOnlyTheSlotsThePluginTook) {
  for (std::uint32_t i : {0u, 2u}) {
    ncclscope_comm_slot* slot = writer_.comm_slot(i);
    slot->comm_id = 100 + i;
    slot->rank = 0;
    slot->nranks = 2;
    slot->nnodes = 1;
    slot->state = NCCLSCOPE_COMM_LIVE;
  }
  auto file = Open();
  auto ids = [&] {
    std::vector<std::uint64_t> out;
    for (const auto& slot : file->ReadCommTable()) out.push_back(slot.comm_id);
    return out;
  };
  writer_.header()->comm_slots_used = 1;
  EXPECT_EQ(ids(), (std::vector<std::uint64_t>{100}));
  writer_.header()->comm_slots_used = 3;
  EXPECT_EQ(ids(), (std::vector<std::uint64_t>{100, 102}));
  writer_.header()->comm_slots_used = 0;
  EXPECT_EQ(ids(), (std::vector<std::uint64_t>{100, 102}));
  writer_.header()->comm_slots_used = UINT32_MAX;
  EXPECT_EQ(ids(), (std::vector<std::uint64_t>{100, 102}));
  EXPECT_TRUE(file->healthy());
}

// ABI v1-v3 (NCCL 2.23-2.26) never tell a communicator's size: its slot is read with nranks and
// nnodes 0 once the first op named it (comm id, rank); before that (comm id 0) it is not, and a
// size that is half there is a bad slot.
TEST_F(RingFormatTest, CommSlotsOfUnknownSizeAreReadOnceNamed) {
  auto set = [&](std::uint32_t i, std::uint64_t id, std::int32_t rank, std::int32_t nranks,
                 std::int32_t nnodes) {
    ncclscope_comm_slot* slot = writer_.comm_slot(i);
    slot->comm_id = id;
    slot->rank = rank;
    slot->nranks = nranks;
    slot->nnodes = nnodes;
    slot->state = NCCLSCOPE_COMM_LIVE;
  };
  set(0, 100, 3, 0, 0);   // named, size unknown
  set(1, 0, -1, 0, 0);    // not named yet
  set(2, 102, 3, 0, 1);   // nnodes without nranks
  set(3, 103, -1, 0, 0);  // a rank below 0
  writer_.header()->comm_slots_used = 4;
  auto file = Open();
  ASSERT_NE(file, nullptr);
  const auto table = file->ReadCommTable();
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].comm_id, 100u);
  EXPECT_EQ(table[0].rank, 3);
  EXPECT_EQ(table[0].nranks, 0);
}

// The count table (EXACT_COUNTS): each slot's valid keys with the slot's identity, for live and
// finalized slots; free slots, slots without an identity yet (ABI v1-v3 before the first op),
// slots being rewritten (odd seqlock version) and keys no plugin can write are skipped.
TEST_F(RingFormatTest, CountTableReadsEachSlotsValidKeysWithItsIdentity) {
  EXPECT_NE(writer_.header()->features & NCCLSCOPE_FEATURE_EXACT_COUNTS, 0u);
  const std::uint32_t key =
      ncclscope_count_key(NCCLSCOPE_FUNC_ALL_REDUCE, NCCLSCOPE_ALGO_RING, NCCLSCOPE_PROTO_LL, 3);
  for (std::uint32_t i = 0; i < 4; ++i) {
    ncclscope_comm_slot* slot = writer_.comm_slot(i);
    slot->comm_id = i == 2 ? 0 : 100 + i;  // slot 2: identity still pending
    slot->context = 7;
    slot->rank = static_cast<std::int32_t>(i);
    slot->state = i == 3 ? NCCLSCOPE_COMM_FINALIZED : NCCLSCOPE_COMM_LIVE;
    ncclscope_op_count* table = writer_.count_table(i);
    ASSERT_NE(table, nullptr);
    table[5] = {key, 0, 10 + i, 4096 * (10 + i)};
    table[9] = {0x1FFFFu, 0, 99, 99};  // func 31: no plugin writes it
  }
  writer_.header()->comm_slots_used = 4;
  auto file = Open();
  ASSERT_NE(file, nullptr);
  auto read = [&] {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;  // comm id, ops
    for (const profiler::OpCounts& c : file->ReadCounts()) {
      EXPECT_EQ(c.context, 7u);
      EXPECT_EQ(c.rank, static_cast<std::int32_t>(c.slot));
      for (const ncclscope_op_count& e : c.counts) {
        EXPECT_EQ(e.key, key);
        EXPECT_EQ(e.bytes, 4096 * e.ops);
        out.emplace_back(c.comm_id, e.ops);
      }
    }
    return out;
  };
  using Pairs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(read(), (Pairs{{100, 10}, {101, 11}, {103, 13}}));
  writer_.comm_slot(1)->version = 1;  // being rewritten: skipped this pass
  writer_.comm_slot(3)->state = NCCLSCOPE_COMM_FREE;
  EXPECT_EQ(read(), (Pairs{{100, 10}}));
  EXPECT_TRUE(file->healthy());
}

// A count table where the geometry puts none, or of another size, is a ring the agent refuses.
TEST_F(RingFormatTest, CountTableOutsideItsPlaceIsABadGeometry) {
  auto* header = writer_.header();
  const std::uint64_t offset = header->count_table_offset;
  auto reason_of = [&] {
    std::string reason;
    return RingFile::Open(writer_.path(), &reason) == nullptr ? reason : std::string("accepted");
  };
  EXPECT_EQ(reason_of(), "accepted");
  header->count_table_offset = header->comm_table_offset;  // over the comm table
  EXPECT_EQ(reason_of(), "geometry");
  header->count_table_offset = offset + 64;  // into the lanes
  EXPECT_EQ(reason_of(), "geometry");
  header->count_table_offset = offset + 1;
  EXPECT_EQ(reason_of(), "geometry");
  header->count_table_offset = offset;
  header->count_keys = NCCLSCOPE_COUNT_KEYS * 2;
  EXPECT_EQ(reason_of(), "geometry");
  header->count_keys = NCCLSCOPE_COUNT_KEYS;
  EXPECT_EQ(reason_of(), "accepted");
}

TEST_F(RingFormatTest, OwnerLivenessFollowsTheWritersLock) {
  auto file = Open();
  EXPECT_TRUE(file->OwnerAlive());
  writer_.Close();  // the process is gone: its flock with it
  EXPECT_FALSE(file->OwnerAlive());
  EXPECT_FALSE(file->OwnerAlive());
}

TEST_F(RingFormatTest, ControlsUseASeqlock) {
  auto file = Open();
  ncclscope_controls controls{};
  controls.event_mask = 0x42;
  controls.min_bytes = 4096;
  ASSERT_TRUE(file->WriteControls(controls));
  EXPECT_EQ(writer_.header()->controls.seq, 2u);
  EXPECT_EQ(writer_.header()->controls.event_mask, 0x42u);
  EXPECT_EQ(writer_.header()->controls.min_bytes, 4096u);
  ASSERT_TRUE(file->WriteControls(controls));
  EXPECT_EQ(writer_.header()->controls.seq, 4u);
}

TEST(RingGeometryTest, RecordBytesBecomePowerOfTwoLanes) {
  const auto g = ring::RingGeometry::ForRecordBytes(8u << 20, 16, 256);
  EXPECT_EQ(g.lane_capacity, 2048u);
  EXPECT_EQ(ring::RingGeometry::ForRecordBytes(65536, 1, 4).lane_capacity, 256u);
  EXPECT_EQ(ring::RingGeometry::ForRecordBytes(1000, 4, 4).lane_capacity, 16u);
  // Header, comm table, count table (128 keys of 24 bytes per slot), lanes (to a page), records.
  EXPECT_EQ(g.FileSize(), 4096u + 256 * 512 + 256 * 128 * 24 + 4096 + (8u << 20));
}

}  // namespace
}  // namespace ncclscope::testing
