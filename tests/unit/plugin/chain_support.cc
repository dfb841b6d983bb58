#include "tests/unit/plugin/chain_support.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

namespace ncclscope::testing {
namespace {

using replay::CollectiveEnqueue;
using replay::CollSpec;
using replay::EnqueuedOp;
using replay::GpuTimes;
using replay::ProxyOpSpec;
using replay::ProxyPlan;
using replay::ReplayComm;
using replay::ReplayProcess;

constexpr std::uint64_t kNetChildren =
    abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;
constexpr std::uint64_t kCe = abi::kCeColl | abi::kCeSync | abi::kCeBatch;

// The IB payload of a net-plugin event, laid out as NCCL's ncclProfilerNetIbDescr_v1_t
// (src/include/plugin/profiler/net_ib_v1.h:21-31 in 2.28: type, then the QP union at offset 8);
// only its address travels through the plugins.
// type, {device, wr_id, opcode, qpNum, length}
abi::NetIbDescrV1 g_qp = {abi::kNetIbQpEvent, {0, 7, 0, 0x1234, 65536}};

abi::EventDescrV6 Descr(std::uint64_t type, void* parent, int rank) {
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  d.rank = rank;
  return d;
}

void* Start(ReplayComm& comm, const abi::EventDescrV6& d) {
  void* handle = nullptr;
  comm.process().plugin().Start(comm.process().version(), comm.context(), &handle, d);
  return handle;
}
void Stop(ReplayComm& comm, void* handle) {
  if (handle != nullptr) comm.process().plugin().Stop(comm.process().version(), handle);
}
void Record(ReplayComm& comm, void* handle, int state, abi::StateArgsV6* args) {
  if (handle != nullptr)
    comm.process().plugin().Record(comm.process().version(), handle, state, args);
}

GpuTimes Times(int round, int op) {
  GpuTimes t;
  t.base = 1'700'000'000'000'000'000ull + static_cast<std::uint64_t>(round) * 1'000'000'000ull +
           static_cast<std::uint64_t>(op) * 1'000'000ull;
  t.duration_ns = 20'000 + static_cast<std::uint64_t>(op) * 1000;
  t.skew_ns = 150;
  return t;
}

}  // namespace

bool NcclEmits(int snapshot, std::uint64_t type) {
  std::uint64_t gate = 0;
  switch (type) {
    case abi::kGroupApi:  // :219 (HEAD: + CE, :281-283)
      gate = abi::kGroupApi | abi::kP2pApi | abi::kCollApi | abi::kKernelLaunch | abi::kGroup |
             abi::kColl | abi::kP2p | kNetChildren | kCe;
      break;
    case abi::kCollApi:  // :292 (HEAD: + CE, :366-367)
      gate = abi::kCollApi | abi::kColl | kNetChildren | kCe;
      break;
    case abi::kGroup:  // :374
      gate = abi::kGroup | abi::kColl | abi::kP2p | kNetChildren;
      break;
    case abi::kColl:  // :398
      gate = abi::kColl | kNetChildren;
      break;
    case abi::kProxyStep:  // :516
      gate = abi::kProxyStep | abi::kNetPlugin;
      break;
    case abi::kCeColl:  // HEAD :826-827
      gate = kCe;
      break;
    default:  // KernelLaunch :333, ProxyCtrl :568, KernelCh :593, NetPlugin :692, CeSync/CeBatch
      gate = type;
      break;
  }
  return (static_cast<std::uint64_t>(snapshot) & gate) != 0;
}

RoundOps DriveEveryEventType(ReplayComm& comm, int round) {
  const int version = comm.process().version();
  const int rank = comm.rank();
  const int next = (rank + 1) % comm.nranks();
  const int prev = (rank + comm.nranks() - 1) % comm.nranks();
  const auto seq = [&](int k) { return static_cast<std::uint64_t>(round) * 16 + k; };
  RoundOps ops;
  ProxyPlan net;
  net.steps = 2;
  net.step_bytes = 32768;

  // Collectives with network proxy ops and kernel channels; AllGather in bytes and int8 as NCCL
  // passes it (src/enqueue.cc:2477).
  CollSpec allreduce;
  allreduce.channels = 4;
  comm.Collective(allreduce, seq(0), Times(round, 0), net);
  CollSpec allgather;
  allgather.func = "AllGather";
  allgather.datatype = "ncclInt8";
  allgather.count = 8192;
  allgather.channels = 2;
  comm.Collective(allgather, seq(1), Times(round, 1), net);
  ops.colls += 2;

  // A p2p group (send to the next rank, receive from the previous) and an all-to-all with self.
  comm.P2pGroup({{"Send", 1024, "ncclFloat32", next, 2}, {"Recv", 1024, "ncclFloat32", prev, 2}},
                Times(round, 2), net);
  comm.AllToAll(256, "ncclBfloat16", Times(round, 3), net);
  ops.p2p += 2 + 2 * static_cast<std::uint64_t>(comm.nranks());

  // One collective taken apart: its kernel launch (parent: the GroupApi, still open during the
  // launch, src/enqueue.cc:1575/:1662), one network op with one step and an IB QP event under
  // it (src/plugin/profiler.cc:687-712: start, update, stop through the net plugin's callback),
  // then the kernel channels after the Coll's stop, as the proxy thread reports them.
  CollSpec taken;
  taken.channels = 2;
  const CollectiveEnqueue e = comm.BeginCollective(taken, seq(2));
  ++ops.colls;
  if (version >= 5 && NcclEmits(e.op.mask, abi::kKernelLaunch)) {
    abi::EventDescrV6 d = Descr(abi::kKernelLaunch, e.group_api, 0);
    Stop(comm, Start(comm, d));
  }
  ProxyOpSpec op_spec;
  op_spec.channel = 1;
  op_spec.peer = next;
  op_spec.steps = 1;
  void* proxy_op = comm.ProxyOpStart(e.op, op_spec);
  void* step = comm.ProxyStepStart(e.op, proxy_op, op_spec, 0);
  if (NcclEmits(e.op.mask, abi::kNetPlugin)) {
    abi::EventDescrV6 d = Descr(abi::kNetPlugin, step, rank);
    d.netPlugin.id = (1 << 16) | 1;  // NCCL_PROFILER_NET_TYPE_IB | version 1
    d.netPlugin.data = &g_qp;
    void* qp = Start(comm, d);
    abi::StateArgsV6 update{};
    update.netPlugin.data = &g_qp;
    Record(comm, qp, abi::kNetPluginUpdate, &update);
    Stop(comm, qp);
  }
  comm.ProxyStepState(step, abi::kProxyStepSendGpuWait, 65536);
  comm.ProxyStepState(step, abi::kProxyStepSendWait, 65536);
  comm.ProxyStepStop(step);
  comm.ProxyOpStop(proxy_op);
  comm.EndCollective(e);
  comm.KernelChannels(e.op, taken.channels, Times(round, 4));

  // The proxy thread's control events (src/proxy.cc:807-808, :854-855), gated on the global mask
  // at start and at every record (src/plugin/profiler.cc:567, :646).
  if (NcclEmits(ReplayProcess::MaskSnapshot(), abi::kProxyCtrl)) {
    void* ctrl = Start(comm, Descr(abi::kProxyCtrl, nullptr, 0));
    abi::StateArgsV6 args{};
    args.proxyCtrl.appendedProxyOps = 0;
    Record(comm, ctrl, abi::kProxyCtrlIdle + 4, &args);  // ncclProfilerProxyCtrlAppend
    args.proxyCtrl.appendedProxyOps = 3;
    Record(comm, ctrl, abi::kProxyCtrlAppendEnd, &args);
    Stop(comm, ctrl);
  }

  // A CUDA graph: API events at capture (graphCaptured), then at each replay the plan's Group and
  // Coll on the host-callback thread with the captured CollApi as parent (src/enqueue.cc:1323,
  // src/plugin/profiler.cc:402-403), and the kernel channels. Under v4 there are no API events.
  const int snapshot = ReplayProcess::MaskSnapshot();
  void* graph_group_api = nullptr;
  void* graph_coll_api = nullptr;
  if (version >= 5 && NcclEmits(snapshot, abi::kGroupApi)) {
    abi::EventDescrV6 d = Descr(abi::kGroupApi, nullptr, 0);
    d.groupApi.graphCaptured = true;
    d.groupApi.groupDepth = 1;
    graph_group_api = Start(comm, d);
  }
  if (version >= 5 && NcclEmits(snapshot, abi::kCollApi)) {
    abi::EventDescrV6 d = Descr(abi::kCollApi, graph_group_api, 0);
    d.collApi.func = "ReduceScatter";
    d.collApi.count = 512;
    d.collApi.datatype = "ncclFloat16";
    d.collApi.graphCaptured = true;
    graph_coll_api = Start(comm, d);
    Stop(comm, graph_coll_api);
  }
  Stop(comm, graph_group_api);
  for (int replay = 0; replay < 3; ++replay) {
    void* group =
        NcclEmits(snapshot, abi::kGroup) ? Start(comm, Descr(abi::kGroup, nullptr, 0)) : nullptr;
    EnqueuedOp coll;
    coll.mask = snapshot;
    coll.channels = 2;
    if (NcclEmits(snapshot, abi::kColl)) {
      abi::EventDescrV6 d = Descr(abi::kColl, version >= 5 ? graph_coll_api : group, rank);
      d.coll.seqNumber = seq(3 + replay);
      d.coll.func = "ReduceScatter";
      d.coll.count = 512;
      d.coll.datatype = "ncclFloat16";
      d.coll.nChannels = 2;
      d.coll.nWarps = 8;
      d.coll.algo = "RING";
      d.coll.proto = "LL";
      d.coll.parentGroup = group;
      coll.handle = Start(comm, d);
      ++ops.colls;
    }
    Stop(comm, coll.handle);
    Stop(comm, group);
    comm.KernelChannels(coll, 2, Times(round, 5 + replay));
  }

  // A copy-engine collective (v6, HEAD src/ce_coll.cc:1367-1406): host-side CeColl under its
  // CollApi, with a sync and a batch event inside.
  const int ce_snapshot = ReplayProcess::MaskSnapshot();
  if (version >= 6 && NcclEmits(ce_snapshot, abi::kCeColl)) {
    void* group_api = Start(comm, Descr(abi::kGroupApi, nullptr, 0));
    abi::EventDescrV6 api = Descr(abi::kCollApi, group_api, 0);
    api.collApi.func = "AllGather";
    api.collApi.count = 4096;
    api.collApi.datatype = "ncclFloat32";
    void* coll_api = Start(comm, api);
    Stop(comm, coll_api);
    abi::EventDescrV6 d = Descr(abi::kCeColl, coll_api, rank);
    d.ceColl.seqNumber = seq(0);  // the CE counter: collides with the Coll seq space
    d.ceColl.func = "AllGather";
    d.ceColl.count = 4096;
    d.ceColl.datatype = "ncclFloat32";
    d.ceColl.syncStrategy = "UC";
    d.ceColl.ceSeqNum = static_cast<std::uint32_t>(seq(0));
    void* ce = Start(comm, d);
    ++ops.ce;
    if (ce != nullptr && NcclEmits(ReplayProcess::MaskSnapshot(), abi::kCeSync)) {
      abi::EventDescrV6 sync = Descr(abi::kCeSync, ce, rank);
      sync.ceCollSync.nRanks = comm.nranks();
      Stop(comm, Start(comm, sync));
    }
    if (ce != nullptr && NcclEmits(ReplayProcess::MaskSnapshot(), abi::kCeBatch)) {
      abi::EventDescrV6 batch = Descr(abi::kCeBatch, ce, rank);
      batch.ceCollBatch.numOps = comm.nranks();
      batch.ceCollBatch.totalBytes = 4096 * 4;
      Stop(comm, Start(comm, batch));
    }
    Stop(comm, ce);
    Stop(comm, group_api);
  }
  if (comm.proxy() != nullptr) comm.proxy()->Drain();
  return ops;
}

// ---- ChainedPlugin ----

ChainedPlugin::ChainedPlugin(const std::string& path) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) return;
  configure_ = reinterpret_cast<decltype(configure_)>(dlsym(lib_, "chained_profiler_configure"));
  set_mask_ = reinterpret_cast<decltype(set_mask_)>(dlsym(lib_, "chained_profiler_set_mask"));
  reset_ = reinterpret_cast<decltype(reset_)>(dlsym(lib_, "chained_profiler_reset"));
  counts_ = reinterpret_cast<decltype(counts_)>(dlsym(lib_, "chained_profiler_counts"));
  events_ = reinterpret_cast<decltype(events_)>(dlsym(lib_, "chained_profiler_events"));
  violations_ = reinterpret_cast<decltype(violations_)>(dlsym(lib_, "chained_profiler_violations"));
}

