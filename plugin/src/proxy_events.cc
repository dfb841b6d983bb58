// Network operations: ProxyOps, their steps and the net plugin's events (src/proxy.cc,
// src/transport/net.cc at v2.28.9-1). NCCL starts a ProxyOp for every transport but progresses
// and stops only the network's: a ProxyOp becomes a network op at its first network event
// (ClaimNetwork), and the others are released without a record once it is proven they never will
// be (ReleaseIfNoNetwork: here, on the proxy thread, and in runtime.cc's sweep).

#include "plugin/src/proxy_events.h"

#include <pthread.h>

#include <cstdlib>
#include <cstring>

#include "plugin/src/clock.h"
#include "plugin/src/event_helpers.h"
#include "plugin/src/handle.h"
#include "plugin/src/records.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
namespace {

bool IsCollNet(std::uint8_t algo) {
  return algo == NCCLSCOPE_ALGO_COLLNET_DIRECT || algo == NCCLSCOPE_ALGO_COLLNET_CHAIN;
}

}  // namespace

bool ClaimNetwork(ProxyOpState* po, std::uint32_t generation) {
  const std::uint32_t network = ProxyNetworkWord(generation, kProxyIsNetwork);
  std::uint32_t word = po->network.load(std::memory_order_acquire);
  if (word == network) return true;
  const std::uint32_t unclassified = ProxyNetworkWord(generation, kProxyUnclassified);
  while (word == unclassified) {
    if (po->network.compare_exchange_weak(word, network, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      return true;
    }
  }
  return word == network;
}

ReleaseResult ReleaseIfNoNetwork(std::uint32_t index, std::uint32_t generation,
                                 std::uint64_t max_age_ns, PlanEvidence plan_evidence) {
  Runtime& r = R();
  if (index >= r.proxy_ops.carved()) return ReleaseResult::kGone;
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  if (po->slot.generation.load(std::memory_order_acquire) != generation) {
    return ReleaseResult::kGone;
  }
  const std::uint32_t unclassified = ProxyNetworkWord(generation, kProxyUnclassified);
  if (po->network.load(std::memory_order_acquire) != unclassified) return ReleaseResult::kKept;
  const std::uint32_t parent = Load(po->parent_index);
  bool parent_live = false;
  if (parent != UINT32_MAX && parent < r.ops.carved()) {
    auto* op = reinterpret_cast<OpState*>(r.ops.At(parent));
    parent_live =
        op->slot.generation.load(std::memory_order_acquire) == Load(po->parent_generation);
  }
  if (parent_live) return ReleaseResult::kKept;
  bool proven = parent != UINT32_MAX && Load(po->parent_timed) != 0;
  if (!proven && (Load(po->flags) & NCCLSCOPE_PROXY_FOREIGN) == 0) {
    // A later plan's kernel finished, so this op's plan ran: a network receive of it would have
    // been progressed by now (on the proxy thread, before the GPU could use its data).
    const std::uint32_t comm_index = Load(po->comm_index);
    if (comm_index < r.comms.carved()) {
      auto* comm = reinterpret_cast<CommState*>(r.comms.At(comm_index));
      if (comm->slot.generation.load(std::memory_order_acquire) == Load(po->comm_generation)) {
        const std::uint32_t timed = plan_evidence == PlanEvidence::kLatest
                                        ? Load(comm->max_timed_plan)
                                        : Load(comm->swept_timed_plan);
        proven = PlanBefore(Load(po->parent_plan), timed);
      }
    }
  }
  if (!proven) {
    const std::uint64_t now = clock::Now();
    const std::uint64_t started = Load(po->start_ns);
    if (max_age_ns == 0 || now < started || now - started < max_age_ns) return ReleaseResult::kKept;
  }
  // Tagged: if the op was freed and its slot given to the next ProxyOp since the generation was
  // checked above, this fails instead of releasing the live newcomer.
  std::uint32_t expected = unclassified;
  if (!po->network.compare_exchange_strong(expected, ProxyNetworkWord(generation, kProxyReleased),
                                           std::memory_order_acq_rel)) {
    return ReleaseResult::kKept;
  }
  r.proxy_ops.Free(index);
  Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
  return ReleaseResult::kReleased;
}

namespace {

// Unclassified ProxyOps of this thread (NCCL's proxy progress thread), oldest first, as
// (index << 32 | generation). Released here, on the thread that starts them, as soon as the proof
// is in (ReleaseIfNoNetwork): a few are looked at per ProxyOp start, and one that must wait goes
// back to the end so it holds up none of the others. What does not fit is the sweep's job.
constexpr std::uint32_t kUnclassifiedRing = 16384;
struct UnclassifiedRing {
  std::uint64_t entries[kUnclassifiedRing] = {};
  std::uint32_t head = 0;
  std::uint32_t tail = 0;
  bool Full() const { return tail - head >= kUnclassifiedRing; }
  void Push(std::uint64_t entry) { entries[tail++ % kUnclassifiedRing] = entry; }
};
// On the heap, for the proxy threads only: a thread-local array would be allocated for every
// thread of the process that touches any of the plugin's thread-locals. Freed at the thread's exit
// by a pthread key's destructor (a thread_local with a destructor would need the C++ run time's
// __cxa_thread_atexit, which the plugin does without: platform/README.md).
thread_local UnclassifiedRing* t_unclassified = nullptr;
pthread_key_t g_unclassified_key;
pthread_once_t g_unclassified_once = PTHREAD_ONCE_INIT;

void ReleaseUnclassified(Runtime& r) {
  UnclassifiedRing* ring = t_unclassified;
  if (ring == nullptr) return;
  for (int budget = 0; budget < 4 && ring->head != ring->tail; ++budget) {
    const std::uint64_t entry = ring->entries[ring->head++ % kUnclassifiedRing];
    const auto index = static_cast<std::uint32_t>(entry >> 32);
    const auto generation = static_cast<std::uint32_t>(entry);
    auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
    if (po->slot.generation.load(std::memory_order_acquire) != generation ||
        Load(po->network) != ProxyNetworkWord(generation, kProxyUnclassified)) {
      continue;  // stopped, classified or released elsewhere
    }
    if (ReleaseIfNoNetwork(index, generation, /*max_age_ns=*/0, PlanEvidence::kLatest) ==
        ReleaseResult::kKept) {
      ring->Push(entry);  // not yet: to the back (there is room: one was just taken)
    }
  }
}

void TrackUnclassified(std::uint32_t index, std::uint32_t generation) {
  if (t_unclassified == nullptr) {
    pthread_once(&g_unclassified_once, [] {
      pthread_key_create(&g_unclassified_key, [](void* ring) { std::free(ring); });
    });
    // Zeroed memory is an empty ring (UnclassifiedRing is an aggregate of integers).
    t_unclassified = static_cast<UnclassifiedRing*>(std::calloc(1, sizeof(UnclassifiedRing)));
    if (t_unclassified == nullptr) return;
    pthread_setspecific(g_unclassified_key, t_unclassified);
  }
  if (t_unclassified->Full()) return;
  t_unclassified->Push(static_cast<std::uint64_t>(index) << 32 | generation);
}

}  // namespace

namespace {

struct RetiredIdentity {
  std::uint64_t seq = 0;
  std::uint64_t op_index = 0;
  std::uint32_t plan = 0;
  std::uint32_t weight = 1;
  std::uint8_t func = 0;
  std::uint8_t algo = 0;
};

// The identity RetireOp kept for the op whose handle is `parent`, if an entry of `comm` still
// holds it (cold: only ProxyOps whose op has completed come here).
__attribute__((noinline)) bool FindRetired(CommState* comm, const void* parent,
                                           RetiredIdentity* out) {
  if (comm->retired == nullptr) return false;
  const auto wanted = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(parent));
  for (std::uint32_t i = 0; i < kRetiredOps; ++i) {
    RetiredOp& e = comm->retired[i];
    const std::uint32_t before = e.version.load(std::memory_order_acquire);
    if ((before & 1) != 0 || Load(e.handle) != wanted) continue;
    // Each field loaded with acquire order, so the version's re-read below cannot move before them
    // (what an acquire fence before it would do; see RetireOp).
    constexpr auto kAcquire = std::memory_order_acquire;
    RetiredIdentity got;
    got.seq = e.seq.load(kAcquire);
    got.op_index = e.op_index.load(kAcquire);
    got.plan = e.plan.load(kAcquire);
    got.weight = e.weight.load(kAcquire);
    got.func = e.func.load(kAcquire);
    got.algo = e.algo.load(kAcquire);
    const std::uint64_t handle = e.handle.load(kAcquire);
    if (e.version.load(std::memory_order_relaxed) != before || handle != wanted) continue;
    *out = got;
    return true;
  }
  return false;
}

// Whom a ProxyOp belongs to, as far as this process can tell: its communicator and its parent op
// (live, or completed and retired), whose identity and weight its record carries.
struct ProxyParent {
  std::uint16_t flags = 0;
  std::uint32_t comm_index = 0;
  std::uint32_t comm_generation = 0;
  std::uint64_t comm_id = 0;
  std::uint32_t comm_slot = UINT32_MAX;
  std::uint64_t seq = 0;
  std::uint64_t op_index = 0;
  std::uint8_t func = 0;
  std::uint32_t parent_index = UINT32_MAX;
  std::uint32_t parent_generation = 0;
  std::uint32_t parent_plan = 0;  // see ProxyOpState::parent_plan
  std::uint8_t parent_timed = 0;
  // A network op of a parent we cannot see (PXN, or gone) is always recorded: weight 1 keeps the
  // network bytes the agent sums unbiased either way.
  std::uint32_t weight = 1;
  bool collnet_receive = false;  // never stopped: not to be tracked at all
};

// The ProxyOp's communicator and parent op: the live op, else the identity RetireOp kept for it.
ProxyParent FindProxyParent(const Runtime& r, void* context, const ProxyOpArgs& args) {
  ProxyParent p;
  if (args.pid != r.pid) {
    // PXN: raised by our proxy on behalf of another process. The context and parent are that
    // process's values: keep them as numbers for the agent to join, never decode them here.
    p.flags |= NCCLSCOPE_PROXY_FOREIGN;
    Count(NCCLSCOPE_CTR_FOREIGN_PROXY_OPS);
    return p;
  }
  CommState* comm = FindComm(context, &p.comm_index);
  if (comm != nullptr) {
    p.comm_generation = comm->slot.generation.load(std::memory_order_relaxed);
    p.comm_id = Load(comm->comm_id);
    p.comm_slot = Load(comm->comm_slot);
    p.parent_plan = Load(comm->latest_plan);
  }
  std::uint32_t op_slot = 0;
  std::uint32_t op_generation = 0;
  if (OpState* op = FindOp(args.parent, &op_slot, &op_generation);
      op != nullptr && DecodeHandle(args.parent).kind == HandleKind::kOp) {
    // Copied before the re-check below, and kept if it fails (as a parent that is not known).
    p.seq = Load(op->seq);
    p.op_index = Load(op->op_index);
    p.func = Load(op->func);
    const std::uint32_t parent_weight = Load(op->weight);
    const std::uint8_t algo = Load(op->algo);
    const std::uint8_t expect = Load(op->expect);
    const std::uint32_t plan = Load(op->plan);
    // Re-check: the op may have completed and been reused while we copied.
    if (op->slot.generation.load(std::memory_order_acquire) == op_generation) {
      if (IsCollNet(algo) && args.is_send == 0) {
        // CollNet proxy ops are progressed by the CollNet transport, which raises no profiler
        // event (src/transport/coll_net.cc has no ncclProfiler call at v2.28.9-1): never stopped.
        p.collnet_receive = true;
        return p;
      }
      p.flags |= NCCLSCOPE_PROXY_PARENT_KNOWN;
      p.parent_index = op_slot;
      p.parent_generation = op_generation;
      p.parent_timed = expect != kExpectNone ? 1 : 0;
      p.parent_plan = plan;
      p.weight = parent_weight;
    }
  }
  // The parent completed at its stop before this start (no KernelCh kept it): its identity,
  // if still kept (state.h, RetiredOp).
  if ((p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN) == 0 && comm != nullptr &&
      DecodeHandle(args.parent).kind == HandleKind::kOp) {
    RetiredIdentity retired;
    if (FindRetired(comm, args.parent, &retired)) {
      if (IsCollNet(retired.algo) && args.is_send == 0) {
        p.collnet_receive = true;  // as above: never stopped
        return p;
      }
      p.flags |= NCCLSCOPE_PROXY_PARENT_KNOWN;
      p.seq = retired.seq;
      p.op_index = retired.op_index;
      p.func = retired.func;
      p.parent_plan = retired.plan;
      p.weight = retired.weight;
    }
  }
  return p;
}

// The ProxyOp's slot, then its network word (release: whoever claims or releases it sees every
// field).
void PublishProxyOp(ProxyOpState* po, std::uint32_t index, std::uint32_t generation, void* context,
                    const ProxyOpArgs& args, const ProxyParent& p) {
  Store(po->comm_index, p.comm_index);
  Store(po->comm_generation, p.comm_generation);
  Store(po->comm_id, p.comm_id);
  Store(po->comm_slot, p.comm_slot);
  Store(po->seq, p.seq);
  Store(po->op_index, p.op_index);
  Store(po->func, p.func);
  Store(po->flags, p.flags);
  Store(po->weight, p.weight);
  Store(po->origin_context, reinterpret_cast<std::uintptr_t>(context));
  Store(po->origin_parent, reinterpret_cast<std::uintptr_t>(args.parent));
  Store(po->origin_pid, args.pid);
  Store(po->rank, args.rank);
  Store(po->peer, args.peer);
  Store(po->channel, args.channel);
  Store(po->is_send, args.is_send != 0 ? 1 : 0);
  Store(po->n_steps, args.n_steps);
  Store(po->chunk_size, args.chunk_size);
  Store(po->parent_index, p.parent_index);
  Store(po->parent_generation, p.parent_generation);
  Store(po->parent_timed, p.parent_timed);
  Store(po->parent_plan, p.parent_plan);
  Store(po->net_type, NCCLSCOPE_NET_UNKNOWN);
  Store(po->net_dev_index, -1);
  Store(po->qp_num[0], 0);
  Store(po->qp_num[1], 0);
  Store(po->start_ns, clock::Now());
  Store(po->in_progress_ns, 0);
  Store(po->bytes, 0);
  Store(po->max_step_ns, 0);
  Store(po->steps_done, 0);
  for (auto& s : po->state_ns) Store(s, 0);
  for (auto& step : po->steps) Store(step.active, 0);
  // Only network sends set isSend (src/plugin/profiler.cc:492 at v2.28.9-1); before 2.27 only the
  // network transport starts ProxyOps at all (ProxyOpArgs::network_known).
  const bool network = args.is_send != 0 || args.network_known;
  po->network.store(ProxyNetworkWord(generation, network ? kProxyIsNetwork : kProxyUnclassified),
                    std::memory_order_release);
  if (!network) TrackUnclassified(index, generation);
}

}  // namespace

