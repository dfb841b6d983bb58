/* SPDX-License-Identifier: GPL-2.0-only OR Apache-2.0 */
/* Structs and constants shared by the BPF programs in bpf/ and the agent (agent/ebpf/).
 *
 * Plain C, included by both sides: the BPF programs include it after vmlinux.h (which provides the
 * __u32/__u64 types), the agent after <linux/types.h>. Every struct here is a map key, map value or
 * ring-buffer record, so its layout is ABI between the two halves: fixed-width fields only, padding
 * spelled out, sizes checked by static asserts in the agent (agent/ebpf/bpf_objects.cc).
 */
#ifndef NCCLSCOPE_BPF_INTF_H_
#define NCCLSCOPE_BPF_INTF_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Probed functions. The agent attaches every probe with its op as the bpf_cookie, so one
 * entry/return program pair serves them all. NCCL ops are < NCCLSCOPE_OP_IBV_FIRST; libibverbs ops
 * are >= it. Values are ABI (they are keys in BPF maps); append, never renumber. */
enum ncclscope_op {
  /* Collectives and point-to-point: calls and count x sizeof(datatype) bytes. */
  NCCLSCOPE_OP_ALL_REDUCE = 0,
  NCCLSCOPE_OP_BROADCAST = 1,
  NCCLSCOPE_OP_BCAST = 2,
  NCCLSCOPE_OP_REDUCE = 3,
  NCCLSCOPE_OP_ALL_GATHER = 4,
  NCCLSCOPE_OP_REDUCE_SCATTER = 5,
  NCCLSCOPE_OP_ALL_TO_ALL = 6,
  NCCLSCOPE_OP_GATHER = 7,
  NCCLSCOPE_OP_SCATTER = 8,
  NCCLSCOPE_OP_SEND = 9,
  NCCLSCOPE_OP_RECV = 10,
  /* Group semantics: calls only. */
  NCCLSCOPE_OP_GROUP_START = 11,
  NCCLSCOPE_OP_GROUP_END = 12,
  /* Communicator lifecycle: also reported as ring-buffer events. */
  NCCLSCOPE_OP_COMM_INIT_RANK = 13,
  NCCLSCOPE_OP_COMM_INIT_RANK_CONFIG = 14,
  NCCLSCOPE_OP_COMM_INIT_RANK_SCALABLE = 15,
  NCCLSCOPE_OP_COMM_INIT_ALL = 16,
  NCCLSCOPE_OP_COMM_SPLIT = 17,
  NCCLSCOPE_OP_COMM_FINALIZE = 18,
  NCCLSCOPE_OP_COMM_DESTROY = 19,
  NCCLSCOPE_OP_COMM_ABORT = 20,
  /* Queries that reveal a communicator's size and rank (used for split communicators). */
  NCCLSCOPE_OP_COMM_COUNT = 21,
  NCCLSCOPE_OP_COMM_USER_RANK = 22,
  NCCLSCOPE_OP_NCCL_END = 23,

  /* libibverbs control path (never the data path: ibv_post_* and ibv_poll_cq are inline). */
  NCCLSCOPE_OP_IBV_FIRST = 64,
  NCCLSCOPE_OP_IBV_CREATE_QP = 64,
  NCCLSCOPE_OP_IBV_MODIFY_QP = 65,
  NCCLSCOPE_OP_IBV_DESTROY_QP = 66,
  NCCLSCOPE_OP_IBV_REG_MR = 67,
  NCCLSCOPE_OP_IBV_REG_MR_IOVA2 = 68,
  NCCLSCOPE_OP_IBV_REG_DMABUF_MR = 69,
  NCCLSCOPE_OP_IBV_DEREG_MR = 70,
  NCCLSCOPE_OP_IBV_END = 71,
};

/* /proc/<pid>/stat reports a process's start time in clock ticks of USER_HZ (100 on every Linux
 * architecture the agent runs on); the BPF side divides task->start_boottime (ns) by this so both
 * halves name a process by the same (tgid, start_ticks) pair, which PID reuse cannot collide. */
