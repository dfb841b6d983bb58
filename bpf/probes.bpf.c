// SPDX-License-Identifier: GPL-2.0-only
/* Uprobes on libnccl and libibverbs, and the process lifecycle the agent needs around them.
 *
 * One entry program and one return program serve every probed function: the agent attaches each
 * (file, function) with the function's op (enum ncclscope_op) as the bpf_cookie. Counting happens
 * here, in hash maps keyed by process + op, which the agent reads at scrape time; only rare events
 * (communicator lifecycle, queue pairs entering the error state, exec and exit) go through the ring
 * buffer. Structs are in include/ncclscope/bpf_intf.h.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ncclscope/bpf_intf.h"

char LICENSE[] SEC("license") = "GPL";

/* Calls and bytes per (process, cgroup, op), in two maps: `call_slots` names each counted
 * (process, cgroup, op) and its slot in the `call_counts` array, which holds the counts. A thread
 * keeps the slot of each op it calls (ncclscope_thread_state.slots), so a call costs an array
 * index instead of a hash lookup (which was ~115 ns of the ~270 ns the programs took per call,
 * docs/benchmarks.md "eBPF probe cost"). Free slots come from `free_slots`, which the agent fills
 * at load and refills as it folds the counts of exited processes into its totals; freeing a slot
 * bumps its generation, so a thread still caching it looks its op up again. Plain hash, not LRU:
 * counts must not vanish. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, NCCLSCOPE_MAX_PROC_OPS);
  __type(key, struct ncclscope_proc_key);
  __type(value, __u32);
} call_slots SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, NCCLSCOPE_MAX_PROC_OPS);
  __type(key, __u32);
  __type(value, struct ncclscope_call_counts);
} call_counts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_QUEUE);
  __uint(max_entries, NCCLSCOPE_MAX_PROC_OPS);
  __type(value, __u32);
} free_slots SEC(".maps");

/* Non-success results per (process, cgroup, op, result). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, NCCLSCOPE_MAX_PROC_OPS);
  __type(key, struct ncclscope_result_key);
  __type(value, __u64);
} results SEC(".maps");

/* Successful ibv_modify_qp transitions per (process, cgroup, target state). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct ncclscope_result_key);
  __type(value, __u64);
} qp_states SEC(".maps");

/* Entry -> return state of each thread, in the thread's task storage: the kernel finds it from the
 * task without hashing, frees it with the task (so thread exits need no cleanup), and a call's
 * entry and return only write into it. It was an LRU hash keyed by thread, whose update at every
 * entry and delete at every return cost ~200 ns of the ~460 ns the programs took per call
 * (docs/benchmarks.md, "eBPF probe cost"). */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct ncclscope_thread_state);
} threads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, NCCLSCOPE_BPF_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

/* sizeof each ncclDataType_t (nccl.h, 2.28): int8, uint8, int32, uint32, int64, uint64, float16,
 * float32, float64, bfloat16, fp8 e4m3, fp8 e5m2. */