void StartProxyOp(void* context, void** handle, const ProxyOpArgs& args) {
  Runtime& r = R();
  ReleaseUnclassified(r);
  const ProxyParent parent = FindProxyParent(r, context, args);
  if (parent.collnet_receive) {
    *handle = IgnoredHandle();
    Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
    return;
  }
  const std::uint32_t index = r.proxy_ops.Allocate();
  if (index == UINT32_MAX) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
    if (Load(r.proxy_pressure) == 0) Store(r.proxy_pressure, 1);
    return;
  }
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  const std::uint32_t generation = po->slot.generation.load(std::memory_order_relaxed);
  PublishProxyOp(po, index, generation, context, args, parent);
  *handle = EncodeHandle(HandleKind::kProxyOp, generation, index);
}

void StartProxyStep(void* /*context*/, void** handle, void* parent, int step) {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(parent, HandleKind::kProxyOp, &index, nullptr, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) {
    *handle = nullptr;
    if (parent != nullptr && DecodeHandle(parent).kind != HandleKind::kIgnored) {
      Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    }
    return;
  }
  const auto slot_index = static_cast<std::uint32_t>(step) % kStepSlots;
  StepSlot& slot = po->steps[slot_index];
  const std::uint64_t now = clock::Now();
  Store(slot.state, kNoStepState);
  Store(slot.started, now);
  Store(slot.state_since, now);
  Store(slot.trans_size, 0);
  Store(slot.active, 1);
  // The generation the claim was made for, not the slot's now: a step of an op freed meanwhile
  // stays dead instead of counting on the slot's next ProxyOp.
  *handle = EncodeHandle(HandleKind::kProxyStep, generation, index, slot_index);
}

