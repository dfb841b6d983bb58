// The rdma netlink QP table: the parser against replies built as the kernel builds them
// (tests/support/nldev_messages.h), malformed and hostile input, the recorded-file source, and the
// real kernel on this host (no RDMA device: an empty table, or "not supported" when no RDMA core
// module is loaded).

#include "rdma/netlink/nldev_parser.h"

#include <gtest/gtest.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "rdma/netlink/netlink_qp_source.h"
#include "tests/support/nldev_messages.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::rdma::netlink {
namespace {

namespace nl = testing::nldev;

constexpr std::uint32_t kSeq = 1717;
constexpr std::uint32_t kPort = 0x4000123;

std::vector<nl::Qp> SomeQps(std::size_t n, std::int32_t pid, std::uint32_t first_qpn = 0x100) {
  std::vector<nl::Qp> qps;
  for (std::size_t i = 0; i < n; ++i) {
    nl::Qp qp;
    qp.lqpn = first_qpn + static_cast<std::uint32_t>(i);
    qp.pid = pid;
    qp.rqpn = 0x900 + static_cast<std::uint32_t>(i);
    qps.push_back(qp);
  }
  return qps;
}

nl::Qp Owned(std::uint32_t lqpn, std::int32_t pid) {
  nl::Qp qp;
  qp.lqpn = lqpn;
  qp.pid = pid;
  return qp;
}

struct Parsed {
  DumpReader::State state = DumpReader::State::kMore;
  int error = 0;
  std::vector<QpEntry> qps;
  DumpStats stats;
};

// Feeds `datagrams` one after the other to a live-dump reader, as nl_recv hands them over.
Parsed FeedLive(const std::vector<nl::Bytes>& datagrams, std::uint32_t seq = kSeq,
                std::uint32_t port = kPort) {
  Parsed p;
  DumpReader reader(RDMA_NLDEV_CMD_RES_QP_GET, seq, port);
  for (const nl::Bytes& d : datagrams) {
    reader.Feed(
        d.data(), d.size(), [&](const nlmsghdr& m) { ParseQpMessage(m, &p.qps, &p.stats); },
        &p.stats);
  }
  p.state = reader.state();
  p.error = reader.error();
  return p;
}

TEST(NldevParserTest, MultiPartDumpKeepsEveryEntryWithItsDeviceAndOwner) {
  std::vector<nl::Qp> qps = SomeQps(40, 4242);
  qps[3].port = 0;  // a QP still in RESET: no PORT_INDEX
  qps[3].state = nl::kQpsReset;
  qps[7].kernel_name = "ib_core";  // a kernel QP: KERN_NAME instead of PID
  qps[7].type = nl::kQptUd;
  qps[9].pid = 0;  // its task exited: no PID at all
  // Three messages of 16, 16 and 8 entries, then NLMSG_DONE, in one receive buffer.
  const Parsed p = FeedLive({nl::QpDumpReply(3, "mlx5_3", qps, kSeq, kPort, 16)});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  EXPECT_EQ(p.stats.messages, 3u);
  EXPECT_EQ(p.stats.malformed_messages, 0u);
  EXPECT_EQ(p.stats.malformed_entries, 0u);
  ASSERT_EQ(p.qps.size(), 40u);
  for (std::size_t i = 0; i < p.qps.size(); ++i) {
    EXPECT_EQ(p.qps[i].device, "mlx5_3");
    EXPECT_EQ(p.qps[i].device_index, 3u);
    EXPECT_EQ(p.qps[i].lqpn, 0x100 + i);
  }
  EXPECT_EQ(p.qps[0].port, 1u);
  EXPECT_EQ(p.qps[0].pid, 4242);
  EXPECT_EQ(p.qps[0].type, nl::kQptRc);
  EXPECT_EQ(p.qps[0].state, nl::kQpsRts);
  EXPECT_FALSE(p.qps[0].kernel);
  EXPECT_EQ(p.qps[3].port, 0u);
  EXPECT_EQ(p.qps[3].state, nl::kQpsReset);
  EXPECT_TRUE(p.qps[7].kernel);
  EXPECT_EQ(p.qps[7].pid, 0);
  EXPECT_EQ(p.qps[7].type, nl::kQptUd);
  EXPECT_EQ(p.qps[9].pid, 0);
  EXPECT_FALSE(p.qps[9].kernel);
}

TEST(NldevParserTest, DumpSpreadOverDatagramsEndsAtDone) {
  const std::vector<nl::Qp> qps = SomeQps(20, 77);
  // The kernel sends one skb per recvmsg: split the reply at its message boundaries.
  nl::Message a(NldevType(RDMA_NLDEV_CMD_RES_QP_GET), NLM_F_MULTI, kSeq, kPort);
  a.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 0).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  a.Nest(RDMA_NLDEV_ATTR_RES_QP);
  for (std::size_t i = 0; i < 12; ++i) nl::AppendQpEntry(a, qps[i]);
  a.End();
  nl::Message b(NldevType(RDMA_NLDEV_CMD_RES_QP_GET), NLM_F_MULTI, kSeq, kPort);
  b.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 0).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  b.Nest(RDMA_NLDEV_ATTR_RES_QP);
  for (std::size_t i = 12; i < 20; ++i) nl::AppendQpEntry(b, qps[i]);
  b.End();
  // After NLMSG_DONE nothing counts, not even a well-formed message.
  const nl::Bytes late = nl::QpDumpReply(0, "mlx5_0", SomeQps(5, 77, 0x500), kSeq, kPort);
  const Parsed p = FeedLive({a.Build(), b.Build(), nl::Done(kSeq, kPort), late});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  EXPECT_EQ(p.qps.size(), 20u);
  EXPECT_EQ(p.qps.back().lqpn, 0x100u + 19);
}