static const __u8 kDatatypeSize[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

static __always_inline void bump(__u32 index) {
  __u64 *value = bpf_map_lookup_elem(&counters, &index);
  if (value) __sync_fetch_and_add(value, 1);
}

static __always_inline __u64 start_ticks_of(struct task_struct *task) {
  return BPF_CORE_READ(task, group_leader, start_boottime) / NCCLSCOPE_NSEC_PER_TICK;
}

static __always_inline void current_proc(struct ncclscope_proc_key *key, __u32 op) {
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  key->tgid = bpf_get_current_pid_tgid() >> 32;
  key->op = op;
  key->start_ticks = start_ticks_of(task);
  key->cgroup_id = bpf_get_current_cgroup_id();
}

/* The calling thread's state, created at its first probed call with its process's identity. */
static __always_inline struct ncclscope_thread_state *thread_state(int create) {
  struct task_struct *task = bpf_get_current_task_btf();
  struct ncclscope_thread_state *t =
      bpf_task_storage_get(&threads, task, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
  if (!t) {
    if (create) bump(NCCLSCOPE_BPF_THREAD_STATE_LOST);
    return 0;
  }
  if (t->tgid == 0) {
    t->tgid = bpf_get_current_pid_tgid() >> 32;
    t->start_ticks = start_ticks_of(task);
  }
  return t;
}

/* current_proc() from the thread's cached identity: no reads of the task at every call. */
static __always_inline void thread_proc(const struct ncclscope_thread_state *t,
                                        struct ncclscope_proc_key *key, __u32 op, __u64 cgroup_id) {
  key->tgid = t->tgid;
  key->op = op;
  key->start_ticks = t->start_ticks;
  key->cgroup_id = cgroup_id;
}

static __always_inline __u32 op_slot_index(__u32 op) {
  return op >= NCCLSCOPE_OP_IBV_FIRST ? op - NCCLSCOPE_OP_IBV_FIRST + NCCLSCOPE_OP_NCCL_END : op;
}

/* The counts of (this process, its cgroup, op): through the thread's cached slot, or, the first
 * time (or after the slot was freed, or the thread changed cgroups), found or given a slot. */
static __always_inline struct ncclscope_call_counts *counts_of(struct ncclscope_thread_state *t,
                                                               __u32 op) {
  __u32 i = op_slot_index(op);
  if (i >= NCCLSCOPE_OP_SLOTS) return 0;
  struct ncclscope_slot_ref *ref = &t->slots[i];
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  __u32 index;
  struct ncclscope_call_counts *counts;
  if (ref->slot_plus_one != 0 && ref->cgroup_id == cgroup_id) {
    index = ref->slot_plus_one - 1;
    counts = bpf_map_lookup_elem(&call_counts, &index);
    if (counts && counts->generation == ref->generation) return counts;
  }
  struct ncclscope_proc_key key = {};
  thread_proc(t, &key, op, cgroup_id);
  __u32 *found = bpf_map_lookup_elem(&call_slots, &key);
  if (found) {
    index = *found;
  } else {
    if (bpf_map_pop_elem(&free_slots, &index) != 0) {
      bump(NCCLSCOPE_BPF_CALLS_FULL);
      return 0;
    }
    /* BPF_NOEXIST: another thread of the process may have given the key a slot meanwhile. */
    if (bpf_map_update_elem(&call_slots, &key, &index, BPF_NOEXIST) != 0) {
      bpf_map_push_elem(&free_slots, &index, 0);
      found = bpf_map_lookup_elem(&call_slots, &key);
      if (!found) {
        bump(NCCLSCOPE_BPF_CALLS_FULL);
        return 0;
      }
      index = *found;
    }
  }
  counts = bpf_map_lookup_elem(&call_counts, &index);
  if (!counts) {
    bump(NCCLSCOPE_BPF_CALLS_FULL);
    return 0;
  }
  ref->slot_plus_one = index + 1;
  ref->generation = counts->generation;
  ref->cgroup_id = cgroup_id;
  return counts;
}

static __always_inline void add_call(struct ncclscope_thread_state *t, __u32 op, __u64 calls_delta,
                                     __u64 bytes) {
  struct ncclscope_call_counts *counts = counts_of(t, op);
  if (!counts) return;
  if (calls_delta) __sync_fetch_and_add(&counts->calls, calls_delta);
  if (bytes) __sync_fetch_and_add(&counts->bytes, bytes);
}

static __always_inline void add_result(const struct ncclscope_thread_state *t, void *map,
                                       __u32 op, __s64 value) {
  struct ncclscope_result_key key = {};
  thread_proc(t, &key.proc, op, bpf_get_current_cgroup_id());
  key.value = value;
  __u64 *count = bpf_map_lookup_elem(map, &key);
  if (!count) {
    __u64 zero = 0;
    bpf_map_update_elem(map, &key, &zero, BPF_NOEXIST);
    count = bpf_map_lookup_elem(map, &key);
    if (!count) {
      bump(NCCLSCOPE_BPF_RESULTS_FULL);
      return;
    }
  }
  __sync_fetch_and_add(count, 1);
}

static __always_inline struct ncclscope_event *new_event(__u32 kind, __u32 op) {
  struct ncclscope_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    bump(NCCLSCOPE_BPF_EVENTS_LOST);
    return 0;
  }
  struct ncclscope_proc_key key = {};
  current_proc(&key, op);
  event->kind = kind;
  event->tgid = key.tgid;
  event->start_ticks = key.start_ticks;
  event->cgroup_id = key.cgroup_id;
  event->op = op;
  event->result = 0;
  event->handle = 0;
  event->nranks = -1;
  event->rank = -1;
  event->parent = 0;
  event->qp_num = 0;
  event->pad = 0;
  return event;
}

static __always_inline __u64 read_user_u64(__u64 address) {
  __u64 value = 0;
  if (address) bpf_probe_read_user(&value, sizeof(value), (const void *)address);
  return value;
}

static __always_inline __s32 read_user_s32(__u64 address) {
  __s32 value = -1;
  if (address) bpf_probe_read_user(&value, sizeof(value), (const void *)address);
  return value;
}

static __always_inline __u64 nccl_bytes(__u64 count, __u64 datatype) {
  if (datatype >= sizeof(kDatatypeSize)) return 0;
  return count * kDatatypeSize[datatype];
}

/* Decodes the arguments of `op` on entry: fills s->arg and returns the bytes to count.
 * x86-64 SysV: integer arguments in rdi, rsi, rdx, rcx, r8, r9 (PARM1..6), then the stack from
 * [rsp+8] on entry. ncclUniqueId (128 bytes) is passed by value in memory, so it takes no
 * register: in ncclCommInitRank(comm, nranks, commId, rank) rank is PARM3. */
static __always_inline __u64 decode_entry(struct pt_regs *ctx, __u32 op,
                                          struct ncclscope_stash *s) {
  switch (op) {
    case NCCLSCOPE_OP_ALL_REDUCE: /* (send, recv, count, type, op, comm, stream) */
    case NCCLSCOPE_OP_BROADCAST:  /* (send, recv, count, type, root, comm, stream) */
    case NCCLSCOPE_OP_REDUCE_SCATTER:
    case NCCLSCOPE_OP_GATHER:
    case NCCLSCOPE_OP_SCATTER:
      s->arg[0] = ctx->r9;
      return nccl_bytes(PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx));
    case NCCLSCOPE_OP_REDUCE: /* (send, recv, count, type, op, root, comm, stream): comm on stack */
      s->arg[0] = read_user_u64(PT_REGS_SP(ctx) + 8);
      return nccl_bytes(PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx));
    case NCCLSCOPE_OP_ALL_GATHER: /* (send, recv, sendcount, type, comm, stream) */
    case NCCLSCOPE_OP_ALL_TO_ALL:
      s->arg[0] = PT_REGS_PARM5(ctx);
      return nccl_bytes(PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx));
    case NCCLSCOPE_OP_BCAST: /* (buff, count, type, root, comm, stream) */
    case NCCLSCOPE_OP_SEND:  /* (buff, count, type, peer, comm, stream) */
    case NCCLSCOPE_OP_RECV:
      s->arg[0] = PT_REGS_PARM5(ctx);
      return nccl_bytes(PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx));
    case NCCLSCOPE_OP_COMM_INIT_RANK:          /* (comm*, nranks, commId by value, rank) */
    case NCCLSCOPE_OP_COMM_INIT_RANK_CONFIG:   /* (comm*, nranks, commId by value, rank, cfg) */
    case NCCLSCOPE_OP_COMM_INIT_RANK_SCALABLE: /* (comm*, nranks, myrank, nId, ids*, cfg) */
      s->arg[0] = PT_REGS_PARM1(ctx);
      s->arg[1] = (__u32)PT_REGS_PARM2(ctx);
      s->arg[2] = (__u32)PT_REGS_PARM3(ctx);
      return 0;
    case NCCLSCOPE_OP_COMM_INIT_ALL: /* (comm array, ndev, devlist) */
      s->arg[0] = PT_REGS_PARM1(ctx);
      s->arg[1] = (__u32)PT_REGS_PARM2(ctx);
      return 0;
    case NCCLSCOPE_OP_COMM_SPLIT: /* (comm, color, key, newcomm*, config) */
      s->arg[0] = PT_REGS_PARM1(ctx);
      s->arg[1] = PT_REGS_PARM4(ctx);
      return 0;
    case NCCLSCOPE_OP_COMM_COUNT:     /* (comm, int* count) */
    case NCCLSCOPE_OP_COMM_USER_RANK: /* (comm, int* rank) */
      s->arg[0] = PT_REGS_PARM1(ctx);
      s->arg[1] = PT_REGS_PARM2(ctx);
      return 0;
    case NCCLSCOPE_OP_IBV_MODIFY_QP: /* (qp, attr, attr_mask) */
      s->arg[0] = PT_REGS_PARM1(ctx);
      s->arg[1] = (PT_REGS_PARM3(ctx) & NCCLSCOPE_IBV_QP_STATE_MASK)
                      ? (__u32)read_user_s32(PT_REGS_PARM2(ctx))
                      : (__u64)-1;
      return 0;
    case NCCLSCOPE_OP_IBV_REG_MR:        /* (pd, addr, length, access) */
    case NCCLSCOPE_OP_IBV_REG_MR_IOVA2:  /* (pd, addr, length, iova, access) */
    case NCCLSCOPE_OP_IBV_REG_DMABUF_MR: /* (pd, offset, length, iova, fd, access) */
      s->arg[0] = PT_REGS_PARM3(ctx);    /* counted as bytes on success, at return */
      return 0;
    default:
      return 0;
  }
}