void StartNetPlugin(void** handle, const void* parent, std::int64_t plugin_id, const void* data) {
  *handle = IgnoredHandle();  // NetPlugin stop and NetPluginUpdate states need nothing back
  std::uint32_t sub = 0;
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(parent, HandleKind::kProxyStep, nullptr, &sub, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) return;
  const auto type = static_cast<std::uint32_t>(static_cast<std::uint64_t>(plugin_id) >> 16);
  const auto version = static_cast<std::uint32_t>(plugin_id & 0xFFFF);
  if (type == abi::kNetPluginTypeIb && version == abi::kNetIbDescrVersion && data != nullptr) {
    abi::NetIbDescrV1 descr{};
    std::memcpy(&descr, data, sizeof(descr));
    if (descr.type != abi::kNetIbQpEvent) return;
    Store(po->net_type, NCCLSCOPE_NET_IB);
    Store(po->net_dev_index, descr.qp.device);
    const auto qp = static_cast<std::uint32_t>(descr.qp.qpNum);
    const std::uint32_t first = Load(po->qp_num[0]);
    if (first == 0) {
      Store(po->qp_num[0], qp);
    } else if (first != qp && Load(po->qp_num[1]) == 0) {
      Store(po->qp_num[1], qp);
    }
  } else if (Load(po->net_type) == NCCLSCOPE_NET_UNKNOWN) {
    Store(po->net_type,
          type == abi::kNetPluginTypeSocket ? NCCLSCOPE_NET_SOCKET : NCCLSCOPE_NET_OTHER);
  }
}