#define NCCLSCOPE_NSEC_PER_TICK 10000000ULL

/* A process (tgid + start time), the cgroup v2 id it ran in, and one probed function. */
struct ncclscope_proc_key {
  __u32 tgid;
  __u32 op; /* enum ncclscope_op */
  __u64 start_ticks;
  __u64 cgroup_id; /* bpf_get_current_cgroup_id(): the v2 cgroup; the v2 root on v1-only hosts */
};

/* Entries of the per-process maps: `call_slots`, `call_counts`, `free_slots`, `results`. */
#define NCCLSCOPE_MAX_PROC_OPS 16384

/* Value of the `call_counts` array: one (process, cgroup, op)'s counts, at the slot that
 * `call_slots` maps its ncclscope_proc_key to. */
struct ncclscope_call_counts {
  __u64 calls;      /* outermost calls entered (nested API calls inside NCCL are not counted) */
  __u64 bytes;      /* NCCL: count x sizeof(datatype); ibv_reg_*mr: length of registered regions */
  __u32 generation; /* bumped by the agent each time it frees the slot: a thread's cached slot
                     * of another generation is stale */
  __u32 pad;
};

/* Each probed op's index into ncclscope_thread_state.slots: NCCL ops, then libibverbs ops. */
#define NCCLSCOPE_OP_SLOTS (NCCLSCOPE_OP_NCCL_END + NCCLSCOPE_OP_IBV_END - NCCLSCOPE_OP_IBV_FIRST)

/* A thread's cached slot of `call_counts` for one op: valid while the slot's generation and the
 * thread's cgroup are unchanged. */
struct ncclscope_slot_ref {
  __u32 slot_plus_one; /* 0: none cached */
  __u32 generation;
  __u64 cgroup_id;
};

/* Key of the `results` map (non-success outcomes) and the `qp_states` map (successful
 * ibv_modify_qp transitions, value = target state). Value: __u64 count. */
struct ncclscope_result_key {
  struct ncclscope_proc_key proc;
  __s64 value; /* ncclResult_t, errno returned by verbs, NCCLSCOPE_RESULT_NULL, or ibv_qp_state */
};

/* `value` for a libibverbs function that returns a pointer and returned NULL. */
#define NCCLSCOPE_RESULT_NULL (-1LL)
/* ncclInProgress: the normal return of non-blocking communicators, not counted as an error. */
#define NCCLSCOPE_NCCL_IN_PROGRESS 7

/* State from a probed function's entry to its return, one per domain in a thread's
 * ncclscope_thread_state (domain 0 = NCCL, 1 = libibverbs). depth counts nested probed calls in the
 * same domain on this thread (0: none in flight): only the outermost is counted (ncclBcast calls
 * ncclBroadcast through the PLT; ibv_reg_mr tail-calls ibv_reg_mr_iova2). sp is the stack pointer
 * at the outermost entry: a nested call enters below it, a tail call at it; an entry above it means
 * the outer call was left without its return probe firing (longjmp or an exception out of it, or
 * its return finding no state), so it starts a new outermost call instead of counting as nested. (A
 * new call at exactly the lost call's depth still looks like a tail call: telling them apart would
 * take reading the return address on every nested entry.) */
struct ncclscope_stash {
  __u32 op;
  __u32 depth;
  __u64 sp;
  __u64 arg[3]; /* op-specific, see probes.bpf.c */
};

/* Value of the `threads` task-storage map: what a thread carries from entry to return, and its
 * process's identity, filled at the thread's first probed call (tgid 0: not yet). A thread keeps
 * its tgid and its group leader's start time for life: exec by a non-leader thread takes over the
 * leader's pid and copies its start_boottime (kernel/exec.c de_thread). */
struct ncclscope_thread_state {
  struct ncclscope_stash call[2];
  __u32 tgid;
  __u32 pad;
  __u64 start_ticks;
  struct ncclscope_slot_ref slots[NCCLSCOPE_OP_SLOTS];
};

