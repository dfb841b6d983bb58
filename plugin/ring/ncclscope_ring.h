/*
 * ncclscope ring format, version 1: the shared-memory file through which the NCCL profiler plugin
 * (libnccl-profiler-ncclscope.so, the producer) hands records to the node agent (the consumer).
 * This header IS the format specification; C11 and C++ include it alike.
 *
 * One file per process, <ring_dir>/ncclscope-<pid>-<created_ns>.ring, created under a temporary
 * name and renamed once the header is complete. The plugin holds a shared flock() on it for its
 * whole life: the agent knows the owner is gone (in any pid namespace) when it can take an
 * exclusive flock. Layout (all offsets in bytes from the start of the file, little-endian):
 *
 *   [0, 4096)                      struct ncclscope_ring_header
 *   [comm_table_offset, ...)       comm_slot_count x struct ncclscope_comm_slot   (512 B each)
 *   [count_table_offset, ...)      comm_slot_count x count_keys x struct ncclscope_op_count
 *                                  (24 B each): slot i's exact op counts (EXACT_COUNTS only)
 *   [lanes_offset, ...)            lane_count x struct ncclscope_lane             (128 B each)
 *   [data_offset, file_size)       lane_count x lane_capacity records             (256 B each);
 *                                  lane i's slot s is at data_offset + (i*lane_capacity + s)*256
 *
 * Lanes. Each lane is a single-producer/single-consumer queue of fixed-size records. A writer
 * thread takes a lane with a try-lock (`busy`, compare-and-swap 0 -> 1; it never waits: if its lane
 * is busy or full it tries the next few lanes), writes the record into slot head % lane_capacity,
 * then publishes it by storing head + 1 with release order. A record never overwrites one the agent
 * has not consumed (head - tail <= lane_capacity): when every lane tried is full the record is
 * dropped and the writer's lane's `dropped` is incremented (atomically); when every lane tried is
 * busy it is dropped and counted in counters[NCCLSCOPE_CTR_DROPPED_CONTENTION]. The agent reads
 * head (acquire), copies records [tail, head), and then stores the new tail (release). Records
 * written together (an op and its channel continuations) are published by one head store.
 *
 * Trust. The agent treats everything here as untrusted input (any pod can write the directory): it
 * validates header geometry against the file size without arithmetic that can wrap, every record's
 * type, layout, checksum and position, and every index and string, within the bounds of the
 * agent-side block below (docs/trust-model.md).
 * The plugin never trusts anything the agent writes either (it keeps its own copy of the geometry
 * and only reads `tail` and the control block, both range-checked).
 *
 * Clocks. Host times (`*_ns` unless stated) are CLOCK_REALTIME nanoseconds, one clock for every
 * process on the node. GPU times (`gpu_*`) are the GPU's %globaltimer as NCCL reports it (ns).
 */