namespace {

std::uint32_t StepStateIndex(int state) {
  switch (state) {
    case abi::kProxyStepSendGpuWait:
      return NCCLSCOPE_STEP_SEND_GPU_WAIT;
    case abi::kProxyStepSendPeerWait:
      return NCCLSCOPE_STEP_SEND_PEER_WAIT;
    case abi::kProxyStepSendWait:
      return NCCLSCOPE_STEP_SEND_WAIT;
    case abi::kProxyStepRecvWait:
      return NCCLSCOPE_STEP_RECV_WAIT;
    case abi::kProxyStepRecvFlushWait:
      return NCCLSCOPE_STEP_RECV_FLUSH_WAIT;
    case abi::kProxyStepRecvGpuWait:
      return NCCLSCOPE_STEP_RECV_GPU_WAIT;
    default:
      return kNoStepState;
  }
}

// Closes the step's current state interval at `now`.
void CloseStepState(ProxyOpState* po, StepSlot& slot, std::uint64_t now) {
  const std::uint32_t state = Load(slot.state);
  if (state >= NCCLSCOPE_STEP_STATE_COUNT) return;
  const std::uint64_t since = Load(slot.state_since);
  if (now > since) Store(po->state_ns[state], Load(po->state_ns[state]) + (now - since));
}

// The network op of a ProxyOp handle, claimed as one (its event is network work); nullptr, counted,
// for a stale handle or an op already released as non-network.
ProxyOpState* ClaimedNetworkOp(void* handle, std::uint32_t* index) {
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyOp, index, nullptr, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return nullptr;
  }
  return po;
}

