#pragma once

// libtrace-profiler.so: a profiler plugin that records every call it gets, for the replay driver's
// conformance test (tests/unit/replay). It exports ncclProfiler_v1 .. ncclProfiler_v7, each entry
// recording which table was called, the call, the event type, the parent handle, the state and
// the descriptor's key fields in that version's own layout; every startEvent returns a distinct
// handle. It checks nothing itself: the test compares the records with what each NCCL version
// does. Not a model of ncclscope's plugin, and independent of it. Thread-safe through one mutex.
//
// The test reaches the records through the extern "C" functions below (dlsym on the same
// library the replay loaded).

#include <cstddef>
#include <cstdint>

namespace ncclscope::testing::trace {

enum Call : int { kInit = 1, kStart = 2, kStop = 3, kRecord = 4, kFinalize = 5 };

// Handle, context and parent references are ids: 1, 2, ... in the order the plugin issued them
// (handles and contexts share one sequence); 0 = NULL; kForeign = a pointer the plugin never
// issued.
inline constexpr std::uint64_t kForeign = ~0ull;

struct Record {
  int version = 0;  // which ncclProfiler_vN table was called
  int call = 0;     // Call
  // start: the descriptor's type; stop/record: the type the handle was started with (0: NULL
  // or unknown handle).
  std::uint64_t type = 0;
  std::uint64_t id =
      0;  // start: the new handle; stop/record: the handle; init/finalize: the context
  std::uint64_t parent = 0;   // start: parentObj
  std::uint64_t context = 0;  // start: the context passed
  int thread = 0;             // 1 for the first thread that called the plugin, 2 for the next, ...
  int rank = 0;               // start: descriptor rank
  // record
  int state = -1;
  bool args_null = false;
  std::size_t trans_size = 0;  // v1-v3 ProxyOp states: proxyOp.transSize; v4+: proxyStep.transSize
  int steps = 0;               // v1-v3 ProxyOp states: proxyOp.steps
  std::uint64_t timer = 0;     // record: kernelCh.pTimer (v4+); start KernelCh/KernelPhase: pTimer
  // Coll / P2p / API / CE (strings: "(null)" for NULL; v1's numbers in the *_num members, else -1)
  char func[24] = {};
  char datatype[24] = {};
  char algo[24] = {};
  char proto[24] = {};
  char variant[40] = {};
  int func_num = -1;
  int datatype_num = -1;
  int algo_num = -1;
  int proto_num = -1;
  int op_num = -1;  // v1 coll.op
  int is_collnet = -1;
  int is_nvls = -1;
  bool name_null = true;           // v1-v3 coll/p2p.name
  std::uint64_t comm_hash = 0;     // v1-v3
  std::uint64_t seq = 0;           // coll.seqNumber
  std::size_t count = 0;           // coll/p2p/API count
  std::size_t traffic_bytes = 0;   // v1/v2
  int channels = -1;               // coll/p2p nChannels (v4+), coll nMaxChannels (v1-v3)
  int warps = -1;                  // coll nWarps
  int peer = -1;                   // p2p peer, proxyOp peer
  std::uint64_t parent_group = 0;  // v5+ coll/p2p.parentGroup
  bool is_sym = false;             // v7
  std::uint64_t user_tag = 0;      // v7
  bool graph_captured = false;     // v5+ API events
  // ProxyOp / ProxyStep / KernelCh / KernelPhase / NetPlugin
  int channel = -1;
  int step = -1;
  int n_steps = -1;
  int chunk_size = -1;
  int is_send = -1;
  int phase_id = -1;
  char phase_name[16] = {};
  std::int64_t net_id = 0;
  // init
  int mask_at_init = 0;  // *eActivationMask after the plugin wrote it
};

}  // namespace ncclscope::testing::trace

extern "C" {
// How many records exist; copy record i (returns 0 when i is out of range, else 1).
std::size_t ncclscope_trace_count();
int ncclscope_trace_get(std::size_t i, ncclscope::testing::trace::Record* out);
// Forget the records and restart the id and thread numbering (handles stay valid).
void ncclscope_trace_reset();
// What init writes into NCCL's mask int (-1, the default: leave it alone).
void ncclscope_trace_set_init_mask(int mask);
// Whether init answers success with a NULL context (default: a context).
void ncclscope_trace_set_null_context(int null_context);
}