#ifndef NCCLSCOPE_RING_H_
#define NCCLSCOPE_RING_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#define NCCLSCOPE_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define NCCLSCOPE_CAST(type, value) static_cast<type>(value)
#define NCCLSCOPE_NULL nullptr
extern "C" {
#else
#define NCCLSCOPE_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define NCCLSCOPE_CAST(type, value) ((type)(value))
#define NCCLSCOPE_NULL NULL
#endif

/* "NCSCRNG1" read as a little-endian uint64_t. */
#define NCCLSCOPE_RING_MAGIC 0x31474E524353434EULL
#define NCCLSCOPE_RING_VERSION 1u
#define NCCLSCOPE_RING_HEADER_SIZE 4096u
#define NCCLSCOPE_RECORD_SIZE 256u
#define NCCLSCOPE_COMM_SLOT_SIZE 512u
#define NCCLSCOPE_LANE_SIZE 128u
#define NCCLSCOPE_RING_SUFFIX ".ring"

/* Bounds the agent enforces on the geometry (and the plugin never exceeds). */
#define NCCLSCOPE_MAX_LANES 256u
#define NCCLSCOPE_MAX_LANE_CAPACITY (1u << 20)
#define NCCLSCOPE_MAX_COMM_SLOTS 65536u
#define NCCLSCOPE_MAX_CHANNELS 64u /* NCCL's MAXCHANNELS in 2.27 through 2.30 */

/* ---- Agent-side bounds (the trust model: docs/trust-model.md) ---------------------------- */
/* What the agent accepts from any ring, whoever wrote it. A ring or record beyond one of these is
 * rejected or skipped and counted; the plugin never writes beyond them. */
#define NCCLSCOPE_MAX_NRANKS (1 << 20) /* a communicator's nranks; every rank is below it */
#define NCCLSCOPE_MAX_REGION_OFFSET (1ull << 40) /* header offsets, checked before any sum */
/* file_size: 1 GiB of records (NCCLSCOPE_RING_SIZE's maximum) plus the largest comm table (32
 * MiB) and count table (192 MiB) */
#define NCCLSCOPE_AGENT_MAX_RING_FILE_BYTES ((1ull << 30) + (256ull << 20))
#define NCCLSCOPE_AGENT_MAX_COMMS_PER_RING 256u /* live comm-table slots read per ring */
#define NCCLSCOPE_MAX_RING_NAME 64u /* "ncclscope-<pid>-<created_ns>.ring" is at most 46 bytes */

/* ---- Ring header ------------------------------------------------------------------------- */

enum ncclscope_ring_state {
  NCCLSCOPE_RING_LIVE = 1,   /* the process may still write */
  NCCLSCOPE_RING_CLOSED = 2, /* every communicator was finalized; nothing more will be written */
};

/* What a plugin writes that older ones did not (header.features), so the agent knows how to read a
 * ring whatever the plugin's age. */
enum ncclscope_ring_feature {
  /* Every operation is counted exactly per (communicator, rank, function, algorithm, protocol,
   * size class) in the ring's count table (count_table_offset): the agent takes operation and
   * byte counts from there for the ops whose records carry NCCLSCOPE_OP_COUNTED, not from the
   * records (which sampling may thin). */
  NCCLSCOPE_FEATURE_EXACT_COUNTS = 1u << 0,
};

/* Cumulative plugin-side counters (header.counters[i]), monotonic for the process's life. */
enum ncclscope_counter {
  NCCLSCOPE_CTR_DROPPED_CONTENTION = 0, /* records dropped: every lane tried was busy */
  NCCLSCOPE_CTR_OPS_FILTERED = 1,       /* ops below the minimum message size, not recorded */
  NCCLSCOPE_CTR_HANDLES_EXHAUSTED = 2,  /* events not tracked: a handle pool was full */
  NCCLSCOPE_CTR_INVALID_HANDLE = 3,     /* stop/record with an unknown, stale or foreign handle */
  NCCLSCOPE_CTR_LATE_EVENT = 4,         /* child event for an op already completed */
  NCCLSCOPE_CTR_OPS_INCOMPLETE = 5,     /* ops finalized without full GPU timing */
  NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT = 6, /* communicators beyond comm_slot_count */
  NCCLSCOPE_CTR_FOREIGN_PROXY_OPS = 7,  /* ProxyOps raised for another process (PXN) */
  NCCLSCOPE_CTR_UNKNOWN_EVENTS = 8,     /* event types or states the plugin does not handle */
  /* 9: reserved */
  NCCLSCOPE_CTR_OPS_FLUSHED = 10,          /* ops still in flight when their communicator ended */
  NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK = 11, /* ProxyOps NCCL never progresses through the network
                                            transport (CollNet, P2P copy engine, SHM memcpy):
                                            released without a record */
  NCCLSCOPE_CTR_CHAIN_ERRORS = 12,         /* calls into the chained profiler that failed */
  NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN = 13,   /* ops whose mask copy NCCL took may differ from the
                                            plugin's in KernelCh (another thread changed it
                                            around the call): they wait for what comes */
  NCCLSCOPE_CTR_GOVERNOR_DOWN = 14,        /* overhead governor steps that lowered sampling */
  NCCLSCOPE_CTR_GOVERNOR_UP = 15,          /* overhead governor steps that restored sampling */
  NCCLSCOPE_CTR_PLUGIN_TIME_NS = 16,       /* estimated ns the plugin spent inside NCCL's calls
                                              (the governor's sampled timing, scaled up) */
  NCCLSCOPE_CTR_OPS_NOT_RECORDED = 17,     /* ops left out by record_one_in (counted in the comm
                                              table, their records and network records skipped) */
  NCCLSCOPE_CTR_COUNT_KEYS_OVERFLOW = 18,  /* ops counted under their function alone: their
                                              communicator had used NCCLSCOPE_COUNT_KEYS less
                                              NCCLSCOPE_FUNC_COUNT other keys already */
  NCCLSCOPE_COUNTER_MAX = 19               /* counters[] grows into reserved1, up to offset 512 */
};

/* Control bits that the job's environment pinned (header.pinned_controls): the plugin ignores
 * the agent's value for these. */
enum ncclscope_control_bit {
  NCCLSCOPE_CONTROL_EVENT_MASK = 1u << 0,
  NCCLSCOPE_CONTROL_MIN_BYTES = 1u << 1,
  NCCLSCOPE_CONTROL_DUTY_PERIOD = 1u << 2,
  NCCLSCOPE_CONTROL_KERNEL_DUTY = 1u << 3,
  NCCLSCOPE_CONTROL_PROXY_DUTY = 1u << 4,
  NCCLSCOPE_CONTROL_OVERHEAD_BUDGET = 1u << 5,
  NCCLSCOPE_CONTROL_RECORD_ONE_IN = 1u << 6,
  NCCLSCOPE_CONTROL_RECORD_RATE_LIMIT = 1u << 7,
};

/* The controls file, <ring_dir>/ncclscope.controls: `key=value` lines the agent writes from its
 * config and the plugin reads at init (before it has a ring whose header could carry controls),
 * each value in the syntax of the key's NCCLSCOPE_* environment variable. These are its name and
 * keys; the agent writes the values of the header's controls (below) with them, exactly (per mille
 * as a percentage with one decimal, ppm with four). */
#define NCCLSCOPE_CONTROLS_FILE "ncclscope.controls"
#define NCCLSCOPE_KEY_EVENTS "events"
#define NCCLSCOPE_KEY_MIN_BYTES "min_bytes"
#define NCCLSCOPE_KEY_DUTY_PERIOD "duty_period"
#define NCCLSCOPE_KEY_KERNEL_DUTY "kernel_duty"
#define NCCLSCOPE_KEY_PROXY_DUTY "proxy_duty"
#define NCCLSCOPE_KEY_OVERHEAD_BUDGET "overhead_budget"
#define NCCLSCOPE_KEY_RING_SIZE "ring_size"
#define NCCLSCOPE_KEY_RECORD_ONE_IN "record_one_in"
#define NCCLSCOPE_KEY_RECORD_RATE_LIMIT "record_rate_limit"

/* Agent -> plugin controls, a seqlock: the agent makes `seq` odd, writes the fields, then makes it
 * even (release). The plugin applies a snapshot only when `seq` is even, non-zero, unchanged across
 * its read, and different from the last one it applied. Values out of range are ignored. */
struct ncclscope_controls {
  uint32_t seq;
  uint32_t event_mask;          /* NCCL profiler event bits (Coll 0x2, P2p 0x4, ProxyOp 0x8,
                                   ProxyStep 0x10, KernelCh 0x40, CeColl 0x1000); others ignored */
  uint64_t min_bytes;           /* ops with fewer bytes are counted (OPS_FILTERED), not recorded */
  uint64_t duty_period_ns;      /* length of one duty cycle (>= 1 ms) */
  uint32_t kernel_duty_pm;      /* per mille of each period with KernelCh (GPU timing) enabled */
  uint32_t proxy_duty_pm;       /* per mille of each period with ProxyOp/ProxyStep enabled */
  uint32_t overhead_budget_ppm; /* overhead governor budget: the plugin's share of one core per
                                   local GPU, parts per million (0: governor off); used only when
                                   `flags` has NCCLSCOPE_CONTROLS_HAS_BUDGET */
  uint32_t flags;               /* enum ncclscope_controls_flag */
  uint32_t record_one_in;       /* write the records of 1 op in this many (1..65536), chosen by
                                   ncclscope_op_recorded(); used only when `flags` has
                                   NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN */
  uint32_t record_rate_limit;   /* ops per second the process records at most (0: no limit):
                                   above it, record_one_in is multiplied by the smallest power of
                                   two that brings it under; used only with
                                   NCCLSCOPE_CONTROLS_HAS_RECORD_RATE_LIMIT */
  uint8_t reserved[16];
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_controls) == 64, "controls size");

/* Which optional controls an agent wrote (an agent that predates a field leaves it and its flag 0,
 * and the plugin keeps its own value). */
enum ncclscope_controls_flag {
  NCCLSCOPE_CONTROLS_HAS_BUDGET = 1u << 0,
  NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN = 1u << 1,
  NCCLSCOPE_CONTROLS_HAS_RECORD_RATE_LIMIT = 1u << 2,
};

#define NCCLSCOPE_MAX_RECORD_ONE_IN 65536u

/* The overhead governor's state (header.governor, plugin-written, each field on its own). The
 * plugin times every call of 1 op in `sample_every` (its handles carry a bit) and, once per
 * evaluation window (at least one duty-cycle period), compares its time share with the budget:
 * over it, it lowers the proxy duty cycle, then the kernel_ch one, through the same event-mask
 * mechanism as the duty cycle itself; well under it, it steps them back up towards what the
 * controls ask for. */
enum ncclscope_governor_level {
  NCCLSCOPE_GOVERNOR_OFF = 0,      /* no budget */
  NCCLSCOPE_GOVERNOR_AS_ASKED = 1, /* sampling as the controls ask */
  NCCLSCOPE_GOVERNOR_PROXY = 2,    /* the proxy duty cycle is lowered (maybe to 0) */
  NCCLSCOPE_GOVERNOR_KERNEL = 3,   /* proxy events are off and the kernel_ch duty cycle lowered */
  NCCLSCOPE_GOVERNOR_FLOOR = 4,    /* both off and still over budget: nothing left to lower */
  NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE = 5, /* NCCL replaced the event mask (RAS CONTROL
                                           PROFILER_MASK, NCCL 2.31+): the plugin follows the
                                           mask in nccl_mask and neither writes nor governs it */
};
struct ncclscope_governor_state {
  uint32_t level;          /* enum ncclscope_governor_level */
  uint32_t budget_ppm;     /* budget in force (share of one core per local GPU, ppm) */
  uint32_t kernel_duty_pm; /* duty cycles in force, after the governor (per mille) */
  uint32_t proxy_duty_pm;
  uint32_t load_ppm;     /* the last window: estimated plugin time / window / local GPUs (ppm) */
  uint32_t local_gpus;   /* the GPUs (CUDA devices of live communicators) it was divided by */
  uint64_t op_ns;        /* the last window: mean plugin time per timed op (ns) */
  uint64_t evaluated_ns; /* host time of the last evaluation (0: none yet) */
  uint32_t sample_every; /* 1 op in this many is timed */
  uint32_t windows;      /* windows evaluated so far */
  /* Recording (plugin.record_one_in, plugin.record_rate_limit): 0 before the first window. */
  uint32_t record_one_in; /* 1 op in this many recorded now: record_one_in x the rate factor */
  uint32_t op_rate;       /* ops per second the process started in the last second or more */
  uint32_t nccl_mask;     /* the event mask in NCCL's int at the last evaluation */
  uint8_t reserved[4];
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_governor_state) == 64, "governor size");