// The step slot of a live ProxyStep handle; nullptr, counted, for a stale or stopped step.
StepSlot* LiveStep(void* handle, ProxyOpState** po) {
  std::uint32_t sub = 0;
  *po = FindProxyOp(handle, HandleKind::kProxyStep, nullptr, &sub);
  if (*po == nullptr || Load((*po)->steps[sub].active) == 0) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return nullptr;
  }
  return &(*po)->steps[sub];
}

}  // namespace

void RecordProxyOpStateV1(void* handle, int state, std::uint64_t trans_size) {
  ProxyOpState* po = ClaimedNetworkOp(handle, nullptr);
  if (po == nullptr) return;
  // Posted is the op's first network action (net.cc:1104-1150 at v2.26.6-1): what v4 calls
  // "in progress". transSize is the op's bytes so far (plugin/profiler.cc:478-489 at v2.26.6-1);
  // ProxyStep records carry none before v4.
  if ((state == abi::kProxyOpSendPosted || state == abi::kProxyOpRecvPosted) &&
      Load(po->in_progress_ns) == 0) {
    Store(po->in_progress_ns, clock::Now());
  }
  if (trans_size > Load(po->bytes)) Store(po->bytes, trans_size);
}

void StopProxyOp(void* handle) {
  std::uint32_t index = 0;
  ProxyOpState* po = ClaimedNetworkOp(handle, &index);
  if (po == nullptr) return;
  EmitProxyOp(po, index, 0);  // only the network transport stops ProxyOps
}

