// libtrace-profiler.so: see trace_profiler.h. One table per ABI version, each reading the
// descriptor in its own version's layout (plugin/abi), so a translation mistake in the driver
// shows up as a wrong field here.

#include "tests/support/trace_profiler.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::testing::trace {
namespace {

// What a handle or a context points to; never freed (a late call can still be resolved).
struct Object {
  std::uint64_t id = 0;
  std::uint64_t type = 0;  // 0: a context
};

struct State {
  std::mutex mutex;
  std::vector<Record> records;
  std::deque<Object> objects;  // stable addresses
  std::unordered_map<const void*, const Object*> issued;
  std::uint64_t next_id = 1;
  int generation = 0;  // bumped by reset: thread numbers restart
  int next_thread = 1;
  int init_mask = -1;
  bool null_context = false;
};

State& S() {
  static State* const state = new State();  // never destroyed: calls may come at exit
  return *state;
}

// Caller holds the mutex.
int ThreadNumber(State& s) {
  thread_local int generation = -1;
  thread_local int number = 0;
  if (generation != s.generation) {
    generation = s.generation;
    number = s.next_thread++;
  }
  return number;
}

// Caller holds the mutex.
std::uint64_t IdOf(State& s, const void* p) {
  if (p == nullptr) return 0;
  const auto it = s.issued.find(p);
  return it == s.issued.end() ? kForeign : it->second->id;
}

// Caller holds the mutex.
const Object* Issue(State& s, std::uint64_t type) {
  s.objects.push_back(Object{s.next_id++, type});
  const Object* object = &s.objects.back();
  s.issued[object] = object;
  return object;
}

template <std::size_t N>
void CopyString(char (&out)[N], const char* in) {
  std::snprintf(out, N, "%s", in == nullptr ? "(null)" : in);
}

Record Base(State& s, int version, int call) {
  Record r;
  r.version = version;
  r.call = call;
  r.thread = ThreadNumber(s);
  return r;
}

template <int V>
int Init(void** context, int* mask) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record r = Base(s, V, kInit);
  if (s.init_mask >= 0) *mask = s.init_mask;
  r.mask_at_init = *mask;
  if (s.null_context) {
    *context = nullptr;
  } else {
    const Object* object = Issue(s, 0);
    *context = const_cast<Object*>(object);
    r.id = object->id;
  }
  s.records.push_back(r);
  return 0;
}

// v1's ProxyOp/ProxyStep members and the shared header.
template <typename Descr>
void ReadProxy(Record& r, const Descr& d) {
  if (d.type == abi::kProxyOp) {
    r.channel = d.proxyOp.channelId;
    r.peer = d.proxyOp.peer;
    r.n_steps = d.proxyOp.nSteps;
    r.chunk_size = d.proxyOp.chunkSize;
    r.is_send = d.proxyOp.isSend;
  } else if (d.type == abi::kProxyStep) {
    r.step = d.proxyStep.step;
  }
}

void ReadV1(Record& r, const abi::EventDescrV1& d) {
  ReadProxy(r, d);
  if (d.type == abi::kColl) {
    r.name_null = d.coll.name == nullptr;
    r.comm_hash = d.coll.commHash;
    r.seq = d.coll.seqNumber;
    r.func_num = d.coll.func;
    r.count = d.coll.count;
    r.datatype_num = d.coll.datatype;
    r.op_num = static_cast<int>(d.coll.op);
    r.traffic_bytes = d.coll.trafficBytes;
    r.channels = d.coll.nMaxChannels;
    r.warps = d.coll.nWarps;
    r.algo_num = d.coll.algo;
    r.proto_num = d.coll.proto;
    r.is_collnet = d.coll.isCollnet;
    r.is_nvls = d.coll.isNvls;
  } else if (d.type == abi::kP2p) {
    r.name_null = d.p2p.name == nullptr;
    r.comm_hash = d.p2p.commHash;
    r.func_num = d.p2p.func;
    r.datatype_num = d.p2p.datatype;
    r.count = d.p2p.count;
    r.peer = d.p2p.peer;
  }
}

// v2 and v3 Coll/P2p (strings); v2 adds trafficBytes.
template <typename Descr>
void ReadStringTask(Record& r, const Descr& d) {
  ReadProxy(r, d);
  if (d.type == abi::kColl) {
    r.name_null = d.coll.name == nullptr;
    r.comm_hash = d.coll.commHash;
    r.seq = d.coll.seqNumber;
    CopyString(r.func, d.coll.func);
    r.count = d.coll.count;
    CopyString(r.datatype, d.coll.datatype);
    r.channels = d.coll.nMaxChannels;
    r.warps = d.coll.nWarps;
    CopyString(r.algo, d.coll.algo);
    CopyString(r.proto, d.coll.proto);
  } else if (d.type == abi::kP2p) {
    r.name_null = d.p2p.name == nullptr;
    r.comm_hash = d.p2p.commHash;
    CopyString(r.func, d.p2p.func);
    CopyString(r.datatype, d.p2p.datatype);
    r.count = d.p2p.count;
    r.peer = d.p2p.peer;
  }
}