TEST(NldevParserTest, DoneWithAnErrnoOrAnErrorMessageFailsTheDump) {
  // A device that vanished: the dump callback returns -EINVAL, delivered in NLMSG_DONE.
  Parsed p = FeedLive({nl::QpDumpReply(1, "mlx5_1", SomeQps(2, 5), kSeq, kPort, 16, -EINVAL)});
  EXPECT_EQ(p.state, DumpReader::State::kFailed);
  EXPECT_EQ(p.error, EINVAL);
  EXPECT_EQ(p.qps.size(), 2u);  // what came before the end is kept

  // A rejected request: NLMSG_ERROR.
  p = FeedLive({nl::Error(kSeq, kPort, -EOPNOTSUPP, NldevType(RDMA_NLDEV_CMD_RES_QP_GET))});
  EXPECT_EQ(p.state, DumpReader::State::kFailed);
  EXPECT_EQ(p.error, EOPNOTSUPP);

  // An acknowledgement (error 0) does not end the dump.
  p = FeedLive({nl::Error(kSeq, kPort, 0, NldevType(RDMA_NLDEV_CMD_RES_QP_GET)),
                nl::QpDumpReply(1, "mlx5_1", SomeQps(3, 5), kSeq, kPort)});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  EXPECT_EQ(p.qps.size(), 3u);

  // An NLMSG_ERROR too short to hold its error is malformed, and ends the dump.
  nl::Bytes short_error = nl::Done(kSeq, kPort);
  nlmsghdr h{};
  std::memcpy(&h, short_error.data(), sizeof(h));
  h.nlmsg_type = NLMSG_ERROR;
  h.nlmsg_len = sizeof(nlmsghdr);
  std::memcpy(short_error.data(), &h, sizeof(h));
  short_error.resize(sizeof(nlmsghdr));
  p = FeedLive({short_error});
  EXPECT_EQ(p.state, DumpReader::State::kFailed);
  EXPECT_EQ(p.stats.malformed_messages, 1u);
}

TEST(NldevParserTest, MessagesForAnotherRequestAreIgnored) {
  const Parsed p = FeedLive({nl::QpDumpReply(0, "mlx5_0", SomeQps(4, 9), kSeq + 1, kPort),
                             nl::QpDumpReply(0, "mlx5_0", SomeQps(4, 9), kSeq, kPort + 1),
                             nl::QpDumpReply(0, "mlx5_0", SomeQps(2, 9, 0x700), kSeq, kPort)});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  ASSERT_EQ(p.qps.size(), 2u);
  EXPECT_EQ(p.qps[0].lqpn, 0x700u);
  EXPECT_EQ(p.stats.foreign_messages, 4u);  // each foreign reply: a data message and NLMSG_DONE
}

TEST(NldevParserTest, MessageOfAnotherCommandIsForeign) {
  nl::Bytes list = nl::DeviceListReply({{0, "mlx5_0", 1}}, kSeq, kPort);
  const Parsed p = FeedLive({list});
  EXPECT_EQ(p.state, DumpReader::State::kDone);  // its NLMSG_DONE still ends our dump
  EXPECT_EQ(p.stats.foreign_messages, 1u);
  EXPECT_TRUE(p.qps.empty());
}