/* The thread's entry state for op's domain: NCCL and libibverbs calls nest independently. */
static __always_inline struct ncclscope_stash *call_of(struct ncclscope_thread_state *t,
                                                      __u32 op) {
  return op >= NCCLSCOPE_OP_IBV_FIRST ? &t->call[1] : &t->call[0];
}

SEC("uprobe")
int ncclscope_entry(struct pt_regs *ctx) {
  __u32 op = (__u32)bpf_get_attach_cookie(ctx);
  if (op >= NCCLSCOPE_OP_IBV_END) return 0;
  struct ncclscope_thread_state *t = thread_state(1);
  if (!t) return 0;
  struct ncclscope_stash *call = call_of(t, op);
  __u64 sp = PT_REGS_SP(ctx);
  if (call->depth && sp <= call->sp) {
    /* A probed function called from inside another one on this thread: not an API call of the
     * application. Count the depth so the returns pair up. At the outer call's own stack pointer
     * too: a tail call (ibv_reg_mr jumps to ibv_reg_mr_iova2) enters there. Above it, the outer
     * call is gone without its return probe firing: this call replaces it. */
    if (call->depth < 1024) call->depth++;
    return 0;
  }
  call->op = op;
  call->depth = 1;
  call->sp = sp;
  call->arg[0] = 0;
  call->arg[1] = 0;
  call->arg[2] = 0;
  __u64 bytes = decode_entry(ctx, op, call);
  add_call(t, op, 1, bytes);

  if (op == NCCLSCOPE_OP_COMM_DESTROY || op == NCCLSCOPE_OP_COMM_ABORT) {
    /* At entry: afterwards the pointer is freed, and an abort that hangs still counts. */
    struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_COMM_END, op);
    if (event) {
      event->handle = PT_REGS_PARM1(ctx);
      bpf_ringbuf_submit(event, 0);
    }
  }
  return 0;
}