struct ncclscope_ring_header {
  /* Identity: written once, before the file gets its final name. */
  uint64_t magic;             /* NCCLSCOPE_RING_MAGIC */
  uint32_t version;           /* NCCLSCOPE_RING_VERSION */
  uint32_t header_size;       /* NCCLSCOPE_RING_HEADER_SIZE */
  uint64_t file_size;         /* total bytes; the file is never resized */
  uint32_t record_size;       /* NCCLSCOPE_RECORD_SIZE */
  uint32_t lane_count;        /* 1..NCCLSCOPE_MAX_LANES */
  uint32_t lane_capacity;     /* records per lane, a power of two */
  uint32_t comm_slot_count;   /* entries in the comm table */
  uint64_t comm_table_offset; /* 64-byte aligned */
  uint64_t lanes_offset;      /* 64-byte aligned */
  uint64_t data_offset;       /* 64-byte aligned */
  int32_t pid;                /* getpid() in the writer's own pid namespace */
  uint32_t nccl_abi;          /* profiler ABI NCCL chose (1 to 7); 0 before the first init */
  uint64_t created_ns;        /* host time the ring was created */
  char hostname[64];          /* gethostname(); the pod name in Kubernetes. NUL-terminated */
  char plugin_version[32];    /* NUL-terminated */
  char job_id[64];            /* NCCLSCOPE_JOB_ID, else SLURM_JOB_ID, else empty */
  uint32_t features;          /* enum ncclscope_ring_feature: what this plugin writes */
  uint8_t reserved0[12];

  /* Live state (plugin-written), offset 256. */
  uint32_t state;               /* enum ncclscope_ring_state */
  uint32_t effective_mask;      /* the NCCL event mask currently in force */
  uint32_t applied_control_seq; /* last controls.seq applied (0: none) */
  uint32_t pinned_controls;     /* enum ncclscope_control_bit set by the job's environment */
  uint64_t closed_ns;           /* host time the ring was closed, 0 while live */
  uint64_t counters[NCCLSCOPE_COUNTER_MAX]; /* enum ncclscope_counter */
  uint8_t reserved1[512 - 256 - 24 - 8 * NCCLSCOPE_COUNTER_MAX];
  struct ncclscope_governor_state governor; /* offset 512 */
  /* Comm slots ever taken: slots are handed out from 0 upwards and reused only after they were,
   * so every slot in use is below this. The agent reads only [0, comm_slots_used) of the table
   * (scanning all comm_slot_count slots touched one cold cache line each, every pass); 0 means
   * "not kept" (rings of plugins before this field, whose reserved bytes are 0): read them all. */
  uint32_t comm_slots_used; /* offset 576 */
  /* The count table (features EXACT_COUNTS; both 0 otherwise): count_keys entries per comm slot
   * (NCCLSCOPE_COUNT_KEYS), 64-byte aligned, between the comm table and the lanes. */
  uint32_t count_keys;         /* offset 580 */
  uint64_t count_table_offset; /* offset 584 */
  uint8_t reserved1b[1024 - 512 - 64 - 16];

  /* Agent-written, offset 1024. */
  struct ncclscope_controls controls;
  uint8_t reserved2[NCCLSCOPE_RING_HEADER_SIZE - 1024 - 64];
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_ring_header) == NCCLSCOPE_RING_HEADER_SIZE,
                        "header size");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, hostname) == 80, "hostname");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, state) == 256, "state");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, counters) == 280, "counters");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, governor) == 512, "governor");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, comm_slots_used) == 576,
                        "comm_slots_used");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, count_table_offset) == 584,
                        "count_table_offset");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_ring_header, controls) == 1024, "controls");

/* ---- Lanes ------------------------------------------------------------------------------ */

struct ncclscope_lane {
  /* Producer cache line. */
  uint64_t head;    /* records published; the next record goes to slot head % lane_capacity */
  uint64_t dropped; /* records dropped because the lanes tried were full */
  uint32_t busy;    /* writer try-lock: 0 free, 1 held */
  uint32_t reserved0;
  uint8_t pad0[40];
  /* Consumer cache line. */
  uint64_t tail; /* records the agent consumed */
  uint8_t pad1[56];
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_lane) == NCCLSCOPE_LANE_SIZE, "lane size");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_lane, tail) == 64, "tail line");

/* ---- Comm table: one slot per live communicator (per rank in this process) --------------- */

enum ncclscope_comm_state {
  NCCLSCOPE_COMM_FREE = 0,
  NCCLSCOPE_COMM_LIVE = 1,
  NCCLSCOPE_COMM_FINALIZED = 2, /* kept readable until the slot is reused */
};

/* One recently enqueued op (comm slot `recent`, indexed by op_index % NCCLSCOPE_RECENT_OPS). */
struct ncclscope_recent_op {
  uint64_t enqueue_ns;
  uint32_t seq_low; /* low 32 bits of the op's seq */
  uint8_t func;     /* enum ncclscope_func */
  uint8_t kind;     /* enum ncclscope_op_kind */
  uint16_t reserved;
};
#define NCCLSCOPE_RECENT_OPS 8u

struct ncclscope_comm_slot {
  /* Identity, guarded by `version`: odd while the plugin rewrites the slot (seqlock). Under ABI
   * v1-v3 the identity arrives with the first op: until then comm_id is 0 and rank -1, and
   * nranks and nnodes stay 0 (unknown). */
  uint32_t version;
  uint32_t state;   /* enum ncclscope_comm_state */
  uint64_t comm_id; /* NCCL commHash: identical on every rank of the communicator */
  uint64_t context; /* the plugin's context handle value (joins PXN proxy ops to this comm) */
  int32_t rank;
  int32_t nranks;
  int32_t nnodes;
  int32_t cuda_device; /* CUDA device ordinal at init, -1 when unknown */
  uint64_t init_ns;
  uint64_t finalize_ns; /* 0 while live */
  char name[128];       /* NCCL commName, NUL-terminated, empty when NCCL gave none */
  char gpu_uuid[48];    /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", empty when unknown */
  char pci_bus_id[24];  /* "0000:19:00.0", empty when unknown */

  /* Enqueue side, updated by the thread that enqueues ops (offset 256). */
  uint64_t ops_enqueued;
  uint64_t last_enqueue_ns;
  uint64_t last_enqueue_seq;
  uint32_t last_enqueue_func; /* enum ncclscope_func */
  uint32_t reserved1;
  uint8_t pad1[32];

  /* Completion side, updated by whichever thread observes completion (offset 320). */
  uint64_t ops_completed;
  uint64_t last_complete_ns;
  uint64_t last_complete_seq;
  uint32_t last_complete_func;
  uint32_t reserved2;
  uint8_t pad2[32];