TEST(NldevParserTest, AttributesOfTheWrongTypeSkipTheirEntryOrMessage) {
  auto qp_message = [](auto&& fill) {
    nl::Message m(NldevType(RDMA_NLDEV_CMD_RES_QP_GET), NLM_F_MULTI, kSeq, kPort);
    fill(m);
    return m.Build();
  };
  const std::uint8_t one = 1;
  const std::uint16_t two = 2;
  const char no_nul[4] = {'m', 'l', 'x', '5'};
  std::vector<nl::Bytes> messages;
  // 1: a good message whose table has: a good entry, LQPN as u8, PID as u16, no LQPN at all, a
  //    non-entry attribute in the table, another good entry.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_2");
    m.Nest(RDMA_NLDEV_ATTR_RES_QP);
    nl::AppendQpEntry(m, Owned(0x11, 1));
    m.Nest(RDMA_NLDEV_ATTR_RES_QP_ENTRY).Raw(RDMA_NLDEV_ATTR_RES_LQPN, &one, 1).End();
    m.Nest(RDMA_NLDEV_ATTR_RES_QP_ENTRY)
        .U32(RDMA_NLDEV_ATTR_RES_LQPN, 0x13)
        .Raw(RDMA_NLDEV_ATTR_RES_PID, &two, 2)
        .End();
    m.Nest(RDMA_NLDEV_ATTR_RES_QP_ENTRY).U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1).End();
    m.U32(RDMA_NLDEV_ATTR_RES_LQPN, 0x15);  // not inside an entry
    nl::AppendQpEntry(m, Owned(0x16, 1));
    m.End();
  }));
  // 2: device name without its NUL: the whole message is skipped.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).Raw(RDMA_NLDEV_ATTR_DEV_NAME, no_nul, sizeof(no_nul));
    m.Nest(RDMA_NLDEV_ATTR_RES_QP);
    nl::AppendQpEntry(m, Owned(0x21, 1));
    m.End();
  }));
  // 3: no device index.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_2").Nest(RDMA_NLDEV_ATTR_RES_QP);
    nl::AppendQpEntry(m, Owned(0x31, 1));
    m.End();
  }));
  // 4: no QP table.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_2");
  }));
  // 5: an empty device name, and one longer than IB_DEVICE_NAME_MAX.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).Raw(RDMA_NLDEV_ATTR_DEV_NAME, "", 0);
    m.Nest(RDMA_NLDEV_ATTR_RES_QP).End();
  }));
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).String(RDMA_NLDEV_ATTR_DEV_NAME, std::string(80, 'x'));
    m.Nest(RDMA_NLDEV_ATTR_RES_QP).End();
  }));
  // 6: attributes from a newer kernel (types beyond this header's RDMA_NLDEV_ATTR_MAX) are
  //    skipped, the rest is read.
  messages.push_back(qp_message([&](nl::Message& m) {
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_2");
    m.U32(RDMA_NLDEV_ATTR_MAX + 7, 99);
    m.Nest(RDMA_NLDEV_ATTR_RES_QP);
    m.Nest(RDMA_NLDEV_ATTR_RES_QP_ENTRY)
        .U32(RDMA_NLDEV_ATTR_RES_LQPN, 0x61)
        .U32(RDMA_NLDEV_ATTR_MAX + 3, 5)
        .U32(RDMA_NLDEV_ATTR_RES_PID, 6)
        .End();
    m.End();
  }));
  messages.push_back(nl::Done(kSeq, kPort));
  const Parsed p = FeedLive({nl::Concat(messages)});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  ASSERT_EQ(p.qps.size(), 3u);
  EXPECT_EQ(p.qps[0].lqpn, 0x11u);
  EXPECT_EQ(p.qps[1].lqpn, 0x16u);
  EXPECT_EQ(p.qps[2].lqpn, 0x61u);
  EXPECT_EQ(p.qps[2].pid, 6);
  EXPECT_EQ(p.stats.messages, 2u);
  EXPECT_EQ(p.stats.malformed_messages, 5u);
  EXPECT_EQ(p.stats.malformed_entries, 4u);
}