ChainedPlugin::~ChainedPlugin() {
  if (lib_ != nullptr) dlclose(lib_);
}

chained::Counts ChainedPlugin::Counts() const {
  chained::Counts counts;
  counts_(&counts);
  return counts;
}

std::vector<chained::Event> ChainedPlugin::Events() const {
  std::vector<chained::Event> events(events_(nullptr, 0));
  events.resize(events_(events.data(), events.size()));
  return events;
}

std::string ChainedPlugin::Violations() const {
  std::string text(violations_(nullptr, 0) + 1, '\0');
  violations_(text.data(), text.size());
  text.resize(text.size() - 1);
  return text;
}

// ---- CanonicalLog ----

namespace {

std::string Str(const char* s) { return s == nullptr ? "(null)" : s; }

std::string Describe(const chained::Event& e) {
  const abi::EventDescrV6& d = e.descr;
  std::ostringstream k;
  k << abi::EventTypeName(e.type) << " v" << e.version << " rank " << d.rank;
  switch (e.type) {
    case abi::kGroupApi:
      k << " depth " << d.groupApi.groupDepth << " graph " << d.groupApi.graphCaptured;
      break;
    case abi::kCollApi:
      k << " " << Str(d.collApi.func) << " " << d.collApi.count << " " << Str(d.collApi.datatype)
        << " root " << d.collApi.root << " graph " << d.collApi.graphCaptured;
      break;
    case abi::kP2pApi:
      k << " " << Str(d.p2pApi.func) << " " << d.p2pApi.count << " " << Str(d.p2pApi.datatype)
        << " graph " << d.p2pApi.graphCaptured;
      break;
    case abi::kColl:
      k << " seq " << d.coll.seqNumber << " " << Str(d.coll.func) << " " << d.coll.count << " "
        << Str(d.coll.datatype) << " root " << d.coll.root << " ch " << int{d.coll.nChannels}
        << " warps " << int{d.coll.nWarps} << " " << Str(d.coll.algo) << " " << Str(d.coll.proto);
      break;
    case abi::kP2p:
      k << " " << Str(d.p2p.func) << " " << d.p2p.count << " " << Str(d.p2p.datatype) << " peer "
        << d.p2p.peer << " ch " << int{d.p2p.nChannels};
      break;
    case abi::kProxyOp:
      k << " pid " << d.proxyOp.pid << " ch " << int{d.proxyOp.channelId} << " peer "
        << d.proxyOp.peer << " steps " << d.proxyOp.nSteps << " chunk " << d.proxyOp.chunkSize
        << " send " << d.proxyOp.isSend;
      break;
    case abi::kProxyStep:
      k << " step " << d.proxyStep.step;
      break;
    case abi::kKernelCh:
      k << " ch " << int{d.kernelCh.channelId} << " t " << d.kernelCh.pTimer;
      break;
    case abi::kNetPlugin:
      k << " id " << d.netPlugin.id << " data " << (d.netPlugin.data != nullptr);
      break;
    case abi::kCeColl:
      k << " seq " << d.ceColl.seqNumber << " " << Str(d.ceColl.func) << " " << d.ceColl.count
        << " " << Str(d.ceColl.datatype) << " " << Str(d.ceColl.syncStrategy) << " ce "
        << d.ceColl.ceSeqNum;
      break;
    case abi::kCeSync:
      k << " ranks " << d.ceCollSync.nRanks;
      break;
    case abi::kCeBatch:
      k << " ops " << d.ceCollBatch.numOps << " bytes " << d.ceCollBatch.totalBytes;
      break;
    default:
      break;
  }
  return k.str();
}

}  // namespace