  /* The last NCCLSCOPE_RECENT_OPS enqueued ops (offset 384): with ops_enqueued - ops_completed
   * in flight, the oldest one still in flight is recent[ops_completed % 8] (ops of one
   * communicator complete in order). */
  struct ncclscope_recent_op recent[NCCLSCOPE_RECENT_OPS];
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_comm_slot) == NCCLSCOPE_COMM_SLOT_SIZE,
                        "comm slot size");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_comm_slot, ops_enqueued) == 256, "enqueue line");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_comm_slot, ops_completed) == 320,
                        "complete line");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_comm_slot, recent) == 384, "recent");

/* ---- Records (NCCLSCOPE_RECORD_SIZE bytes each, zero-padded) ------------------------------ */

enum ncclscope_record_type {
  NCCLSCOPE_REC_COMM_INIT = 1,     /* struct ncclscope_comm_init_record */
  NCCLSCOPE_REC_COMM_FINALIZE = 2, /* struct ncclscope_comm_finalize_record */
  NCCLSCOPE_REC_OP = 3,            /* struct ncclscope_op_record: one per completed op */
  NCCLSCOPE_REC_OP_CHANNELS = 4,   /* struct ncclscope_op_channels_record: more channel times */
  NCCLSCOPE_REC_PROXY_OP = 5,      /* struct ncclscope_proxy_op_record: one per network op */
  NCCLSCOPE_REC_OP_DETAIL = 6,     /* struct ncclscope_op_detail_record: user tag, kernel variant */
  NCCLSCOPE_REC_OP_PHASES = 7,     /* struct ncclscope_op_phases_record: kernel phases (v7) */
  NCCLSCOPE_REC_TYPE_MAX = 7
};

struct ncclscope_record_header {
  uint16_t type;     /* enum ncclscope_record_type */
  uint16_t layout;   /* layout version of this record type: 1 */
  uint32_t checksum; /* ncclscope_checksum() over the whole record, this field taken as 0 */
  uint64_t position; /* lane position (head value) the record was published at */
};
#define NCCLSCOPE_RECORD_LAYOUT 1u

/* Op kinds, functions, datatypes, algorithms, protocols: small codes instead of NCCL's strings. */
enum ncclscope_op_kind { NCCLSCOPE_KIND_COLL = 1, NCCLSCOPE_KIND_P2P = 2, NCCLSCOPE_KIND_CE = 3 };

/* What, besides the communicator and seq, names an op alike on every rank that has it: the
 * function for a collective (seq is NCCL's seqNumber per (comm, func), equal across ranks), the
 * pair of ranks for p2p (seq is our count per (comm, direction, peer): the k-th send from a to b
 * and b's k-th receive from a share the pair and k). */
static inline uint64_t ncclscope_op_sample_key(unsigned kind, unsigned func, int32_t rank,
                                               int32_t peer) {
  uint64_t lo = rank < peer ? rank : peer;
  uint64_t hi = rank < peer ? peer : rank;
  if (kind != NCCLSCOPE_KIND_P2P) return func;
  return (1ull << 63) | ((lo & 0xFFFFFFFFull) << 31) | (hi & 0xFFFFFFFFull);
}

/* Whether the op (comm_id, key, seq) has records when 1 op in `one_in` is recorded, `key` from
 * ncclscope_op_sample_key(). A function of what every rank knows alike, so all ranks record the
 * same collectives (the agent's last-arrival matcher needs each collective from all its ranks)
 * and a send and its receive agree. A hash, not seq % one_in: a job whose iteration issues
 * one_in collectives of a function would otherwise always record the same one of them; and with
 * the function and the pair in it, the functions and peers of a communicator are drawn apart (a
 * draw shared by all of them makes the estimates far noisier). An op recorded at 1 in N is also
 * recorded at 1 in k for every k that divides N, so ranks that briefly disagree (a new setting
 * reaches processes at different times) still record the same ops of the coarser setting. */