// v4-v7: the members they share (v4's Coll/P2p lack parentGroup, v5+ add the API events).
template <int V, typename Descr>
void ReadModern(State& s, Record& r, const Descr& d) {
  ReadProxy(r, d);
  switch (d.type) {
    case abi::kColl:
      r.seq = d.coll.seqNumber;
      CopyString(r.func, d.coll.func);
      r.count = d.coll.count;
      CopyString(r.datatype, d.coll.datatype);
      r.channels = d.coll.nChannels;
      r.warps = d.coll.nWarps;
      CopyString(r.algo, d.coll.algo);
      CopyString(r.proto, d.coll.proto);
      if constexpr (V >= 5) r.parent_group = IdOf(s, d.coll.parentGroup);
      if constexpr (V >= 7) {
        r.is_sym = d.coll.isSymColl;
        CopyString(r.variant, d.coll.kernelVariant);
        r.user_tag = d.coll.userTag;
      }
      break;
    case abi::kP2p:
      CopyString(r.func, d.p2p.func);
      CopyString(r.datatype, d.p2p.datatype);
      r.count = d.p2p.count;
      r.peer = d.p2p.peer;
      r.channels = d.p2p.nChannels;
      if constexpr (V >= 5) r.parent_group = IdOf(s, d.p2p.parentGroup);
      if constexpr (V >= 7) r.user_tag = d.p2p.userTag;
      break;
    case abi::kKernelCh:
      r.channel = d.kernelCh.channelId;
      r.timer = d.kernelCh.pTimer;
      break;
    case abi::kNetPlugin:
      r.net_id = d.netPlugin.id;
      break;
    default:
      break;
  }
  if constexpr (V >= 5) {
    switch (d.type) {
      case abi::kGroupApi:
        r.graph_captured = d.groupApi.graphCaptured;
        break;
      case abi::kCollApi:
        CopyString(r.func, d.collApi.func);
        r.count = d.collApi.count;
        CopyString(r.datatype, d.collApi.datatype);
        r.graph_captured = d.collApi.graphCaptured;
        if constexpr (V >= 7) r.user_tag = d.collApi.userTag;
        break;
      case abi::kP2pApi:
        CopyString(r.func, d.p2pApi.func);
        r.count = d.p2pApi.count;
        CopyString(r.datatype, d.p2pApi.datatype);
        r.graph_captured = d.p2pApi.graphCaptured;
        if constexpr (V >= 7) r.user_tag = d.p2pApi.userTag;
        break;
      default:
        break;
    }
  }
  if constexpr (V >= 6) {
    if (d.type == abi::kCeColl) {
      r.seq = d.ceColl.seqNumber;
      CopyString(r.func, d.ceColl.func);
      r.count = d.ceColl.count;
      if constexpr (V >= 7) r.user_tag = d.ceColl.userTag;
    }
  }
  if constexpr (V >= 7) {
    if (d.type == abi::kKernelPhase) {
      r.channel = d.kernelPhase.channelId;
      r.phase_id = d.kernelPhase.phaseId;
      CopyString(r.phase_name, d.kernelPhase.phaseName);
      r.timer = d.kernelPhase.pTimer;
    }
  }
}

template <int V, typename Descr>
int StartEvent(void* context, void** handle, Descr* d) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record r = Base(s, V, kStart);
  r.type = d->type;
  r.parent = IdOf(s, d->parentObj);
  r.context = IdOf(s, context);
  r.rank = d->rank;
  if constexpr (V == 1) {
    ReadV1(r, *d);
  } else if constexpr (V <= 3) {
    ReadStringTask(r, *d);
    if constexpr (V == 2) {
      if (d->type == abi::kColl) r.traffic_bytes = d->coll.trafficBytes;
    } else {
      if (d->type == abi::kKernelCh) r.channel = d->kernelCh.channelId;
      if (d->type == abi::kNetPlugin) r.net_id = d->netPlugin.id;
    }
  } else {
    ReadModern<V>(s, r, *d);
  }
  const Object* object = Issue(s, d->type);
  *handle = const_cast<Object*>(object);
  r.id = object->id;
  s.records.push_back(r);
  return 0;
}

template <int V>
int StopEvent(void* handle) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record r = Base(s, V, kStop);
  r.id = IdOf(s, handle);
  if (r.id != 0 && r.id != kForeign) r.type = static_cast<const Object*>(handle)->type;
  s.records.push_back(r);
  return 0;
}

