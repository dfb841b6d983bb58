// Writes the fuzz corpus (tests/fuzz/corpus): small real rings from the plugin's writer, with
// every record type, an op with a continuation record, a full lane and a comm
// table in use. Usage: make-fuzz-seeds <corpus dir>.

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "plugin/ring/ring_writer.h"
#include "tests/support/op_record.h"

namespace {

using ncclscope::testing::AllReduceRecord;

bool Save(const ncclscope::ring::RingWriter& writer, const std::string& out) {
  std::ifstream in(writer.path(), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::ofstream file(out, std::ios::binary);
  file << bytes.str();
  return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const std::string corpus = argv[1];
  char scratch[] = "/tmp/ncclscope-seeds-XXXXXX";
  if (::mkdtemp(scratch) == nullptr) return 1;
  ncclscope::ring::RingGeometry g{.lanes = 2, .lane_capacity = 16, .comm_slots = 2};
  ncclscope::ring::RingError error;

  {  // empty
    ncclscope::ring::RingWriter w;
    if (!w.Create(scratch, g, {"pod", "1", "job"}, &error)) return 1;
    Save(w, corpus + "/empty.ring");
  }
  {  // every record type, an op with 40 timed channels (two continuations), a live comm
    ncclscope::ring::RingWriter w;
    if (!w.Create(scratch, g, {"pod", "1", "job"}, &error)) return 1;
    ncclscope_comm_init_record init{};
    init.h.type = NCCLSCOPE_REC_COMM_INIT;
    init.comm_id = 0xAB;
    init.nranks = 2;
    init.nnodes = 1;
    std::snprintf(init.name, sizeof(init.name), "tp");
    w.Write(&init, 1, 0);
    unsigned char group[3 * NCCLSCOPE_RECORD_SIZE] = {};
    ncclscope_op_record op = AllReduceRecord(0xAB, 1, 40);
    std::memcpy(group, &op, sizeof(op));
    for (std::uint8_t part = 1; part <= 2; ++part) {
      ncclscope_op_channels_record cont{};
      cont.h.type = NCCLSCOPE_REC_OP_CHANNELS;
      cont.comm_id = op.comm_id;
      cont.seq = op.seq;
      cont.op_index = op.op_index;
      cont.part = part;
      cont.first = static_cast<std::uint8_t>(part == 1 ? 16 : 42);
      cont.n = static_cast<std::uint8_t>(part == 1 ? 24 : 0);
      cont.func = op.func;
      for (std::uint32_t c = 0; c < cont.n; ++c) cont.ch[c] = {c, c + 10};
      std::memcpy(group + part * NCCLSCOPE_RECORD_SIZE, &cont, sizeof(cont));
    }
    w.Write(group, 2, 0);
    ncclscope_proxy_op_record proxy{};
    proxy.h.type = NCCLSCOPE_REC_PROXY_OP;
    proxy.comm_id = 0xAB;
    proxy.peer = 1;
    proxy.bytes = 4096;
    proxy.start_ns = 10;
    proxy.end_ns = 20;
    w.Write(&proxy, 1, 1);
    ncclscope_comm_finalize_record fin{};
    fin.h.type = NCCLSCOPE_REC_COMM_FINALIZE;
    fin.comm_id = 0xAB;
    w.Write(&fin, 1, 1);
    ncclscope_comm_slot* slot = w.comm_slot(0);
    slot->comm_id = 0xAB;
    slot->nranks = 2;
    slot->nnodes = 1;
    slot->ops_enqueued = 3;
    slot->ops_completed = 1;
    slot->state = NCCLSCOPE_COMM_LIVE;
    Save(w, corpus + "/records.ring");
  }
  {  // a full lane, then a wrapped one
    ncclscope::ring::RingWriter w;
    if (!w.Create(scratch, g, {"pod", "1", "job"}, &error)) return 1;
    for (std::uint64_t i = 0; i < 16; ++i) {
      ncclscope_op_record op = AllReduceRecord(0xAB, i, 2);
      w.Write(&op, 1, 0);
    }
    Save(w, corpus + "/full-lane.ring");
  }
  std::string remove = std::string("rm -rf ") + scratch;
  return std::system(remove.c_str()) == 0 ? 0 : 1;
}