static inline int ncclscope_op_recorded(uint64_t comm_id, uint64_t key, uint64_t seq,
                                        uint32_t one_in) {
  uint64_t x;
  if (one_in <= 1u) return 1;
  x = comm_id ^ (seq * 0x9E3779B97F4A7C15ull) ^ (key * 0xD6E8FEB86659FD93ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (x % one_in) == 0u;
}

/* The ops a record stands for, from its `weight` field: 0 (written before the field) is 1. */
static inline uint32_t ncclscope_record_weight(uint32_t weight) {
  return weight == 0u ? 1u : weight;
}

enum ncclscope_func {
  NCCLSCOPE_FUNC_UNKNOWN = 0,
  NCCLSCOPE_FUNC_ALL_REDUCE = 1,
  NCCLSCOPE_FUNC_ALL_GATHER = 2,
  NCCLSCOPE_FUNC_REDUCE_SCATTER = 3,
  NCCLSCOPE_FUNC_BROADCAST = 4,
  NCCLSCOPE_FUNC_REDUCE = 5,
  NCCLSCOPE_FUNC_SEND = 6,
  NCCLSCOPE_FUNC_RECV = 7,
  NCCLSCOPE_FUNC_SEND_RECV = 8,
  NCCLSCOPE_FUNC_ALL_TO_ALL = 9,
  NCCLSCOPE_FUNC_GATHER = 10,
  NCCLSCOPE_FUNC_SCATTER = 11,
  NCCLSCOPE_FUNC_ALL_GATHER_V = 12,
  NCCLSCOPE_FUNC_PUT_SIGNAL = 13,
  NCCLSCOPE_FUNC_SIGNAL = 14,
  NCCLSCOPE_FUNC_WAIT_SIGNAL = 15,
  NCCLSCOPE_FUNC_COUNT = 16
};

/* datatype 0 is NCCL's "Unknown", which NCCL 2.28-2.30 send for ncclUint8 (no case in their
 * ncclDatatypeToString): such ops are sized at 1 byte per element and flagged
 * NCCLSCOPE_OP_DATATYPE_ASSUMED. */
enum ncclscope_datatype {
  NCCLSCOPE_DT_UNKNOWN = 0,
  NCCLSCOPE_DT_INT8 = 1,
  NCCLSCOPE_DT_UINT8 = 2,
  NCCLSCOPE_DT_INT32 = 3,
  NCCLSCOPE_DT_UINT32 = 4,
  NCCLSCOPE_DT_INT64 = 5,
  NCCLSCOPE_DT_UINT64 = 6,
  NCCLSCOPE_DT_FLOAT16 = 7,
  NCCLSCOPE_DT_FLOAT32 = 8,
  NCCLSCOPE_DT_FLOAT64 = 9,
  NCCLSCOPE_DT_BFLOAT16 = 10,
  NCCLSCOPE_DT_FLOAT8E4M3 = 11,
  NCCLSCOPE_DT_FLOAT8E5M2 = 12,
  NCCLSCOPE_DT_COUNT = 13
};

enum ncclscope_algo {
  NCCLSCOPE_ALGO_UNKNOWN = 0,
  NCCLSCOPE_ALGO_TREE = 1,
  NCCLSCOPE_ALGO_RING = 2,
  NCCLSCOPE_ALGO_COLLNET_DIRECT = 3,
  NCCLSCOPE_ALGO_COLLNET_CHAIN = 4,
  NCCLSCOPE_ALGO_NVLS = 5,
  NCCLSCOPE_ALGO_NVLS_TREE = 6,
  NCCLSCOPE_ALGO_PAT = 7,
  NCCLSCOPE_ALGO_NONE = 8,      /* p2p and CE ops have no algorithm */
  NCCLSCOPE_ALGO_SYMMETRIC = 9, /* a symmetric-memory kernel (v7): the variant names it */
  NCCLSCOPE_ALGO_COUNT = 10
};

enum ncclscope_proto {
  NCCLSCOPE_PROTO_UNKNOWN = 0,
  NCCLSCOPE_PROTO_LL = 1,
  NCCLSCOPE_PROTO_LL128 = 2,
  NCCLSCOPE_PROTO_SIMPLE = 3,
  NCCLSCOPE_PROTO_NONE = 4, /* p2p and CE ops */
  NCCLSCOPE_PROTO_COUNT = 5
};

/* ncclscope_op_record.flags */
enum ncclscope_op_flag {
  NCCLSCOPE_OP_GPU_TIMING = 1u << 0,           /* gpu_start_ns/gpu_end_ns and ch[] are valid */
  NCCLSCOPE_OP_GPU_TIMING_PARTIAL = 1u << 1,   /* fewer timed channels than n_channels */
  NCCLSCOPE_OP_DATATYPE_ASSUMED = 1u << 2,     /* "Unknown" datatype sized as 1 byte/element */
  NCCLSCOPE_OP_FLUSHED = 1u << 3,              /* communicator ended with the op in flight */
  NCCLSCOPE_OP_NO_ENQUEUE_STOP = 1u << 4,      /* NCCL never stopped the Coll/P2p event */
  NCCLSCOPE_OP_TIME_SATURATED = 1u << 5,       /* a channel offset did not fit in 32 bits */
  NCCLSCOPE_OP_KERNEL_NOT_REQUESTED = 1u << 6, /* KernelCh was off (mask or duty cycle) */
  NCCLSCOPE_OP_P2P_SEQ_PER_PEER = 1u << 7,     /* seq counts ops per (comm, func, peer) */
  NCCLSCOPE_OP_PROXY_REQUESTED = 1u << 8,      /* ProxyOp/ProxyStep were on at enqueue: the op's
                                                  network activity has PROXY_OP records */
  NCCLSCOPE_OP_API_COUNT = 1u << 9,            /* count and datatype are the API's (AllGather and
                                                  Broadcast reach the Coll event in bytes/int8) */
  NCCLSCOPE_OP_KERNEL_NEVER_CAME = 1u << 10,   /* KernelCh was expected but NCCL sent none (mask
                                                  changed around the API call); completed once a
                                                  later plan of the communicator ran */
  NCCLSCOPE_OP_KERNEL_UNTIMED = 1u << 11,      /* ABI v3 (NCCL 2.26): KernelCh came without GPU
                                                  timestamps, so no GPU timing; complete_ns is when
                                                  NCCL's proxy saw the kernel's channels end */
  NCCLSCOPE_OP_SYMMETRIC = 1u << 12,           /* a symmetric-memory kernel (v7 isSymColl); algo
                                                  is NCCLSCOPE_ALGO_SYMMETRIC */
  NCCLSCOPE_OP_HAS_DETAIL = 1u << 13,          /* an OP_DETAIL record follows (user tag, kernel
                                                  variant) */
  NCCLSCOPE_OP_HAS_PHASES = 1u << 14,          /* OP_PHASES records follow (v7 kernel phases) */
  NCCLSCOPE_OP_COUNTED = 1u << 15,             /* counted in the count table (EXACT_COUNTS): its
                                                  ops and bytes are not to be added again */
};

/* One channel's GPU time, relative to the op's gpu_start_ns. */
struct ncclscope_channel_time {
  uint32_t start_off_ns;
  uint32_t end_off_ns;
};

#define NCCLSCOPE_OP_INLINE_CHANNELS 16u
#define NCCLSCOPE_OP_CONT_CHANNELS 26u
/* 2 channel continuations (64 channels), 1 OP_DETAIL, 6 OP_PHASES (64 channels / 12) */
#define NCCLSCOPE_MAX_OP_FOLLOWERS 9u

/* One per completed Coll/P2p/CeColl op. Completion is when every announced KernelCh has stopped
 * and NCCL stopped the Coll/P2p event (which only means "enqueued"); without KernelCh (mask,
 * duty cycle, CUDA graphs) the op completes at that stop, without GPU timing. The op's network
 * activity arrives as NCCLSCOPE_REC_PROXY_OP records with the same (comm_id, rank, func, seq). */
struct ncclscope_op_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t seq;            /* Coll: NCCL seqNumber (per comm and func, equal across ranks);
                              P2p: our count per (comm, func, peer), see flags; CE: ceSeqNum */
  uint64_t count;          /* elements, as passed to the API */
  uint64_t bytes;          /* count x datatype size (per rank for AllGather/ReduceScatter),
                              saturating at UINT64_MAX */
  uint64_t enqueue_ns;     /* host time NCCL started the Coll/P2p event */
  uint64_t complete_ns;    /* host time the plugin observed completion */
  uint64_t gpu_start_ns;   /* earliest channel start, 0 without GPU timing */
  uint64_t gpu_end_ns;     /* latest channel end */
  uint64_t op_index;       /* this communicator's op counter (all kinds), from 0 */
  uint64_t channel_mask;   /* channels with GPU timing; ch[] in ascending channel order */
  uint32_t enqueue_dur_ns; /* Coll/P2p start -> stop, saturating */
  int32_t rank;
  int32_t peer;       /* p2p: peer rank; coll: root; -1 otherwise */
  uint16_t flags;     /* enum ncclscope_op_flag */
  uint8_t kind;       /* enum ncclscope_op_kind */
  uint8_t func;       /* enum ncclscope_func */
  uint8_t datatype;   /* enum ncclscope_datatype */
  uint8_t algo;       /* enum ncclscope_algo */
  uint8_t proto;      /* enum ncclscope_proto */
  uint8_t n_channels; /* channels NCCL announced */
  uint8_t n_warps;
  uint8_t n_timed;         /* channels with GPU timing (popcount of channel_mask) */
  uint8_t n_inline;        /* valid entries in ch[] */
  uint8_t n_continuations; /* records that directly follow and belong to this op, in this
                              order: its OP_CHANNELS (as many as its timed channels beyond 16
                              need), an OP_DETAIL (flag HAS_DETAIL), its OP_PHASES (flag
                              HAS_PHASES); at most NCCLSCOPE_MAX_OP_FOLLOWERS */
  uint32_t comm_slot;      /* comm table index, UINT32_MAX when none */
  uint32_t weight;         /* the ops this record stands for: record_one_in when it was written
                              (1 in `weight` ops like it has a record); 0 (older plugins) is 1 */
  struct ncclscope_channel_time ch[NCCLSCOPE_OP_INLINE_CHANNELS];
};

/* Channel times beyond the first 16, written in the same lane right after their op record. */
struct ncclscope_op_channels_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t seq;
  uint64_t op_index;
  int32_t rank;
  uint8_t part;  /* 1-based continuation number */
  uint8_t n;     /* valid entries in ch[] */
  uint8_t first; /* position of ch[0] among the op's timed channels (ascending channel order) */
  uint8_t func;
  struct ncclscope_channel_time ch[NCCLSCOPE_OP_CONT_CHANNELS];
};

/* Symmetric-memory kernel variants NCCL 2.31 names in coll.kernelVariant (ncclSymKernelStr,
 * src/include/sym_kernels.h at 2.31.2); a variant this list lacks is OTHER. */
