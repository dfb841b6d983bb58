#pragma once

// Op records built by hand, for tests that write rings themselves (the ring format, the agent's
// passes over hostile rings, the fuzz corpus): one valid record that a test changes only in the
// fields it is about.

#include <cstdint>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::testing {

// An AllReduce record as the plugin writes it: communicator `comm_id`, rank 0, sequence number and
// op index `seq`, 256 float32 (1024 bytes), ring algorithm, LL protocol, no peer (-1). With
// `channels` > 0 it carries GPU timing on channels 0..channels-1 (channel c ends 100 * (c + 1) ns
// after the start, the op spans 1000 to 1000 + 100 * channels ns): the first 16 inline, the rest
// announced as the continuation records that must follow it (ncclscope_ring.h).
inline ncclscope_op_record AllReduceRecord(std::uint64_t comm_id, std::uint64_t seq,
                                           std::uint32_t channels = 0) {
  ncclscope_op_record op{};
  op.h.type = NCCLSCOPE_REC_OP;
  op.comm_id = comm_id;
  op.seq = seq;
  op.op_index = seq;
  op.count = 256;
  op.datatype = NCCLSCOPE_DT_FLOAT32;
  op.bytes = 1024;
  op.kind = NCCLSCOPE_KIND_COLL;
  op.func = NCCLSCOPE_FUNC_ALL_REDUCE;
  op.algo = NCCLSCOPE_ALGO_RING;
  op.proto = NCCLSCOPE_PROTO_LL;
  op.peer = -1;
  op.n_channels = static_cast<std::uint8_t>(channels);
  if (channels != 0) {
    op.flags = NCCLSCOPE_OP_GPU_TIMING;
    op.channel_mask = channels >= 64 ? ~0ull : (1ull << channels) - 1;
    op.n_timed = static_cast<std::uint8_t>(channels);
    op.n_inline = static_cast<std::uint8_t>(channels < 16 ? channels : 16);
    op.n_continuations = static_cast<std::uint8_t>(channels > 16 ? (channels - 16 + 25) / 26 : 0);
    op.gpu_start_ns = 1000;
    op.gpu_end_ns = 1000 + 100 * channels;
    for (std::uint32_t c = 0; c < op.n_inline; ++c) op.ch[c] = {c, 100 * (c + 1)};
  }
  return op;
}

}  // namespace ncclscope::testing
