// ReplayComm's proxy side: the events NCCL's proxy thread (and v7's profiler thread) raise for a
// launched op: KernelCh and v7's KernelPhase, ProxyOps with their steps and states (the v1-v3
// transfer order included), net-plugin events, and RunPlan, which posts a plan's proxy side to
// those threads.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "platform/clock.h"
#include "tools/replay/nccl_replay.h"
#include "tools/replay/replay_internal.h"

namespace ncclscope::replay {

void ReplayComm::KernelChannels(const EnqueuedOp& op, int channels, const GpuTimes& gpu) {
  if (!EmitsKernelCh(op.mask)) return;
  GpuTimes times = gpu;
  if (times.base == 0) times.base = platform::RealtimeNs();
  std::vector<void*> handles(static_cast<std::size_t>(channels), nullptr);
  for (int c = 0; c < channels; ++c) {
    handles[static_cast<std::size_t>(c)] = KernelChannelStart(op, c, times.Start(c));
  }
  for (int c = 0; c < channels; ++c) {
    PhaseStamps stamps;
    stamps.ts[0] = times.Start(c);
    stamps.ts[3] = times.Stop(c);
    stamps.ts[1] = std::min(stamps.ts[0] + times.initial_sync_ns, stamps.ts[3]);
    stamps.ts[2] = std::max(
        stamps.ts[1], stamps.ts[3] - std::min(times.final_sync_ns, stamps.ts[3] - stamps.ts[0]));
    KernelPhases(op, handles[static_cast<std::size_t>(c)], c, stamps);
    KernelChannelStop(handles[static_cast<std::size_t>(c)], times.Stop(c));
  }
}

void* ReplayComm::KernelChannelStart(const EnqueuedOp& op, int channel,
                                     std::uint64_t gpu_start_ns) {
  // No KernelCh before 2.26 (v3); v3's carries no timestamp (ProfilerPlugin drops it).
  if (op.self || !EmitsKernelCh(op.mask) || process_.version() < 3) return nullptr;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kKernelCh;
  d.parentObj = op.handle;
  d.kernelCh.channelId = static_cast<std::uint8_t>(channel);
  d.kernelCh.pTimer = gpu_start_ns;
  void* handle = nullptr;
  Start(&handle, d);
  return handle;
}

void ReplayComm::KernelChannelStop(void* handle, std::uint64_t gpu_stop_ns) {
  if (handle == nullptr) return;
  if (process_.version() >= 4) {
    abi::StateArgsV6 args;
    args.kernelCh.pTimer = gpu_stop_ns;
    process_.plugin().Record(process_.version(), handle, abi::kKernelChStop, &args);
  }
  // 2.26: stopEvent alone, when the proxy thread sees the channel's completed counter
  // (src/plugin/profiler.cc:468-476 at v2.26.6-1).
  process_.plugin().Stop(process_.version(), handle);
}

void ReplayComm::KernelPhases(const EnqueuedOp& op, void* kernel_ch, int channel,
                              const PhaseStamps& stamps) {
  // profilerFireKernelPhaseEvents (src/plugin/profiler.cc:898-941 at 2.31.2): only with
  // KernelPhase in the task's mask copy (:900); phase i spans stamps i..i+1, skipped when a stamp
  // is missing or the span is empty (:922-923). The stamps' folding of a missing middle boundary
  // (:912-919) is the caller's: the replay's stamps are always complete.
  static const char* const kPhaseNames[] = {"initial_sync", "compute", "final_sync"};  // :896
  if (process_.version() < 7 || op.self || (op.mask & abi::kKernelPhase) == 0) return;
  for (int i = 0; i < abi::kPhaseCount; ++i) {
    const std::uint64_t start = stamps.ts[i];
    const std::uint64_t end = stamps.ts[i + 1];
    if (start == 0 || end == 0 || start == end) continue;
    abi::EventDescrV7 d{};
    std::memset(&d, 0, sizeof(d));  // rank stays 0 (:925)
    d.type = abi::kKernelPhase;
    d.parentObj = kernel_ch;  // op->kernelEventHandle (:927)
    d.kernelPhase.channelId = static_cast<std::uint8_t>(channel);
    d.kernelPhase.phaseId = static_cast<std::uint8_t>(i);
    d.kernelPhase.phaseName = kPhaseNames[i];
    d.kernelPhase.pTimer = start;
    void* phase = nullptr;
    Start(&phase, d);
    if (phase == nullptr) continue;  // no record, no stop (:933)
    abi::StateArgsV7 args{};
    args.kernelCh.pTimer = end;  // :936-937
    process_.plugin().Record(process_.version(), phase, abi::kKernelPhaseStop, &args);
    process_.plugin().Stop(process_.version(), phase);
  }
}

void* ReplayComm::ProxyOpStart(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  void* handle = ProxyOpStartOnly(op, spec);
  if (handle != nullptr && process_.version() >= 4) {
    process_.plugin().Record(process_.version(), handle, abi::kProxyOpInProgress, nullptr);
  }
  return handle;
}

void ReplayComm::NetPluginEvent(const EnqueuedOp& op, void* step, const ProxyOpSpec& spec) {
  if (step == nullptr || spec.qp_num == 0 || !EmitsNetPlugin(op.mask)) return;
  if (process_.version() < 3) return;  // no net-plugin events before 2.26
  // src/plugin/profiler.cc:687-712: parent = the step's handle; id = type << 16 | version
  // (2.26: src/plugin/profiler.cc:548-563 at v2.26.6-1).
  abi::NetIbDescrV1 descr{};
  descr.type = abi::kNetIbQpEvent;
  descr.qp.device = spec.ib_device;
  descr.qp.opcode = spec.send ? 4 /* IBV_WR_RDMA_WRITE_WITH_IMM */ : 0;
  descr.qp.qpNum = spec.qp_num;
  descr.qp.length = spec.chunk_bytes;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kNetPlugin;
  d.parentObj = step;
  d.rank = rank_;
  d.netPlugin.id = static_cast<std::int64_t>(abi::kNetPluginTypeIb << 16 | abi::kNetIbDescrVersion);
  d.netPlugin.data = &descr;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  // Stopped when the work request completes (ncclIbTest, src/transport/net_ib.cc).
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyOpStartOnly(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  if (op.self || (op.mask & ProxyOpGate(process_.version())) == 0) return nullptr;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyOp;
  d.parentObj = spec.foreign_parent != nullptr ? spec.foreign_parent : op.handle;
  d.rank = rank_;
  d.proxyOp.pid = spec.pid != 0 ? spec.pid : ::getpid();
  d.proxyOp.channelId = static_cast<std::uint8_t>(spec.channel);
  d.proxyOp.peer = spec.peer;
  d.proxyOp.nSteps = spec.steps;
  d.proxyOp.chunkSize = static_cast<int>(spec.chunk_bytes);
  d.proxyOp.isSend = spec.send ? 1 : 0;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  return handle;
}

void ReplayComm::ProxyOpStop(void* handle) {
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyStepStart(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec,
                                 int step) {
  // NCCL checks sub->opEventHandle: no ProxyOp handle, no steps.
  if (proxy_op == nullptr || (op.mask & ProxyStepGate(process_.version())) == 0) return nullptr;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyStep;
  d.parentObj = proxy_op;
  d.rank = rank_;
  d.proxyStep.step = step;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  return handle;
}

void ReplayComm::ProxyStepState(void* step, int state, std::size_t trans_bytes) {
  if (step == nullptr) return;
  abi::StateArgsV6 args;
  args.proxyStep.transSize = trans_bytes;
  process_.plugin().Record(process_.version(), step, state, &args);  // v1-v3: NULL args
}

void ReplayComm::ProxyStepStop(void* step) {
  if (step != nullptr) process_.plugin().Stop(process_.version(), step);
}

void ReplayComm::LegacyProxyTransfer(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec,
                                     int step, std::size_t* trans_size) {
  // One network transfer of a 2.23-2.26 net proxy op, in the order of sendProxyProgress and
  // recvProxyProgress (src/transport/net.cc:1104-1241 and 1285-1514 at v2.26.6-1; the same calls
  // at :1047-1193 and :1236-1461 at v2.23.4-1). Simplified: sliceSteps = 1 and one transfer at a
  // time (NCCL posts up to NCCL_STEPS ahead), so `steps` is step + 1 in every record.
  if (proxy_op == nullptr) return;  // every record below needs the ProxyOp handle
  const int version = process_.version();
  auto op_state = [&](int state) {
    abi::StateArgsV1 args{};
    std::memset(&args, 0, sizeof(args));
    args.proxyOp.transSize = *trans_size;
    args.proxyOp.steps = step + 1;
    process_.plugin().RecordV1(version, proxy_op, state, &args);
  };
  void* h = ProxyStepStart(op, proxy_op, spec, step);
  if (spec.send) {
    op_state(abi::kProxyOpSendPosted);                  // :1143
    ProxyStepState(h, abi::kProxyStepSendGpuWait, 0);   // :1144
    op_state(abi::kProxyOpSendRemFifoWait);             // :1191, before isend
    NetPluginEvent(op, h, spec);                        // isend's work request (v3)
    if (version >= 2) *trans_size += spec.chunk_bytes;  // :1199 (2.24+: before the record)
    op_state(abi::kProxyOpSendTransmitted);             // :1202
    if (version == 1) *trans_size += spec.chunk_bytes;  // :1136-1138 at v2.23.4-1: after it
    ProxyStepState(h, abi::kProxyStepSendWait, 0);      // :1203
    ProxyStepStop(h);                                   // :1222
    op_state(abi::kProxyOpSendDone);                    // :1223
  } else {
    NetPluginEvent(op, h, spec);                         // irecv's work request (v3)
    op_state(abi::kProxyOpRecvPosted);                   // :1366
    ProxyStepState(h, abi::kProxyStepRecvWait, 0);       // :1367
    *trans_size += spec.chunk_bytes;                     // :1396
    op_state(abi::kProxyOpRecvReceived);                 // :1398
    ProxyStepState(h, abi::kProxyStepRecvFlushWait, 0);  // :1399
    op_state(abi::kProxyOpRecvTransmitted);              // :1462
    ProxyStepState(h, abi::kProxyStepRecvGpuWait, 0);    // :1463
    ProxyStepStop(h);                                    // :1498
    op_state(abi::kProxyOpRecvDone);                     // :1499
  }
}

void ReplayComm::ProxyWork(const EnqueuedOp& op, int channels, const ProxyPlan& proxy) {
  if (!proxy.enabled || (op.mask & ProxyOpGate(process_.version())) == 0) return;
  const bool legacy = process_.version() <= 3;
  struct Sub {
    void* handle = nullptr;
    ProxyOpSpec spec;
    std::size_t trans_size = 0;  // v1-v3: the ProxyOp's cumulative bytes
  };
  std::vector<Sub> subs;
  for (int c = 0; c < channels; ++c) {
    for (int dir = 0; dir < 2; ++dir) {
      Sub sub;
      sub.spec.channel = c;
      sub.spec.send = dir == 1;
      sub.spec.peer = dir == 1 ? (rank_ + 1) % nranks_ : (rank_ + nranks_ - 1) % nranks_;
      sub.spec.steps = proxy.steps;
      sub.spec.chunk_bytes = proxy.step_bytes;
      sub.spec.pid = proxy.pid;
      sub.spec.foreign_parent = proxy.foreign_parent;
      sub.spec.foreign_context = proxy.foreign_context;
      sub.handle = ProxyOpStart(op, sub.spec);
      subs.push_back(sub);
    }
  }
  for (int step = 0; step < proxy.steps; ++step) {
    for (Sub& sub : subs) {
      if (legacy) {
        LegacyProxyTransfer(op, sub.handle, sub.spec, step, &sub.trans_size);
        continue;
      }
      void* h = ProxyStepStart(op, sub.handle, sub.spec, step);
      if (h == nullptr) continue;
      const int states_send[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendPeerWait,
                                 abi::kProxyStepSendWait};
      const int states_recv[] = {abi::kProxyStepRecvWait, abi::kProxyStepRecvFlushWait,
                                 abi::kProxyStepRecvGpuWait};
      for (int state : sub.spec.send ? states_send : states_recv) {
        ProxyStepState(h, state, proxy.step_bytes);
      }
      ProxyStepStop(h);
    }
  }
  for (const Sub& sub : subs) ProxyOpStop(sub.handle);
}

struct ReplayComm::NetOp {
  void* handle = nullptr;
  ProxyOpSpec spec;
  EnqueuedOp enqueued;
};

struct ReplayComm::KernelChannel {
  void* handle = nullptr;
  EnqueuedOp op;
  int channel = 0;
  PhaseStamps stamps;  // ts[0] start, ts[3] end
};

struct ReplayComm::Kernels {
  std::uint64_t base = 0;  // GPU time of the plan's start
  std::vector<KernelChannel> channels;
};

// ProxyOps at append, before the kernel runs (src/proxy.cc:427); 2.23-2.26 start them only in
// the network transport, when the op becomes ready (src/transport/net.cc:1104, :1285 at
// v2.26.6-1), and have no never-stopped ones.
std::vector<ReplayComm::NetOp> ReplayComm::StartProxyOps(const PlanLaunch& plan,
                                                         const ProxyPlan& net) {
  const bool legacy = process_.version() <= 3;
  std::vector<NetOp> nets;
  for (const PlannedOp& op : plan.ops) {
    if (op.self || op.symmetric) continue;
    EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
    if ((op.mask & ProxyOpGate(process_.version())) == 0) continue;
    const bool never_stopped = op.collnet || op.proxy_never_stopped;
    if (never_stopped && legacy) continue;
    if (!never_stopped && !net.enabled) continue;
    for (int channel : op.channel_ids) {
      for (int dir = 0; dir < 2; ++dir) {
        const bool send = dir == 1;
        if (op.p2p && send != op.send) continue;  // a send task has send proxy ops only
        NetOp n;
        n.enqueued = e;
        n.spec.channel = channel;
        n.spec.send = send && !never_stopped;  // isSend: network sends only
        n.spec.peer =
            op.p2p ? op.peer : (send ? (rank_ + 1) % nranks_ : (rank_ + nranks_ - 1) % nranks_);
        n.spec.steps = never_stopped ? 0 : net.steps;
        n.spec.chunk_bytes = net.step_bytes;
        n.spec.pid = net.pid;
        n.spec.foreign_parent = net.foreign_parent;
        n.spec.foreign_context = net.foreign_context;
        n.spec.ib_device = net.ib_device;
        n.spec.qp_num = net.qp_base != 0 ? net.qp_base + 2 * channel + dir : 0;
        n.handle = ProxyOpStartOnly(e, n.spec);
        if (!never_stopped) nets.push_back(n);
      }
    }
  }
  return nets;
}

// Network work while the kernel runs: in progress, steps (with net-plugin events), stop.
void ReplayComm::ProgressNetwork(std::vector<NetOp>& nets) {
  const bool legacy = process_.version() <= 3;
  for (NetOp& n : nets) {
    if (n.handle == nullptr) continue;
    if (legacy) {
      std::size_t trans_size = 0;
      for (int step = 0; step < n.spec.steps; ++step) {
        LegacyProxyTransfer(n.enqueued, n.handle, n.spec, step, &trans_size);
      }
      ProxyOpStop(n.handle);
      continue;
    }
    process_.plugin().Record(process_.version(), n.handle, abi::kProxyOpInProgress, nullptr);
    for (int step = 0; step < n.spec.steps; ++step) {
      void* h = ProxyStepStart(n.enqueued, n.handle, n.spec, step);
      if (h == nullptr) continue;
      NetPluginEvent(n.enqueued, h, n.spec);
      const int states_send[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendPeerWait,
                                 abi::kProxyStepSendWait};
      const int states_recv[] = {abi::kProxyStepRecvWait, abi::kProxyStepRecvFlushWait,
                                 abi::kProxyStepRecvGpuWait};
      for (int state : n.spec.send ? states_send : states_recv) {
        ProxyStepState(h, state, n.spec.chunk_bytes);
      }
      ProxyStepStop(h);
    }
    ProxyOpStop(n.handle);
  }
}

// KernelCh starts for every channel of every task, as each channel starts.
ReplayComm::Kernels ReplayComm::StartKernels(const PlanLaunch& plan, const PlanTiming& timing) {
  const int version = process_.version();
  if (timing.first_kernel_delay_ms != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timing.first_kernel_delay_ms));
  }
  Kernels kernels;
  const std::uint64_t base = timing.base_ns != 0 ? timing.base_ns : platform::RealtimeNs();
  kernels.base = base;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlannedOp& op = plan.ops[i];
    if (op.self) continue;
    const std::uint64_t duration = i < timing.duration_ns.size() ? timing.duration_ns[i] : 50'000;
    const std::uint64_t initial = i < timing.initial_sync_ns.size() ? timing.initial_sync_ns[i] : 0;
    const std::uint64_t final = i < timing.final_sync_ns.size() ? timing.final_sync_ns[i] : 0;
    EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
    for (std::size_t k = 0; k < op.channel_ids.size(); ++k) {
      const std::uint64_t start = base + k * timing.skew_ns;
      KernelChannel ch;
      ch.op = e;
      ch.channel = op.channel_ids[k];
      ch.handle = KernelChannelStart(e, op.channel_ids[k], start);
      ch.stamps.ts[0] = start;
      ch.stamps.ts[3] = start + duration + k * timing.skew_ns;
      const std::uint64_t span = ch.stamps.ts[3] - start;
      ch.stamps.ts[1] = start + std::min(initial, span);
      ch.stamps.ts[2] = std::max(ch.stamps.ts[1], ch.stamps.ts[3] - std::min(final, span));
      // v7 phases come even under a NULL KernelCh handle (their parent is then NULL).
      const bool phases =
          version >= 7 && EmitsKernelCh(e.mask) && (e.mask & abi::kKernelPhase) != 0;
      if (ch.handle != nullptr || phases) kernels.channels.push_back(ch);
    }
  }
  return kernels;
}