enum ncclscope_kernel_variant {
  NCCLSCOPE_KV_NONE = 0, /* not a symmetric kernel */
  NCCLSCOPE_KV_OTHER = 1,
  NCCLSCOPE_KV_ALL_REDUCE_AGXLL_R = 2,
  NCCLSCOPE_KV_ALL_REDUCE_AGXLLMC_R = 3,
  NCCLSCOPE_KV_ALL_REDUCE_RSXTMALD_AGXTMAST = 4,
  NCCLSCOPE_KV_ALL_REDUCE_RSXLD_AGXST = 5,
  NCCLSCOPE_KV_ALL_REDUCE_RSXLDMC_AGXSTMC = 6,
  NCCLSCOPE_KV_ALL_GATHER_LL = 7,
  NCCLSCOPE_KV_ALL_GATHER_LLMC = 8,
  NCCLSCOPE_KV_ALL_GATHER_TMAST = 9,
  NCCLSCOPE_KV_ALL_GATHER_ST = 10,
  NCCLSCOPE_KV_ALL_GATHER_TMASTMC = 11,
  NCCLSCOPE_KV_ALL_GATHER_STMC = 12,
  NCCLSCOPE_KV_ALL_GATHER_RAILRING_LSASTMC = 13,
  NCCLSCOPE_KV_REDUCE_SCATTER_LL = 14,
  NCCLSCOPE_KV_REDUCE_SCATTER_TMALD = 15,
  NCCLSCOPE_KV_REDUCE_SCATTER_LD = 16,
  NCCLSCOPE_KV_REDUCE_SCATTER_LDMC = 17,
  NCCLSCOPE_KV_REDUCE_SCATTER_RAILA2A_LSALD = 18,
  NCCLSCOPE_KV_REDUCE_SCATTER_RAILA2A_LSALDMC = 19,
  NCCLSCOPE_KV_COUNT = 20
};

static inline const char* ncclscope_kernel_variant_name(unsigned variant) {
  static const char* const names[NCCLSCOPE_KV_COUNT] = {"none",
                                                        "other",
                                                        "AllReduce_AGxLL_R",
                                                        "AllReduce_AGxLLMC_R",
                                                        "AllReduce_RSxTmaLD_AGxTmaST",
                                                        "AllReduce_RSxLD_AGxST",
                                                        "AllReduce_RSxLDMC_AGxSTMC",
                                                        "AllGather_LL",
                                                        "AllGather_LLMC",
                                                        "AllGather_TmaST",
                                                        "AllGather_ST",
                                                        "AllGather_TmaSTMC",
                                                        "AllGather_STMC",
                                                        "AllGather_RailRing_LsaSTMC",
                                                        "ReduceScatter_LL",
                                                        "ReduceScatter_TmaLD",
                                                        "ReduceScatter_LD",
                                                        "ReduceScatter_LDMC",
                                                        "ReduceScatter_RailA2A_LsaLD",
                                                        "ReduceScatter_RailA2A_LsaLDMC"};
  return variant < NCCLSCOPE_KV_COUNT ? names[variant] : "other";
}

/* What NCCL 2.31 (v7) tells about an op beyond the op record, written right after it (same lane,
 * same publication) when it has any: the application's tag and the symmetric kernel's variant. */
struct ncclscope_op_detail_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t seq;
  uint64_t op_index;
  uint64_t user_tag; /* ncclCollConfig_t.userProfilerTag of the call; 0 untagged; values with the
                        top bit set are reserved by NCCL */
  int32_t rank;
  uint8_t func;
  uint8_t kernel_variant; /* enum ncclscope_kernel_variant */
  uint8_t reserved0[2];
  uint8_t reserved1[200];
};

/* Kernel phases of a channel (v7 KernelPhase, GPU globaltimer durations): 0 initial_sync, 1
 * compute, 2 final_sync. For symmetric kernels initial_sync is the wait at the opening barrier
 * for the peers (src/device/symmetric/all_gather.cuh at 2.31.2); for the others it is the time
 * before the work batch starts, not a peer wait (src/device/common.h:323-346). NCCL skips a
 * phase of zero length: `present` says which it reported. */
#define NCCLSCOPE_PHASE_COUNT 3u
#define NCCLSCOPE_OP_PHASE_CHANNELS 12u
struct ncclscope_channel_phases {
  uint8_t channel;
  uint8_t present; /* bit p: phase p reported */
  uint8_t reserved[2];
  uint32_t ns[NCCLSCOPE_PHASE_COUNT];
};

/* The kernel phases of an op's channels (ascending channel order), right after its op record (and
 * OP_DETAIL): as many records as the op has channels with phases / NCCLSCOPE_OP_PHASE_CHANNELS. */
struct ncclscope_op_phases_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t seq;
  uint64_t op_index;
  int32_t rank;
  uint8_t part; /* 1-based */
  uint8_t n;    /* valid entries in ch[] */
  uint8_t func;
  uint8_t reserved0;
  uint8_t reserved1[16];
  struct ncclscope_channel_phases ch[NCCLSCOPE_OP_PHASE_CHANNELS];
};

/* Exact operation counts (header.features EXACT_COUNTS). The plugin counts every operation a
 * communicator rank enqueues, whatever record_one_in, the rate limit, the duty cycles or the
 * overhead governor decide, per key: (function, algorithm, protocol, size class), in its comm
 * slot's part of the count table, in place: running totals, monotonic while the slot holds the
 * communicator. A key is claimed with a compare-and-swap of `key` (0 -> key), then `ops` and
 * `bytes` grow by atomic adds (relaxed: each is exact as of its load; `bytes` may trail `ops` by
 * the op being added). Nothing is lost when records are (a full ring, an agent that was down, a
 * process killed): the agent reads the table every pass and once more when the process is gone.
 * The slot's seqlock (`version`) covers the table's reset when the slot takes a new communicator,
 * and a finalized slot is reused only after NCCLSCOPE_COMM_SLOT_REUSE_NS, so the agent reads its
 * final totals first. */
#define NCCLSCOPE_COUNT_KEYS 128u /* keys per communicator rank; then per function alone */
#define NCCLSCOPE_COMM_SLOT_REUSE_NS 2000000000ull /* a finalized slot waits this long */
/* A count key: func | algo << 5 | proto << 9 | size_class << 12, plus bit 16 set; 0 is no key.
 * With size class NCCLSCOPE_SIZE_CLASS_OVERFLOW and algo/proto UNKNOWN: the overflow key of a
 * function. */
#define NCCLSCOPE_SIZE_CLASS_OVERFLOW 15u
#define NCCLSCOPE_COUNT_KEY_VALID 0x10000u
static inline uint32_t ncclscope_count_key(unsigned func, unsigned algo, unsigned proto,
                                           unsigned size_class) {
  return NCCLSCOPE_COUNT_KEY_VALID | (func & 0x1Fu) | (algo & 0xFu) << 5 | (proto & 0x7u) << 9 |
         (size_class & 0xFu) << 12;
}
/* The size class of a message (the agent's `size` label): 0 below 1 KiB, then one class per power
 * of 4 (1-4 KiB, 4-16 KiB, ...), 11 from 1 GiB up. */