static __always_inline void nccl_return(struct ncclscope_thread_state *t,
                                        const struct ncclscope_stash *s, __s32 rc) {
  __u32 op = s->op;
  if (rc != 0 && rc != NCCLSCOPE_NCCL_IN_PROGRESS) add_result(t, &results, op, rc);
  switch (op) {
    case NCCLSCOPE_OP_COMM_INIT_RANK:
    case NCCLSCOPE_OP_COMM_INIT_RANK_CONFIG:
    case NCCLSCOPE_OP_COMM_INIT_RANK_SCALABLE: {
      struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_COMM_INIT, op);
      if (!event) return;
      event->result = rc;
      event->handle = read_user_u64(s->arg[0]);
      event->nranks = (__s32)s->arg[1];
      event->rank = (__s32)s->arg[2];
      bpf_ringbuf_submit(event, 0);
      return;
    }
    case NCCLSCOPE_OP_COMM_INIT_ALL: {
      __u32 ndev = (__u32)s->arg[1];
      for (__u32 i = 0; i < NCCLSCOPE_MAX_INIT_ALL; i++) {
        if (i >= ndev || (rc != 0 && i > 0)) break;
        struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_COMM_INIT, op);
        if (!event) return;
        event->result = rc;
        event->handle = rc == 0 ? read_user_u64(s->arg[0] + 8ULL * i) : 0;
        event->nranks = (__s32)ndev;
        event->rank = (__s32)i;
        bpf_ringbuf_submit(event, 0);
      }
      return;
    }
    case NCCLSCOPE_OP_COMM_SPLIT: {
      __u64 comm = read_user_u64(s->arg[1]);
      if (rc == 0 && comm == 0) return; /* NCCL_SPLIT_NOCOLOR: this rank joined no communicator */
      struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_COMM_INIT, op);
      if (!event) return;
      event->result = rc;
      event->handle = comm;
      event->parent = s->arg[0];
      bpf_ringbuf_submit(event, 0);
      return;
    }
    case NCCLSCOPE_OP_COMM_COUNT:
    case NCCLSCOPE_OP_COMM_USER_RANK: {
      if (rc != 0) return;
      struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_COMM_INFO, op);
      if (!event) return;
      event->handle = s->arg[0];
      if (op == NCCLSCOPE_OP_COMM_COUNT) {
        event->nranks = read_user_s32(s->arg[1]);
      } else {
        event->rank = read_user_s32(s->arg[1]);
      }
      bpf_ringbuf_submit(event, 0);
      return;
    }
    default:
      return;
  }
}