TEST(NldevParserTest, TruncatedMessagesAndEntriesAreCountedNotRead) {
  const nl::Bytes full = nl::QpDumpReply(0, "mlx5_0", SomeQps(3, 8), kSeq, kPort, 16);
  // The datagram cut inside the data message: its length runs past the buffer.
  nl::Bytes cut(full.begin(), full.begin() + 60);
  Parsed p = FeedLive({cut});
  EXPECT_EQ(p.state, DumpReader::State::kMore);
  EXPECT_TRUE(p.qps.empty());
  EXPECT_EQ(p.stats.malformed_messages, 1u);

  // A table whose last entry claims more bytes than the table holds.
  nl::Message m(NldevType(RDMA_NLDEV_CMD_RES_QP_GET), NLM_F_MULTI, kSeq, kPort);
  m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 0).String(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  m.Nest(RDMA_NLDEV_ATTR_RES_QP);
  nl::AppendQpEntry(m, Owned(0x41, 3));
  nl::AppendQpEntry(m, Owned(0x42, 3));
  m.End();
  nl::Bytes bytes = m.Build();
  // The second entry starts right after the first; find it by walking the table.
  const std::size_t table = NLMSG_ALIGN(sizeof(nlmsghdr)) + 8 + 12;  // index, name "mlx5_0\0"
  nlattr attr{};
  std::memcpy(&attr, bytes.data() + table + NLA_HDRLEN, sizeof(attr));  // first entry
  const std::size_t second = table + NLA_HDRLEN + NLA_ALIGN(attr.nla_len);
  std::memcpy(&attr, bytes.data() + second, sizeof(attr));
  ASSERT_EQ(attr.nla_type, RDMA_NLDEV_ATTR_RES_QP_ENTRY);
  attr.nla_len = static_cast<std::uint16_t>(attr.nla_len + 64);
  std::memcpy(bytes.data() + second, &attr, sizeof(attr));
  p = FeedLive({nl::Concat({bytes, nl::Done(kSeq, kPort)})});
  EXPECT_EQ(p.state, DumpReader::State::kDone);
  ASSERT_EQ(p.qps.size(), 1u);
  EXPECT_EQ(p.qps[0].lqpn, 0x41u);
  EXPECT_EQ(p.stats.malformed_entries, 1u);

  // A header claiming less than a header: the walk stops, nothing is read past it.
  nl::Bytes tiny = nl::Done(kSeq, kPort);
  nlmsghdr h{};
  std::memcpy(&h, tiny.data(), sizeof(h));
  h.nlmsg_len = 4;
  std::memcpy(tiny.data(), &h, sizeof(h));
  p = FeedLive({tiny});
  EXPECT_EQ(p.state, DumpReader::State::kMore);
  EXPECT_EQ(p.stats.malformed_messages, 1u);
}

TEST(NldevParserTest, UnalignedBuffersParseTheSame) {
  const nl::Bytes reply = nl::QpDumpReply(4, "mlx5_4", SomeQps(5, 10), kSeq, kPort);
  std::vector<unsigned char> shifted(reply.size() + 1);
  std::memcpy(shifted.data() + 1, reply.data(), reply.size());
  Parsed p;
  DumpReader reader(RDMA_NLDEV_CMD_RES_QP_GET, kSeq, kPort);
  reader.Feed(
      shifted.data() + 1, reply.size(),
      [&](const nlmsghdr& m) { ParseQpMessage(m, &p.qps, &p.stats); }, &p.stats);
  EXPECT_EQ(reader.state(), DumpReader::State::kDone);
  EXPECT_EQ(p.qps.size(), 5u);
}

TEST(NldevParserTest, GarbageAndMutationsNeverCrash) {
  const nl::Bytes reply =
      nl::Concat({nl::QpDumpReply(0, "mlx5_0", SomeQps(30, 11), kSeq, kPort, 7),
                  nl::QpDumpReply(1, "mlx5_1", SomeQps(9, 12), kSeq, kPort, 4)});
  std::mt19937 random(20240611);
  std::size_t parsed = 0;
  for (int round = 0; round < 3000; ++round) {
    nl::Bytes bytes = reply;
    if (round % 3 == 0) {
      for (unsigned char& b : bytes) b = static_cast<unsigned char>(random());
    } else {
      const int flips = 1 + static_cast<int>(random() % 8);
      for (int i = 0; i < flips; ++i) {
        bytes[random() % bytes.size()] = static_cast<unsigned char>(random());
      }
      if (round % 5 == 0) bytes.resize(random() % bytes.size());
    }
    const Parsed live = FeedLive({bytes});
    const QpDump recorded = ParseRecordedQpDump(bytes.data(), bytes.size());
    parsed += live.qps.size() + recorded.qps.size();
    for (const QpEntry& qp : recorded.qps) ASSERT_LE(qp.device.size(), 63u);
  }
  EXPECT_GT(parsed, 0u);  // single-byte flips leave most entries readable
}