#define NCCLSCOPE_SIZE_CLASSES 12u
static inline unsigned ncclscope_size_class(uint64_t bytes) {
  unsigned bits;
  unsigned index;
  if (bytes < 1024u) return 0u;
  bits = 63u - NCCLSCOPE_CAST(unsigned, __builtin_clzll(bytes)); /* floor(log2(bytes)) */
  index = (bits - 10u) / 2u + 1u;
  return index < NCCLSCOPE_SIZE_CLASSES - 1u ? index : NCCLSCOPE_SIZE_CLASSES - 1u;
}
struct ncclscope_op_count {
  uint32_t key; /* ncclscope_count_key(); 0: unused entry */
  uint32_t reserved;
  uint64_t ops;
  uint64_t bytes; /* wraps after 16 EiB */
};
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_op_count) == 24, "op count");

/* Proxy step states, the index into ncclscope_proxy_op_record.state_ns. */
enum ncclscope_step_state {
  NCCLSCOPE_STEP_SEND_GPU_WAIT = 0,   /* waiting for the GPU to fill the send buffer */
  NCCLSCOPE_STEP_SEND_PEER_WAIT = 1,  /* waiting for the receiver's clear-to-send credit */
  NCCLSCOPE_STEP_SEND_WAIT = 2,       /* isend posted, waiting for completion */
  NCCLSCOPE_STEP_RECV_WAIT = 3,       /* irecv posted, waiting for data */
  NCCLSCOPE_STEP_RECV_FLUSH_WAIT = 4, /* waiting for the GDR flush */
  NCCLSCOPE_STEP_RECV_GPU_WAIT = 5,   /* waiting for the GPU to consume the data */
  NCCLSCOPE_STEP_STATE_COUNT = 6
};

/* ncclscope_proxy_op_record.flags */
enum ncclscope_proxy_flag {
  NCCLSCOPE_PROXY_FOREIGN = 1u << 0,      /* raised for another process (PXN): comm_id unknown,
                                             origin_* identify the op in that process */
  NCCLSCOPE_PROXY_PARENT_KNOWN = 1u << 1, /* seq, func and op_index are valid */
  NCCLSCOPE_PROXY_FLUSHED = 1u << 2,      /* still running when the communicator ended */
};

/* One per network ProxyOp (one channel, one peer, one direction) when ProxyOp/ProxyStep events
 * are on. state_ns sums, over the op's steps, the time spent in each step state. */
struct ncclscope_proxy_op_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;        /* 0 when unknown */
  uint64_t seq;            /* parent op's seq, when NCCLSCOPE_PROXY_PARENT_KNOWN */
  uint64_t bytes;          /* sum of the steps' transSize */
  uint64_t start_ns;       /* host time of the ProxyOp start */
  uint64_t end_ns;         /* host time of the ProxyOp stop */
  uint64_t in_progress_ns; /* host time NCCL moved the op to "in progress", 0 if never */
  uint64_t origin_context; /* PXN: context handle value in the originating process */
  uint64_t origin_parent;  /* PXN: op handle value in the originating process */
  uint64_t state_ns[NCCLSCOPE_STEP_STATE_COUNT];
  uint64_t op_index; /* parent op's op_index, when known */
  int32_t rank;
  int32_t peer;
  int32_t origin_pid; /* pid (originator's namespace) that posted the op */
  int32_t n_steps;    /* steps NCCL announced */
  int32_t steps_done; /* steps that stopped */
  int32_t chunk_size; /* bytes per step, as NCCL announced */
  uint32_t comm_slot; /* UINT32_MAX when none */
  uint16_t flags;     /* enum ncclscope_proxy_flag */
  uint8_t channel;
  uint8_t is_send;
  uint8_t func; /* parent op's func, when known */
  uint8_t reserved0[7];
  uint64_t max_step_ns; /* longest single step, start to stop */
  /* Which NIC carried the op, from NCCL net-plugin events (valid when net_type != 0). */
  uint32_t net_type;     /* enum ncclscope_net_type: 0 unknown (no net-plugin event seen) */
  int32_t net_dev_index; /* IB: device index within NCCL's (possibly merged) net device */
  uint32_t qp_num[2];    /* IB: the first two distinct QP numbers used, 0 when unused */
  uint32_t weight;       /* as ncclscope_op_record.weight: its op's; 1 for PXN ops raised for
                            another process (every one recorded); 0 (older plugins) is 1 */
  uint8_t reserved1[52];
};

/* ncclscope_proxy_op_record.net_type: where the net-plugin events came from. */
enum ncclscope_net_type {
  NCCLSCOPE_NET_UNKNOWN = 0,
  NCCLSCOPE_NET_IB = 1,     /* NCCL's built-in IB transport (ncclProfilerNetIbDescr_v1_t) */
  NCCLSCOPE_NET_SOCKET = 2, /* NCCL's built-in socket transport */
  NCCLSCOPE_NET_OTHER = 3,  /* an external net plugin with its own descriptor */
};

/* Written at init, or (ABI v1-v3: NCCL 2.23-2.26 call init with no identity) at the
 * communicator's first op, whose descriptor carries its hash and rank; nranks and nnodes are then
 * 0: unknown. */
struct ncclscope_comm_init_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t context;
  uint64_t init_ns;
  int32_t rank;
  int32_t nranks; /* 0: unknown (ABI v1-v3) */
  int32_t nnodes; /* 0: unknown (ABI v1-v3) */
  int32_t cuda_device;
  uint32_t comm_slot;
  uint32_t nccl_abi;
  char name[128];
  char gpu_uuid[48];
  char pci_bus_id[16];
};

struct ncclscope_comm_finalize_record {
  struct ncclscope_record_header h;
  uint64_t comm_id;
  uint64_t context;
  uint64_t finalize_ns;
  uint64_t ops_enqueued;
  uint64_t ops_completed;
  uint64_t ops_flushed; /* finalized with the communicator, still in flight */
  int32_t rank;
  uint32_t comm_slot;
  uint8_t reserved[184];
};

NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_record_header) == 16, "record header");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_op_record) == NCCLSCOPE_RECORD_SIZE, "op");
NCCLSCOPE_STATIC_ASSERT(offsetof(struct ncclscope_op_record, ch) == 128, "op channels");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_op_channels_record) == NCCLSCOPE_RECORD_SIZE,
                        "op channels");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_proxy_op_record) == NCCLSCOPE_RECORD_SIZE,
                        "proxy op");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_comm_init_record) == NCCLSCOPE_RECORD_SIZE,
                        "comm init");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_comm_finalize_record) == NCCLSCOPE_RECORD_SIZE,
                        "comm finalize");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_op_detail_record) == NCCLSCOPE_RECORD_SIZE,
                        "op detail");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_op_phases_record) == NCCLSCOPE_RECORD_SIZE,
                        "op phases");
NCCLSCOPE_STATIC_ASSERT(sizeof(struct ncclscope_channel_phases) == 16, "channel phases");

/* ---- Helpers ------------------------------------------------------------------------------ */

/* Checksum of one record (size a multiple of 32): over each 32-byte block, the sum s of its four
 * little-endian 64-bit words (with the checksum field, the upper half of word 0, taken as zero)
 * feeds two accumulators, a += s and b += a; the result folds a and b. Cheap on the hot path (a few
 * instructions per block), and it catches torn and scribbled records. Part of the format: every
 * plugin and agent version computes the same value (tests/unit/plugin/ring_format_test.cc pins
 * it). The code takes block 0 apart and then two blocks a step, so that no step tests for block 0
 * and the two sums are independent. Each word is its own 8-byte load: a 32-byte memcpy into an
 * array made GCC 12 copy every block through the stack with vector moves first (~117 instructions
 * per 256-byte record; one load per word, ~75; docs/benchmarks.md). */