/* Indexes of the `counters` array map: things the BPF side had to drop. (NCCLSCOPE_BPF_: the
 * plugin ring header, plugin/ring/ncclscope_ring.h, has an ncclscope_counter of its own, and the
 * two headers are included together.) */
enum ncclscope_bpf_counter {
  NCCLSCOPE_BPF_EVENTS_LOST = 0,       /* ring buffer full */
  NCCLSCOPE_BPF_CALLS_FULL = 1,        /* no free slot: a process/op pair was not counted */
  NCCLSCOPE_BPF_RESULTS_FULL = 2,      /* `results` or `qp_states` map full */
  NCCLSCOPE_BPF_THREAD_STATE_LOST = 3, /* no task storage for a thread (allocation failed or the
                                        * storage was busy): its call was not counted */
  NCCLSCOPE_BPF_COUNTER_COUNT = 4,
};

/* Ring-buffer records: process lifecycle and rare API events the agent keeps state for. */
enum ncclscope_event_kind {
  NCCLSCOPE_EVENT_EXEC = 1,      /* a process exec'd: the agent schedules scans of its maps */
  NCCLSCOPE_EVENT_EXIT = 2,      /* the last thread of a process exited */
  NCCLSCOPE_EVENT_COMM_INIT = 3, /* a communicator init/split returned (any result) */
  NCCLSCOPE_EVENT_COMM_INFO = 4, /* ncclCommCount / ncclCommUserRank revealed nranks / rank */
  NCCLSCOPE_EVENT_COMM_END = 5,  /* ncclCommDestroy / ncclCommAbort entered */
  NCCLSCOPE_EVENT_QP_ERROR = 6,  /* ibv_modify_qp moved a queue pair to IBV_QPS_ERR */
};

struct ncclscope_event {
  __u32 kind; /* enum ncclscope_event_kind */
  __u32 tgid;
  __u64 start_ticks;
  __u64 cgroup_id;
  __u32 op;     /* enum ncclscope_op, for API events */
  __s32 result; /* return value (COMM_INIT) */
  __u64 handle; /* communicator (COMM_*) or struct ibv_qp* (QP_ERROR) */
  __s32 nranks; /* COMM_INIT / COMM_INFO; -1 when unknown */
  __s32 rank;   /* COMM_INIT / COMM_INFO; -1 when unknown */
  __u64 parent; /* COMM_INIT of ncclCommSplit: the parent communicator */
  __u32 qp_num; /* QP_ERROR */
  __u32 pad;
};

/* ncclCommInitAll creates one communicator per device in the calling process; the BPF side
 * reports at most this many of them. */
#define NCCLSCOPE_MAX_INIT_ALL 16

/* rdma-core's public struct ibv_qp (infiniband/verbs.h, IBVERBS_1.1 ABI): six pointers, then
 * __u32 handle, then __u32 qp_num. struct ibv_qp_attr starts with enum ibv_qp_state qp_state. */
#define NCCLSCOPE_IBV_QP_NUM_OFFSET 52
#define NCCLSCOPE_IBV_QP_STATE_MASK 1 /* IBV_QP_STATE in ibv_modify_qp's attr_mask */
#define NCCLSCOPE_IBV_QPS_ERR 6       /* IBV_QPS_ERR */
#define NCCLSCOPE_IBV_QPS_COUNT 8     /* RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN */

/* Record written by the task_vma iterator (vma_iter.bpf.c) for each executable file mapping of
 * one process: the real file behind the mapping. On overlayfs, /proc/<pid>/maps shows the overlay
 * inode while uprobes live on the real (lower or upper layer) inode; this is the real one. */
struct ncclscope_vma_record {
  __u64 vm_start;
  __u64 vm_end;
  __u64 pgoff; /* in pages */
  __u64 ino;   /* real inode number */
  __u32 dev;   /* real inode's super_block->s_dev (kernel dev_t encoding: major << 20 | minor) */
  __u32 pad;
};

#endif /* NCCLSCOPE_BPF_INTF_H_ */