static __always_inline void ibv_return(struct ncclscope_thread_state *t,
                                       const struct ncclscope_stash *s, __u64 rc) {
  __u32 op = s->op;
  switch (op) {
    case NCCLSCOPE_OP_IBV_CREATE_QP:
      if (rc == 0) add_result(t, &results, op, NCCLSCOPE_RESULT_NULL);
      return;
    case NCCLSCOPE_OP_IBV_REG_MR:
    case NCCLSCOPE_OP_IBV_REG_MR_IOVA2:
    case NCCLSCOPE_OP_IBV_REG_DMABUF_MR:
      if (rc == 0) {
        add_result(t, &results, op, NCCLSCOPE_RESULT_NULL);
      } else {
        add_call(t, op, 0, s->arg[0]);
      }
      return;
    case NCCLSCOPE_OP_IBV_MODIFY_QP: {
      __s32 err = (__s32)rc;
      if (err != 0) {
        add_result(t, &results, op, err);
        return;
      }
      __u64 state = s->arg[1];
      if (state >= NCCLSCOPE_IBV_QPS_COUNT) return; /* attr_mask did not change the state */
      add_result(t, &qp_states, op, (__s64)state);
      if (state == NCCLSCOPE_IBV_QPS_ERR) {
        struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_QP_ERROR, op);
        if (!event) return;
        event->handle = s->arg[0];
        __u32 qp_num = 0;
        bpf_probe_read_user(&qp_num, sizeof(qp_num),
                            (const void *)(s->arg[0] + NCCLSCOPE_IBV_QP_NUM_OFFSET));
        event->qp_num = qp_num;
        bpf_ringbuf_submit(event, 0);
      }
      return;
    }
    default: /* ibv_destroy_qp, ibv_dereg_mr: int errno */
      if ((__s32)rc != 0) add_result(t, &results, op, (__s32)rc);
      return;
  }
}

SEC("uretprobe")
int ncclscope_return(struct pt_regs *ctx) {
  __u32 op = (__u32)bpf_get_attach_cookie(ctx);
  if (op >= NCCLSCOPE_OP_IBV_END) return 0;
  struct ncclscope_thread_state *t = thread_state(0);
  if (!t) return 0; /* entry missed (attached mid-call): nothing to pair with */
  struct ncclscope_stash *call = call_of(t, op);
  if (call->depth == 0) return 0;
  if (call->depth > 1) {
    call->depth--;
    return 0;
  }
  struct ncclscope_stash copy = *call;
  call->depth = 0;
  if (copy.op < NCCLSCOPE_OP_IBV_FIRST) {
    nccl_return(t, &copy, (__s32)PT_REGS_RC(ctx));
  } else {
    ibv_return(t, &copy, PT_REGS_RC(ctx));
  }
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ncclscope_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm) {
  struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_EXEC, 0);
  if (event) bpf_ringbuf_submit(event, 0);
  return 0;
}

/* Fires for every exiting thread; reports the process exit when it was the last thread of its
 * process (signal->live reached 0). The thread's entry state goes with its task storage. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ncclscope_exit, struct task_struct *task) {
  if (BPF_CORE_READ(task, signal, live.counter) != 0) return 0;
  struct ncclscope_event *event = new_event(NCCLSCOPE_EVENT_EXIT, 0);
  if (event) bpf_ringbuf_submit(event, 0);
  return 0;
}