void StopProxyStep(void* handle) {
  ProxyOpState* po = nullptr;
  StepSlot* slot = LiveStep(handle, &po);
  if (slot == nullptr) return;
  const std::uint64_t now = clock::Now();
  CloseStepState(po, *slot, now);
  Store(po->bytes, Load(po->bytes) + Load(slot->trans_size));
  Store(po->steps_done, Load(po->steps_done) + 1);
  const std::uint64_t started = Load(slot->started);
  if (now > started && now - started > Load(po->max_step_ns)) {
    Store(po->max_step_ns, now - started);
  }
  Store(slot->active, 0);
}

bool RecordProxyStepState(void* handle, int state, const abi::StateArgsV4* args) {
  const std::uint32_t index = StepStateIndex(state);
  if (index == kNoStepState) return false;
  ProxyOpState* po = nullptr;
  StepSlot* slot = LiveStep(handle, &po);
  if (slot == nullptr) return true;
  const std::uint64_t now = clock::Now();
  CloseStepState(po, *slot, now);
  Store(slot->state, index);
  Store(slot->state_since, now);
  if (args != nullptr && args->proxyStep.transSize > Load(slot->trans_size)) {
    Store(slot->trans_size, args->proxyStep.transSize);
  }
  return true;
}

void RecordProxyOpInProgress(void* handle) {
  ProxyOpState* po = ClaimedNetworkOp(handle, nullptr);
  if (po == nullptr) return;
  if (Load(po->in_progress_ns) == 0) Store(po->in_progress_ns, clock::Now());
}

void FlushProxyOp(std::uint32_t index, std::uint32_t generation) {
  Runtime& r = R();
  if (index >= r.proxy_ops.carved()) return;
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  if (po->slot.generation.load(std::memory_order_acquire) != generation) return;
  std::uint32_t expected = ProxyNetworkWord(generation, kProxyUnclassified);
  if (po->network.compare_exchange_strong(expected, ProxyNetworkWord(generation, kProxyReleased),
                                          std::memory_order_acq_rel)) {
    r.proxy_ops.Free(index);  // never did network work: no record
    Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
    return;
  }
  if (expected == ProxyNetworkWord(generation, kProxyIsNetwork)) {
    EmitProxyOp(po, index, NCCLSCOPE_PROXY_FLUSHED);
  }
}

}  // namespace ncclscope::plugin
