#pragma once

// Helpers for the analytics' unit tests: records as the plugin writes them, and the rendered
// text of a module.

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "agent/core/text_exposition.h"
#include "agent/profiler/record_sink.h"
#include "agent/profiler/ring_directory.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::analytics::testutil {

// A completed collective with GPU timing on `channels` channels, starting at `start` and lasting
// `duration` ns on every channel.
inline profiler::OpView Coll(std::uint64_t comm, int rank, std::uint8_t func, std::uint64_t bytes,
                             std::uint64_t seq, std::uint64_t start, std::uint64_t duration,
                             int channels = 4) {
  profiler::OpView v;
  std::memset(&v.op, 0, sizeof(v.op));
  v.op.comm_id = comm;
  v.op.rank = rank;
  v.op.kind = NCCLSCOPE_KIND_COLL;
  v.op.func = func;
  v.op.algo = NCCLSCOPE_ALGO_RING;
  v.op.proto = NCCLSCOPE_PROTO_SIMPLE;
  v.op.bytes = bytes;
  v.op.count = bytes;
  v.op.datatype = NCCLSCOPE_DT_INT8;
  v.op.seq = seq;
  v.op.op_index = seq;
  v.op.enqueue_ns = start > 10'000 ? start - 10'000 : 0;
  v.op.n_channels = static_cast<std::uint8_t>(channels);
  v.op.peer = -1;
  if (duration != 0) {
    v.op.flags = NCCLSCOPE_OP_GPU_TIMING;
    v.op.gpu_start_ns = start;
    v.op.gpu_end_ns = start + duration;
    for (int c = 0; c < channels; ++c) {
      v.channels[c] = {0, static_cast<std::uint32_t>(duration)};
      v.channel_ids[c] = static_cast<std::uint8_t>(c);
      v.op.channel_mask |= 1ull << c;
    }
    v.n_channels = static_cast<std::uint32_t>(channels);
    v.op.n_timed = static_cast<std::uint8_t>(channels);
  }
  return v;
}

inline profiler::OpView P2p(std::uint64_t comm, int rank, bool send, int peer, std::uint64_t bytes,
                            std::uint64_t duration) {
  profiler::OpView v = Coll(comm, rank, send ? NCCLSCOPE_FUNC_SEND : NCCLSCOPE_FUNC_RECV, bytes, 0,
                            1'000'000, duration, 2);
  v.op.kind = NCCLSCOPE_KIND_P2P;
  v.op.algo = NCCLSCOPE_ALGO_NONE;
  v.op.proto = NCCLSCOPE_PROTO_NONE;
  v.op.peer = peer;
  v.op.flags |= NCCLSCOPE_OP_P2P_SEQ_PER_PEER;
  return v;
}

inline ncclscope_proxy_op_record Proxy(std::uint64_t comm, int rank, int channel, int peer,
                                       bool send, std::uint64_t bytes, std::uint64_t op_index,
                                       std::uint64_t start, std::uint64_t end) {
  ncclscope_proxy_op_record r{};
  r.comm_id = comm;
  r.rank = rank;
  r.channel = static_cast<std::uint8_t>(channel);
  r.peer = peer;
  r.is_send = send ? 1 : 0;
  r.bytes = bytes;
  r.op_index = op_index;
  r.seq = op_index;
  r.func = NCCLSCOPE_FUNC_ALL_REDUCE;
  r.flags = NCCLSCOPE_PROXY_PARENT_KNOWN;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

// A network record of NCCL's IB transport: its net-plugin events named QPs `qp0` and `qp1` (0:
// only one QP) on device `dev_index` of the communicator's (possibly merged) net device, as the
// plugin folds them into the record (ncclscope_ring.h: net_type, net_dev_index, qp_num).
inline ncclscope_proxy_op_record IbProxy(std::uint64_t comm, int rank, int channel, int peer,
                                         bool send, std::uint32_t qp0, std::uint32_t qp1 = 0,
                                         int dev_index = 0) {
  ncclscope_proxy_op_record r = Proxy(comm, rank, channel, peer, send, 1 << 20, 1, 1000, 2000);
  r.net_type = NCCLSCOPE_NET_IB;
  r.net_dev_index = dev_index;
  r.qp_num[0] = qp0;
  r.qp_num[1] = qp1;
  return r;
}

// The ring a record came from: its file name and the writer's pid in its own namespace.
inline profiler::RingOrigin Origin(const std::string& ring, std::int32_t pid) {
  profiler::RingOrigin o;
  o.ring = ring;
  o.pid = pid;
  o.hostname = "pod-" + ring;
  return o;
}

inline ncclscope_comm_init_record Init(std::uint64_t comm, int rank, int nranks, int nnodes,
                                       const char* name = "") {
  ncclscope_comm_init_record r{};
  r.comm_id = comm;
  r.rank = rank;
  r.nranks = nranks;
  r.nnodes = nnodes;
  r.cuda_device = rank;
  std::snprintf(r.name, sizeof(r.name), "%s", name);
  return r;
}

// The ring a test's table entry comes from, one per pid ("node0" its hostname), alive as long as
// the test binary (a real pass's origins live as long as their ring).
inline const profiler::RingOrigin* RingOfPid(std::int32_t pid) {
  static std::map<std::int32_t, profiler::RingOrigin> rings;
  auto [it, added] = rings.try_emplace(pid);
  if (added) {
    it->second.pid = pid;
    it->second.hostname = "node0";
  }
  return &it->second;
}

// A live communicator-table entry, as a ring's table lists it after a pass.
inline profiler::LiveComm Live(std::uint64_t comm, int rank, int nranks, int nnodes,
                               std::int32_t pid = 100) {
  profiler::LiveComm c;
  c.slot.state = NCCLSCOPE_COMM_LIVE;
  c.slot.comm_id = comm;
  c.slot.rank = rank;
  c.slot.nranks = nranks;
  c.slot.nnodes = nnodes;
  c.slot.context = 0xC0 + static_cast<std::uint64_t>(rank);
  c.origin = RingOfPid(pid + rank);
  return c;
}

template <typename Module>
std::string Text(const Module& module) {
  std::string text;
  metrics::TextWriter out(text);
  module.Render(out);
  return text;
}

}  // namespace ncclscope::analytics::testutil
