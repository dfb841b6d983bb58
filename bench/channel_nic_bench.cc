// The agent-side cost of naming the NIC behind each channel (docs/benchmarks.md, "Channel -> NIC"):
//
//  * BM_NetworkRecord: one network PROXY_OP record through NcclAnalytics::OnProxyOp, side by side
//    for records without net-plugin information (arg 0), IB records whose QPs the channel already
//    resolved (arg 1: the steady state, one owner-cache hit, one row lookup, a scan of the row's
//    QPs), and IB records with plugin.qp_table off (arg 2). 8 ranks x 16 channels x 2 directions,
//    two QPs per record, as NCCL's IB transport with 2 QPs per connection.
//  * BM_QpDump: one QP table of `n` QPs on 8 HCAs: parsing the recorded netlink replies (the same
//    parser as the kernel's) and OnQpDump (thread -> process, the (process, QP) index, pending
//    lookups). What the kernel spends producing the dump (a QP query per QP) is not measurable
//    here: no HCA.
//
// Run: build/default/bench/channel_nic_bench (exact command and results in docs/benchmarks.md).

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "rdma/netlink/nldev_parser.h"
#include "tests/support/nldev_messages.h"

namespace ncclscope::bench {
namespace {

constexpr int kRanks = 8;
constexpr int kChannels = 16;
constexpr std::uint64_t kComm = 0xBE7C;

// Every rank's ring is written by process 1000 + rank, whose proxy thread 2000 + rank owns QPs
// 0x100 + 4 * (channel * 2 + direction) + {0, 1}.
class Hosts : public analytics::HostProcesses {
 public:
  analytics::RingOwner OwnerOf(const profiler::RingOrigin& origin) override {
    return {analytics::OwnerStatus::kOk, 1000 + origin.pid};
  }
  std::optional<std::int32_t> ThreadGroupOf(std::int32_t task) override { return task - 1000; }
};

std::uint32_t QpOf(int channel, bool send, int which) {
  return 0x100 + static_cast<std::uint32_t>(4 * (channel * 2 + (send ? 1 : 0)) + which);
}

testing::nldev::Bytes NodeReplies(int qps_per_device) {
  std::vector<testing::nldev::Bytes> replies;
  for (int d = 0; d < kRanks; ++d) {
    std::vector<testing::nldev::Qp> qps;
    for (int q = 0; q < qps_per_device; ++q) {
      testing::nldev::Qp qp;
      qp.lqpn = 0x100 + static_cast<std::uint32_t>(q);
      qp.pid = 2000 + d;
      qps.push_back(qp);
    }
    replies.push_back(testing::nldev::QpDumpReply(static_cast<std::uint32_t>(d),
                                                  "mlx5_" + std::to_string(d), qps,
                                                  static_cast<std::uint32_t>(d + 1), 1, 64));
  }
  return testing::nldev::Concat(replies);
}

void BM_NetworkRecord(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  analytics::AnalyticsSettings settings;
  settings.nic_lookup = mode != 2;
  analytics::NcclAnalytics a(settings);
  a.SetHostProcesses(std::make_shared<Hosts>());
  std::vector<profiler::RingOrigin> origins(kRanks);
  std::vector<profiler::LiveComm> live;
  for (int r = 0; r < kRanks; ++r) {
    origins[r].ring = "ncclscope-" + std::to_string(r) + "-1.ring";
    origins[r].pid = r;
    ncclscope_comm_init_record init{};
    init.comm_id = kComm;
    init.rank = r;
    init.nranks = 2 * kRanks;
    init.nnodes = 2;
    a.OnCommInit(origins[r], init);
    profiler::LiveComm c;
    c.slot.state = NCCLSCOPE_COMM_LIVE;
    c.slot.comm_id = kComm;
    c.slot.rank = r;
    c.slot.nranks = 2 * kRanks;
    c.slot.nnodes = 2;
    c.origin = &origins[r];
    live.push_back(c);
  }
  std::vector<ncclscope_proxy_op_record> records;
  for (int r = 0; r < kRanks; ++r) {
    for (int ch = 0; ch < kChannels; ++ch) {
      for (const bool send : {false, true}) {
        ncclscope_proxy_op_record rec{};
        rec.comm_id = kComm;
        rec.rank = r;
        rec.peer = r + kRanks;
        rec.channel = static_cast<std::uint8_t>(ch);
        rec.is_send = send ? 1 : 0;
        rec.bytes = 1 << 20;
        rec.end_ns = 1000;
        if (mode != 0) {
          rec.net_type = NCCLSCOPE_NET_IB;
          rec.qp_num[0] = QpOf(ch, send, 0);
          rec.qp_num[1] = QpOf(ch, send, 1);
        }
        records.push_back(rec);
      }
    }
  }
  // Resolve once, as the first sampled window of a job does.
  auto now = analytics::Clock::now();
  for (const auto& rec : records) a.OnProxyOp(origins[rec.rank], rec);
  a.OnCommTables(live);
  a.EndPass(now);
  const testing::nldev::Bytes replies = NodeReplies(4 * kChannels * 2);
  if (a.WantsQpRefresh()) {
    a.OnQpDump(rdma::netlink::ParseRecordedQpDump(replies.data(), replies.size()), now);
  }
  std::size_t i = 0;
  std::uint64_t n = 0;
  for (auto _ : state) {
    const ncclscope_proxy_op_record& rec = records[i];
    a.OnProxyOp(origins[rec.rank], rec);
    if (++i == records.size()) i = 0;
    if ((++n & 4095) == 0) {
      a.OnCommTables(live);
      a.EndPass(now);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  if (mode == 1 && a.nic().resolved() == 0) state.SkipWithError("nothing resolved");
}
BENCHMARK(BM_NetworkRecord)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2);

void BM_QpDump(benchmark::State& state) {
  const int per_device = static_cast<int>(state.range(0)) / kRanks;
  const testing::nldev::Bytes replies = NodeReplies(per_device);
  analytics::NcclAnalytics a;
  a.SetHostProcesses(std::make_shared<Hosts>());
  const auto now = analytics::Clock::now();
  for (auto _ : state) {
    const rdma::netlink::QpDump dump =
        rdma::netlink::ParseRecordedQpDump(replies.data(), replies.size());
    a.OnQpDump(dump, now);
    benchmark::DoNotOptimize(dump.qps.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * per_device * kRanks);
  state.counters["bytes"] = static_cast<double>(replies.size());
}
BENCHMARK(BM_QpDump)->ArgName("qps")->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ncclscope::bench

BENCHMARK_MAIN();
