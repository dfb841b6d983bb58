#pragma once

// Plugin chaining (NCCLSCOPE_CHAIN=<plugin.so>): NCCL loads one profiler plugin per process
// (NVIDIA/nccl#1981), so ncclscope loads a second one, of the ABI version NCCL chose for
// ncclscope, and forwards every event to it. Jobs that already run NCCL's Inspector (or their own
// plugin) keep it and get ncclscope as well.
//
// What NCCL holds, and what it holds it for:
//  - one context per communicator (comm->profilerContext, src/plugin/profiler.cc:192 at
//    v2.28.9-1) and one handle per event (&ct->eventHandle :416, &sub->opEventHandle :493, ...).
//    So while a chained plugin is loaded, every event's handle is a *chain handle*: an encoded
//    integer (handle.h: kind kChain, slot generation, slot index; never a pointer) naming a slot
//    that holds ncclscope's handle and the chained plugin's handle. Both are recovered from it at
//    stop and record, and when the handle comes back as a parent.
//  - NCCL passes handles back as parents, often *after* the parent's stop: a Coll's parentObj is
//    its CollApi handle, stopped at the API call (src/enqueue.cc:2493) before the Coll starts at
//    launch (:1309), and at every replay of a CUDA graph captured long before; KernelCh and
//    ProxyOps arrive after their Coll's stop (:1314), seconds later when the first kernel is late;
//    a nonblocking group's KernelLaunch (parent GroupApi) starts on the launch thread
//    (src/group.cc:734) after the user thread stopped the GroupApi (:754). So slots of those
//    kinds stay resolvable after their stop until newer ones displace them (a retire ring, see
//    chain_state.h); ProxyOps, some of which NCCL never stops (CollNet, SHM, P2P copy engine: only
//    src/transport/net.cc:1364/:1635 stop them), hold a lease instead, so none of them can exhaust
//    the table. Every other kind's children start inside its start/stop, and its slot is freed
//    at its stop.
//  - the descriptor handed to each plugin carries that plugin's own handles: parentObj and, in
//    v5+, coll.parentGroup / p2p.parentGroup are translated; the context is the plugin's own.
//    PXN ProxyOps (proxyOp.pid is another process) carry another process's context and parent,
//    which nobody here can translate: both plugins get them as NCCL passed them (raw).
//  - one process-global event mask int (src/plugin/profiler.cc:185). ncclscope and the chained
//    plugin each get an int of their own; NCCL's int is kept at their union (at every init and
//    finalize and in each maintenance pass, since either may change its mask at run time).
//    Events only the chained plugin asked for still reach NCCL's threads: ncclscope's handlers see
//    an event only when NCCL would have sent it to ncclscope alone, decided (as NCCL decides, see
//    chain_forward.cc RouteStart()) by ncclscope's mask snapshot taken at the API call and
//    inherited through the parents, so its records do not depend on what the chained plugin asks
//    for.
//
// Failures of the chained plugin never reach ncclscope or NCCL: a failing dlopen, missing
// symbols, a failing init (ncclscope then runs alone for that communicator), error returns,
// NULL handles for events it asked for, events it misses because the table is full or a parent
// was displaced: each is counted in NCCLSCOPE_CTR_CHAIN_ERRORS and logged once through NCCL's
// logger (from the maintenance thread when it happened on NCCL's threads: no system call there).
//
// Cost: with NCCLSCOPE_CHAIN unset, Active() is one load and one predictable branch per event;
// nothing here is reserved. With it set the event path stays lock-free, allocation-free and
// system-call-free (slots come from a SlotArena, pools.h).

#include <atomic>
#include <cstdint>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::plugin::chain {

// Set once a chained plugin is loaded; never cleared (the library stays loaded).
extern std::atomic<bool> g_active;
inline bool Active() { return g_active.load(std::memory_order_relaxed); }

// ncclscope's own entry points, as exports.cc implements them for one ABI version.
using OwnInit = abi::Result (*)(void** context, std::uint64_t comm_id, int* mask, const char* name,
                                int nnodes, int nranks, int rank, abi::DebugLogger logger,
                                int abi_version);
using OwnStartV4 = abi::Result (*)(void* context, void** handle, abi::EventDescrV4* d);
using OwnStartV5 = abi::Result (*)(void* context, void** handle, abi::EventDescrV5* d);
using OwnStartV6 = abi::Result (*)(void* context, void** handle, abi::EventDescrV6* d);
using OwnStop = abi::Result (*)(void* handle);
using OwnRecord = abi::Result (*)(void* handle, int state, abi::StateArgsV4* args);
using OwnFinalize = abi::Result (*)(void* context);

// Init of one communicator: the first call loads NCCLSCOPE_CHAIN (when set); then ncclscope's
// init (with ncclscope's own mask int when chaining), then the chained plugin's. Returns what
// ncclscope's init returned, except that the chained plugin profiling the communicator makes it
// a success. Without NCCLSCOPE_CHAIN this is exactly `own`.
abi::Result Init(OwnInit own, void** context, std::uint64_t comm_id, int* mask, const char* name,
                 int nnodes, int nranks, int rank, abi::DebugLogger logger, int abi_version);
// ncclscope's finalize work first, then the chained plugin's finalize for its context.
abi::Result Finalize(OwnFinalize own, void* context);

// The event path while Active(). Never inlined into the entry points (exports.cc flattens them),
// and throws nothing: no allocation, and both plugins' calls are guarded inside.
#define NCCLSCOPE_CHAIN_ENTRY __attribute__((noinline, cold))
NCCLSCOPE_CHAIN_ENTRY abi::Result Start(OwnStartV4 own, void* context, void** handle,
                                        abi::EventDescrV4* d) noexcept;
NCCLSCOPE_CHAIN_ENTRY abi::Result Start(OwnStartV5 own, void* context, void** handle,
                                        abi::EventDescrV5* d) noexcept;
NCCLSCOPE_CHAIN_ENTRY abi::Result Start(OwnStartV6 own, void* context, void** handle,
                                        abi::EventDescrV6* d) noexcept;
NCCLSCOPE_CHAIN_ENTRY abi::Result Stop(OwnStop own, void* handle) noexcept;
NCCLSCOPE_CHAIN_ENTRY abi::Result Record(OwnRecord own, void* handle, int state,
                                         abi::StateArgsV4* args) noexcept;
#undef NCCLSCOPE_CHAIN_ENTRY

// Maintenance pass (runtime.cc's thread): NCCL's mask = ncclscope's | the chained plugin's, and
// the once-only log lines of failures seen on NCCL's threads.
void Maintain();
// ncclscope just changed its own mask (runtime's WriteNcclMask, right after NCCL's read of an API
// call): NCCL's int follows at once, lock-free, so the union changes at the same safe moment.
void PublishOwnMask();

}  // namespace ncclscope::plugin::chain