std::multiset<std::string> CanonicalLog(const std::vector<chained::Event>& log) {
  std::map<const void*, std::size_t> node_of;  // handle -> node
  std::vector<std::string> nodes;
  std::vector<std::string> calls;
  std::multiset<std::string> out;
  const auto name = [&](const void* handle) -> std::string {
    if (handle == nullptr) return "-";
    const auto it = node_of.find(handle);
    return it == node_of.end() ? "(not its own)" : nodes[it->second];
  };
  for (const chained::Event& e : log) {
    switch (e.call) {
      case chained::kInit:
        out.insert("init v" + std::to_string(e.version) + " rc " + std::to_string(e.result) +
                   (e.context != nullptr ? " context" : " no context"));
        break;
      case chained::kFinalize:
        out.insert("finalize v" + std::to_string(e.version) + " rc " + std::to_string(e.result));
        break;
      case chained::kStart: {
        std::string key = Describe(e) + " parent{" + name(e.parent) + "}";
        if (e.type == abi::kColl || e.type == abi::kP2p)
          key += " group{" + name(e.parent_group) + "}";
        if (e.handle == nullptr) key += " -> NULL";
        if (e.result != 0) key += " rc " + std::to_string(e.result);
        nodes.push_back(key);
        calls.emplace_back();
        if (e.handle != nullptr) node_of[e.handle] = nodes.size() - 1;
        break;
      }
      case chained::kRecord:
      case chained::kStop: {
        const auto it = node_of.find(e.handle);
        std::string call = e.call == chained::kStop
                               ? std::string(" | stop")
                               : " | record " + std::to_string(e.state) +
                                     (e.args_null ? " null" : " " + std::to_string(e.arg));
        if (e.result != 0) call += " rc " + std::to_string(e.result);
        if (it == node_of.end()) {
          out.insert("(unknown handle)" + call);
        } else {
          calls[it->second] += call;
        }
        break;
      }
    }
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) out.insert(nodes[i] + calls[i]);
  return out;
}