template <int V, typename Args>
int RecordEventState(void* handle, int state, Args* args) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record r = Base(s, V, kRecord);
  r.id = IdOf(s, handle);
  if (r.id != 0 && r.id != kForeign) r.type = static_cast<const Object*>(handle)->type;
  r.state = state;
  r.args_null = args == nullptr;
  if (args != nullptr) {
    if constexpr (V <= 3) {
      r.trans_size = args->proxyOp.transSize;
      r.steps = args->proxyOp.steps;
    } else {
      r.trans_size = args->proxyStep.transSize;
      r.timer = args->kernelCh.pTimer;
    }
  }
  s.records.push_back(r);
  return 0;
}

template <int V>
int Finalize(void* context) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record r = Base(s, V, kFinalize);
  r.id = IdOf(s, context);
  s.records.push_back(r);
  return 0;
}

template <int V>
int InitModern(void** context, std::uint64_t /*comm_id*/, int* mask, const char* /*name*/,
               int /*nnodes*/, int /*nranks*/, int /*rank*/, abi::DebugLogger /*log*/) {
  return Init<V>(context, mask);
}

int InitV4(void** context, int* mask, const char* /*name*/, std::uint64_t /*hash*/, int /*nnodes*/,
           int /*nranks*/, int /*rank*/, abi::DebugLogger /*log*/) {
  return Init<4>(context, mask);
}

}  // namespace
}  // namespace ncclscope::testing::trace

namespace trace = ncclscope::testing::trace;
namespace abi = ncclscope::abi;

// The tables NCCL looks up (non-const: a const object would have internal linkage).
extern "C" {

abi::ProfilerV1 ncclProfiler_v1 = {"trace-v1",
                                   trace::Init<1>,
                                   trace::StartEvent<1, abi::EventDescrV1>,
                                   trace::StopEvent<1>,
                                   trace::RecordEventState<1, abi::StateArgsV1>,
                                   trace::Finalize<1>};
abi::ProfilerV2 ncclProfiler_v2 = {"trace-v2",
                                   trace::Init<2>,
                                   trace::StartEvent<2, abi::EventDescrV2>,
                                   trace::StopEvent<2>,
                                   trace::RecordEventState<2, abi::StateArgsV2>,
                                   trace::Finalize<2>};
abi::ProfilerV3 ncclProfiler_v3 = {"trace-v3",
                                   trace::Init<3>,
                                   trace::StartEvent<3, abi::EventDescrV3>,
                                   trace::StopEvent<3>,
                                   trace::RecordEventState<3, abi::StateArgsV3>,
                                   trace::Finalize<3>};
abi::ProfilerV4 ncclProfiler_v4 = {"trace-v4",
                                   trace::InitV4,
                                   trace::StartEvent<4, abi::EventDescrV4>,
                                   trace::StopEvent<4>,
                                   trace::RecordEventState<4, abi::StateArgsV4>,
                                   trace::Finalize<4>};
abi::ProfilerV5 ncclProfiler_v5 = {"trace-v5",
                                   trace::InitModern<5>,
                                   trace::StartEvent<5, abi::EventDescrV5>,
                                   trace::StopEvent<5>,
                                   trace::RecordEventState<5, abi::StateArgsV5>,
                                   trace::Finalize<5>};
abi::ProfilerV6 ncclProfiler_v6 = {"trace-v6",
                                   trace::InitModern<6>,
                                   trace::StartEvent<6, abi::EventDescrV6>,
                                   trace::StopEvent<6>,
                                   trace::RecordEventState<6, abi::StateArgsV6>,
                                   trace::Finalize<6>};
abi::ProfilerV7 ncclProfiler_v7 = {"trace-v7",
                                   trace::InitModern<7>,
                                   trace::StartEvent<7, abi::EventDescrV7>,
                                   trace::StopEvent<7>,
                                   trace::RecordEventState<7, abi::StateArgsV7>,
                                   trace::Finalize<7>};

std::size_t ncclscope_trace_count() {
  trace::State& s = trace::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.records.size();
}

int ncclscope_trace_get(std::size_t i, trace::Record* out) {
  trace::State& s = trace::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (i >= s.records.size()) return 0;
  *out = s.records[i];
  return 1;
}

void ncclscope_trace_reset() {
  trace::State& s = trace::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.records.clear();
  s.issued.clear();  // earlier handles now read as foreign
  s.next_id = 1;
  ++s.generation;
  s.next_thread = 1;
}

void ncclscope_trace_set_init_mask(int mask) {
  trace::State& s = trace::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.init_mask = mask;
}

void ncclscope_trace_set_null_context(int null_context) {
  trace::State& s = trace::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.null_context = null_context != 0;
}

}  // extern "C"