TEST(NldevParserTest, DeviceListMessages) {
  const nl::Bytes reply =
      nl::DeviceListReply({{0, "mlx5_0", 1}, {1, "mlx5_1", 2}, {5, "mlx5_bond_0", 1}}, kSeq, kPort);
  std::vector<Device> devices;
  DumpStats stats;
  DumpReader reader(RDMA_NLDEV_CMD_GET, kSeq, kPort);
  reader.Feed(
      reply.data(), reply.size(),
      [&](const nlmsghdr& m) {
        Device d;
        if (ParseDeviceMessage(m, &d, &stats)) devices.push_back(d);
      },
      &stats);
  EXPECT_EQ(reader.state(), DumpReader::State::kDone);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[1].name, "mlx5_1");
  EXPECT_EQ(devices[1].ports, 2u);
  EXPECT_EQ(devices[2].index, 5u);
  EXPECT_EQ(devices[2].name, "mlx5_bond_0");
}

TEST(NldevParserTest, RecordedStreamOfSeveralDevices) {
  const nl::Bytes stream = nl::Concat({nl::QpDumpReply(0, "mlx5_0", SomeQps(3, 21), 1, 7),
                                       nl::QpDumpReply(1, "mlx5_1", SomeQps(2, 22, 0x300), 2, 7),
                                       nl::QpDumpReply(2, "mlx5_2", {}, 3, 7, 16, -EINVAL)});
  const QpDump dump = ParseRecordedQpDump(stream.data(), stream.size());
  EXPECT_EQ(dump.status, DumpStatus::kOk);
  EXPECT_EQ(dump.devices, 3u);
  EXPECT_EQ(dump.stats.device_errors, 1u);
  ASSERT_EQ(dump.qps.size(), 5u);
  EXPECT_EQ(dump.qps[3].device, "mlx5_1");
  EXPECT_EQ(dump.qps[3].lqpn, 0x300u);
  EXPECT_EQ(dump.qps[3].pid, 22);
}

TEST(NldevParserTest, FileSourceReadsARecordedDump) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/qps.nl";
  nl::WriteFile(path, nl::QpDumpReply(6, "mlx5_6", SomeQps(70, 31), 1, 9, 16));
  FileQpSource source(path);
  const QpDump dump = source.Dump();
  EXPECT_EQ(dump.status, DumpStatus::kOk);
  EXPECT_EQ(dump.qps.size(), 70u);
  EXPECT_EQ(dump.stats.messages, 5u);

  FileQpSource missing(dir.path() + "/none.nl");
  const QpDump none = missing.Dump();
  EXPECT_EQ(none.status, DumpStatus::kError);
  EXPECT_NE(none.error.find("none.nl"), std::string::npos) << none.error;
}

// The real kernel, with no RDMA device here. Where NETLINK_RDMA exists (ib_core loaded) the dump
// works and finds no QP of ours; where it does not, the result says so instead of failing.
TEST(NldevParserTest, KernelDumpOnThisHost) {
  NetlinkQpSource source(std::chrono::seconds(5));
  const QpDump dump = source.Dump();
  if (dump.status == DumpStatus::kUnsupported) {
    EXPECT_NE(dump.error.find("NETLINK_RDMA"), std::string::npos) << dump.error;
    EXPECT_TRUE(dump.qps.empty());
    return;
  }
  ASSERT_EQ(dump.status, DumpStatus::kOk) << dump.error;
  EXPECT_EQ(dump.stats.malformed_messages, 0u);
  EXPECT_EQ(dump.stats.foreign_messages, 0u);
  for (const QpEntry& qp : dump.qps) {
    EXPECT_FALSE(qp.device.empty());
    EXPECT_NE(qp.lqpn, 0u);
  }
  if (dump.devices == 0) {
    EXPECT_TRUE(dump.qps.empty());
  }
}

}  // namespace
}  // namespace ncclscope::rdma::netlink