std::vector<std::string> OpLines(const std::vector<profiler::OpView>& ops) {
  std::vector<std::string> lines;
  for (const profiler::OpView& view : ops) {
    const ncclscope_op_record& op = view.op;
    std::ostringstream line;
    line << "kind " << int{op.kind} << " func " << int{op.func} << " seq " << op.seq << " rank "
         << op.rank << " peer " << op.peer << " dt " << int{op.datatype} << " count " << op.count
         << " bytes " << op.bytes << " algo " << int{op.algo} << " proto " << int{op.proto}
         << " ch " << int{op.n_channels} << " warps " << int{op.n_warps} << " flags " << op.flags
         << " mask " << op.channel_mask << " timed " << int{op.n_timed} << " gpu "
         << op.gpu_start_ns << "-" << op.gpu_end_ns;
    for (std::uint32_t c = 0; c < view.n_channels; ++c) {
      line << " [" << int{view.channel_ids[c]} << " " << view.channels[c].start_off_ns << " "
           << view.channels[c].end_off_ns << "]";
    }
    lines.push_back(line.str());
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> ProxyOpLines(const std::vector<ncclscope_proxy_op_record>& ops) {
  std::vector<std::string> lines;
  for (const ncclscope_proxy_op_record& op : ops) {
    std::ostringstream line;
    line << "func " << int{op.func} << " seq " << op.seq << " rank " << op.rank << " peer "
         << op.peer << " ch " << int{op.channel} << " send " << int{op.is_send} << " bytes "
         << op.bytes << " steps " << op.n_steps << "/" << op.steps_done << " chunk "
         << op.chunk_size << " flags " << op.flags;
    lines.push_back(line.str());
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace ncclscope::testing