static inline uint64_t ncclscope_load64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline uint64_t ncclscope_block_sum(const unsigned char* block) {
  return (ncclscope_load64(block) + ncclscope_load64(block + 8)) +
         (ncclscope_load64(block + 16) + ncclscope_load64(block + 24));
}

static inline uint32_t ncclscope_checksum(const void* record, size_t size) {
  const unsigned char* bytes = NCCLSCOPE_CAST(const unsigned char*, record);
  uint64_t a = 0x6e63636c73636f70ULL;
  uint64_t b = 0;
  size_t i = 32;
  if (size >= 32) {
    /* Block 0 without the checksum field: the low half of word 0 only. */
    a += (ncclscope_load64(bytes) & 0xFFFFFFFFULL) + ncclscope_load64(bytes + 8) +
         (ncclscope_load64(bytes + 16) + ncclscope_load64(bytes + 24));
    b += a;
    for (; i + 64 <= size; i += 64) {
      const uint64_t s1 = ncclscope_block_sum(bytes + i);
      const uint64_t s2 = ncclscope_block_sum(bytes + i + 32);
      a += s1;
      b += a;
      a += s2;
      b += a;
    }
    if (i + 32 <= size) {
      a += ncclscope_block_sum(bytes + i);
      b += a;
    }
  }
  return NCCLSCOPE_CAST(uint32_t, a ^ (a >> 32) ^ b ^ (b >> 29));
}

/* Bytes per element of a datatype code, 0 when unknown. */
static inline uint32_t ncclscope_datatype_size(unsigned datatype) {
  static const unsigned char sizes[NCCLSCOPE_DT_COUNT] = {0, 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return datatype < NCCLSCOPE_DT_COUNT ? sizes[datatype] : 0;
}

static inline const char* ncclscope_func_name(unsigned func) {
  static const char* const names[NCCLSCOPE_FUNC_COUNT] = {
      "unknown",    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
      "Send",       "Recv",      "SendRecv",  "AlltoAll",      "Gather",    "Scatter",
      "AllGatherV", "PutSignal", "Signal",    "WaitSignal"};
  return func < NCCLSCOPE_FUNC_COUNT ? names[func] : "unknown";
}

static inline const char* ncclscope_datatype_name(unsigned datatype) {
  static const char* const names[NCCLSCOPE_DT_COUNT] = {
      "unknown", "int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return datatype < NCCLSCOPE_DT_COUNT ? names[datatype] : "unknown";
}

static inline const char* ncclscope_algo_name(unsigned algo) {
  static const char* const names[NCCLSCOPE_ALGO_COUNT] = {
      "unknown", "TREE",      "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
      "NVLS",    "NVLS_TREE", "PAT",  "none",           "SYMMETRIC"};
  return algo < NCCLSCOPE_ALGO_COUNT ? names[algo] : "unknown";
}

static inline const char* ncclscope_proto_name(unsigned proto) {
  static const char* const names[NCCLSCOPE_PROTO_COUNT] = {"unknown", "LL", "LL128", "SIMPLE",
                                                           "none"};
  return proto < NCCLSCOPE_PROTO_COUNT ? names[proto] : "unknown";
}

static inline const char* ncclscope_step_state_name(unsigned state) {
  static const char* const names[NCCLSCOPE_STEP_STATE_COUNT] = {"send_gpu_wait",   "send_peer_wait",
                                                                "send_wait",       "recv_wait",
                                                                "recv_flush_wait", "recv_gpu_wait"};
  return state < NCCLSCOPE_STEP_STATE_COUNT ? names[state] : "unknown";
}

/* Names of the record types, as the agent counts them (ncclscope_nccl_records_total{type});
 * NULL for codes that are not a record type. */
static inline const char* ncclscope_record_type_name(unsigned type) {
  static const char* const names[NCCLSCOPE_REC_TYPE_MAX + 1] = {
      NCCLSCOPE_NULL, "comm_init", "comm_finalize", "op",
      "op_channels",  "proxy_op",  "op_detail",     "op_phases"};
  return type <= NCCLSCOPE_REC_TYPE_MAX ? names[type] : NCCLSCOPE_NULL;
}

/* Names of the plugin-side event outcomes among header.counters[], as the agent exports them
 * (ncclscope_nccl_plugin_events_total{event}); NULL for the counters exported as metrics of
 * their own (dropped records, the overhead governor) and for reserved slots. */
static inline const char* ncclscope_counter_name(unsigned counter) {
  static const char* const names[NCCLSCOPE_COUNTER_MAX] = {
      NCCLSCOPE_NULL, /* DROPPED_CONTENTION:
                         ncclscope_nccl_records_dropped_total{reason="lane_busy"} */
      "filtered",         "handles_exhausted",
      "invalid_handle",   "late_event",
      "incomplete_op",    "comm_without_slot",
      "foreign_proxy_op", "unknown_event",
      NCCLSCOPE_NULL, /* reserved */
      "flushed_op",       "proxy_op_without_network",
      "chain_error",      "mask_uncertain_op",
      NCCLSCOPE_NULL, /* GOVERNOR_DOWN, GOVERNOR_UP, PLUGIN_TIME_NS: the governor's own metrics */
      NCCLSCOPE_NULL,     NCCLSCOPE_NULL,
      "unrecorded_op",    "count_keys_overflow"};
  return counter < NCCLSCOPE_COUNTER_MAX ? names[counter] : NCCLSCOPE_NULL;
}

/* Event groups: the words of the agent's plugin.events and the job's NCCLSCOPE_EVENTS, and the
 * NCCL profiler event-type bits each one asks NCCL for in the mask the plugin returns from init
 * (ncclProfileColl = 1 << 1, P2p 1 << 2, ProxyOp 1 << 3, ProxyStep 1 << 4, KernelCh 1 << 6,
 * NetPlugin 1 << 7, CeColl 1 << 12: src/include/plugin/nccl_profiler.h:11-25 at v2.29.7-1;
 * KernelPhase 1 << 15: :29 at 2.31.2, which NCCL raises only with KernelCh, hence its group's bits;
 * plugin/abi/nccl_profiler_abi.h). A ProxyStep is only raised under its ProxyOp and a NetPlugin
 * event under its ProxyStep, so those groups carry their parents' bits. The controls carry the
 * resulting mask (struct ncclscope_controls.event_mask). */
#define NCCLSCOPE_EVENT_GROUP_COUNT 8u
static inline const char* ncclscope_event_group_name(unsigned group) {
  static const char* const names[NCCLSCOPE_EVENT_GROUP_COUNT] = {
      "coll",       "p2p",        "kernel_ch", "proxy_op",
      "proxy_step", "net_plugin", "ce_coll",   "kernel_phase"};
  return group < NCCLSCOPE_EVENT_GROUP_COUNT ? names[group] : NCCLSCOPE_NULL;
}
static inline uint32_t ncclscope_event_group_bits(unsigned group) {
  static const uint32_t bits[NCCLSCOPE_EVENT_GROUP_COUNT] = {
      0x2u, 0x4u, 0x40u, 0x8u, 0x8u | 0x10u, 0x8u | 0x10u | 0x80u, 0x1000u, 0x40u | 0x8000u};
  return group < NCCLSCOPE_EVENT_GROUP_COUNT ? bits[group] : 0u;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCLSCOPE_RING_H_ */