// The channels end in the order of their GPU end times: a plan's ops finish out of order. v7:
// each channel's phases right before its KernelChStop (src/plugin/profiler.cc:972-977 at
// 2.31.2).
void ReplayComm::StopKernels(Kernels& kernels, const PlanTiming& timing) {
  std::vector<KernelChannel>& channels = kernels.channels;
  std::stable_sort(channels.begin(), channels.end(),
                   [](const KernelChannel& a, const KernelChannel& b) {
                     return a.stamps.ts[3] < b.stamps.ts[3];
                   });
  const auto wall_start = std::chrono::steady_clock::now();
  for (const KernelChannel& ch : channels) {
    if (timing.real_time) {
      std::this_thread::sleep_until(wall_start +
                                    std::chrono::nanoseconds(ch.stamps.ts[3] - kernels.base));
    }
    KernelPhases(ch.op, ch.handle, ch.channel, ch.stamps);
    KernelChannelStop(ch.handle, ch.stamps.ts[3]);
  }
}

void ReplayComm::RunPlan(const PlanLaunch& plan, const PlanTiming& timing, const ProxyPlan& net) {
  const int version = process_.version();
  // The steps run on NCCL's threads after RunPlan returns: they hold copies of the plan.
  auto start_proxy_ops = [this, plan, net] { return StartProxyOps(plan, net); };
  auto progress_network = [this](std::vector<NetOp>& nets) { ProgressNetwork(nets); };
  auto start_kernels = [this, plan, timing] { return StartKernels(plan, timing); };
  auto stop_kernels = [this, timing](Kernels& kernels) { StopKernels(kernels, timing); };
  if (version >= 7 && profiler_thread_ != nullptr) {
    // 2.31.2: KernelCh and phases from the communicator's profiler thread (:1053-1099), the
    // network from the proxy thread, concurrently; both wait for the kernel to start. A channel
    // still ends only after its op's network transfers (the kernel waits for the proxy's data and
    // credits), as on the single proxy thread below: the channels' stops wait for the network.
    auto network_done = std::make_shared<std::promise<void>>();
    std::shared_future<void> network_ended = network_done->get_future().share();
    auto kernel_work = [start_kernels, stop_kernels, network_ended]() mutable {
      Kernels kernels = start_kernels();
      network_ended.wait();
      stop_kernels(kernels);
    };
    auto proxy_work = [start_proxy_ops, progress_network, timing, network_done]() mutable {
      std::vector<NetOp> nets = start_proxy_ops();
      if (timing.first_kernel_delay_ms != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(timing.first_kernel_delay_ms));
      }
      progress_network(nets);
      network_done->set_value();
    };
    profiler_thread_->Post(kernel_work);
    if (proxy_ != nullptr) {
      proxy_->Post(proxy_work);
    } else {
      proxy_work();
    }
    return;
  }
  auto work = [start_proxy_ops, progress_network, start_kernels, stop_kernels]() mutable {
    std::vector<NetOp> nets = start_proxy_ops();
    Kernels kernels = start_kernels();
    progress_network(nets);
    stop_kernels(kernels);
  };
  if (proxy_ != nullptr) {
    proxy_->Post(work);
  } else {
    work();
  }
}

}  // namespace ncclscope::replay
