#pragma once

// The producer side of the ring (format: ncclscope_ring.h). Create() makes the file, maps it and
// takes the shared flock that tells the agent the owner is alive; Write() publishes records with
// one compare-and-swap (the lane try-lock), a copy and a release store. It never blocks, never
// allocates and makes no system call: when a lane is full or busy the record is dropped and
// counted in the ring itself. The geometry is kept in process memory, never re-read from the file,
// so nothing the agent writes can steer a store out of bounds.

#include <atomic>
#include <cstdint>
#include <cstring>

#include "platform/fixed_text.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::ring {

struct RingGeometry {
  std::uint32_t lanes = 16;
  std::uint32_t lane_capacity = 2048;  // power of two
  std::uint32_t comm_slots = 256;
  // Exact-count keys per comm slot (the count table, ncclscope_ring.h): NCCLSCOPE_COUNT_KEYS, or
  // 0 for a ring without one (the EXACT_COUNTS feature follows it).
  std::uint32_t count_keys = NCCLSCOPE_COUNT_KEYS;

  // The largest power-of-two lane capacity that fits `record_bytes` across `lanes` lanes.
  static RingGeometry ForRecordBytes(std::uint64_t record_bytes, std::uint32_t lanes,
                                     std::uint32_t comm_slots);
  std::uint64_t FileSize() const;
};

struct RingIdentity {
  const char* hostname = "";
  const char* plugin_version = "";
  const char* job_id = "";
  std::uint32_t features = 0;  // enum ncclscope_ring_feature
};

using RingPath = platform::FixedText<4096>;
using RingError = platform::FixedText<4200>;

class RingWriter {
 public:
  RingWriter() = default;
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // Creates and maps <dir>/ncclscope-<pid>-<created_ns>.ring (through a hidden temporary name, so
  // the agent never sees a half-written header). Creates `dir` (mode 01777) when missing. Returns
  // false with a message in `error`.
  bool Create(const char* dir, const RingGeometry& geometry, const RingIdentity& identity,
              RingError* error);

  // Unmaps and closes without touching the file (the agent reclaims it once the flock is gone).
  void Close();

  // In a forked child: forget the parent's ring (closing our copy of the descriptor so the flock
  // follows the parent's lifetime only).
  void DetachAfterFork();

  bool ok() const { return header_ != nullptr; }
  const char* path() const { return path_.c_str(); }
  const RingGeometry& geometry() const { return geometry_; }
  ncclscope_ring_header* header() const { return header_; }
  ncclscope_comm_slot* comm_slot(std::uint32_t index) const {
    // Null without a mapped ring too (never created, or closed in a forked child).
    return comm_table_ != nullptr && index < geometry_.comm_slots ? comm_table_ + index : nullptr;
  }
  // Comm slot `index`'s count_keys entries of the count table; null without one.
  ncclscope_op_count* count_table(std::uint32_t index) const {
    return count_table_ != nullptr && index < geometry_.comm_slots
               ? count_table_ + static_cast<std::uint64_t>(index) * geometry_.count_keys
               : nullptr;
  }

  // Room for `count` consecutive records (1..kMaxGroup) in one lane, held until Commit(). The
  // caller fills every byte of each slot (type and payload; Commit sets layout, position and
  // checksum). Building in place saves a copy on the hot path.
  // An op with 64 timed channels: its record, 2 channel continuations, a detail record and 6
  // records of kernel phases (ncclscope_ring.h).
  static constexpr std::uint32_t kMaxGroup = 10;
  // Nothing in it is zeroed: Reserve sets count, lane, head and the first `count` slots (the only
  // ones read) when it returns true, and nothing reads a reservation it refused. Zeroing all ten
  // slots cost 13 instructions on every recorded op, the other three fields 2.
  struct Reservation {  // NOLINT(cppcoreguidelines-pro-type-member-init)
    unsigned char* slots[kMaxGroup];
    std::uint32_t count;
    std::uint32_t lane;
    std::uint64_t head;
  };
  // False when the records must be dropped (counted: every lane tried full, or busy).
  bool Reserve(std::uint32_t count, std::uint32_t lane_hint, Reservation* reservation);
  // Publishes the reserved records (one release store) and frees the lane.
  void Commit(const Reservation& reservation);

  // Reserve + copy + Commit: publishes `count` records laid out back to back in `records`, all
  // or none. `lane_hint` is the caller's preferred lane (any value; taken modulo the count).
  // Returns false when the records were dropped (and counted).
  bool Write(const void* records, std::uint32_t count, std::uint32_t lane_hint);

  // Adds to one of the header's cumulative counters (enum ncclscope_counter).
  void Count(ncclscope_counter counter, std::uint64_t n = 1);

 private:
  RingPath path_;
  int fd_ = -1;
  void* map_ = nullptr;
  std::uint64_t map_size_ = 0;
  RingGeometry geometry_;
  ncclscope_ring_header* header_ = nullptr;
  ncclscope_comm_slot* comm_table_ = nullptr;
  ncclscope_op_count* count_table_ = nullptr;
  ncclscope_lane* lanes_ = nullptr;
  unsigned char* data_ = nullptr;

  static constexpr std::uint32_t kLaneTries = 4;  // lanes tried before a record is dropped
};

// ncclscope_checksum(record, NCCLSCOPE_RECORD_SIZE), the same value, for a record in its ring
// slot. The definition adds each 32-byte block's four words into `a` and then `a` into `b`, all
// modulo 2^64: so a = a0 + (the sum of blocks 1-7) and b = 8 a0 + (the sum of block k taken 8 - k
// times), which two 64-bit lanes accumulate a 16-byte half-block at a time (SSE2 on x86-64, NEON
// on Arm), and add together at the end. Slots are 64-byte aligned (data_offset is, and records
// are 256 bytes; ncclscope_ring.h), so the loads fold into the adds. Measured: ~40 instructions
// fewer per record than the word-by-word definition's ~80 (tests/unit/plugin/ring_format_test.cc
// checks both agree).
inline std::uint32_t RecordChecksum(const unsigned char* record) {
  static_assert(NCCLSCOPE_RECORD_SIZE == 256, "eight blocks of 32 bytes");
  using Lanes [[gnu::vector_size(16)]] = std::uint64_t;
  const auto* p = static_cast<const unsigned char*>(__builtin_assume_aligned(record, 64));
  // Block 0 as the definition takes it: the checksum field (the high half of word 0) as zero.
  const std::uint64_t a0 = 0x6e63636c73636f70ULL + (ncclscope_load64(p) & 0xFFFFFFFFULL) +
                           ncclscope_load64(p + 8) +
                           (ncclscope_load64(p + 16) + ncclscope_load64(p + 24));
  Lanes a = {0, 0};
  Lanes b = {0, 0};
#pragma GCC unroll 7
  for (std::uint32_t block = 1; block < 8; ++block) {
    Lanes lo;
    Lanes hi;
    std::memcpy(&lo, p + block * 32, sizeof(lo));
    std::memcpy(&hi, p + block * 32 + 16, sizeof(hi));
    a += lo;
    a += hi;
    b += a;
  }
  const std::uint64_t sum_a = a0 + (a[0] + a[1]);
  const std::uint64_t sum_b = 8 * a0 + (b[0] + b[1]);
  return static_cast<std::uint32_t>(sum_a ^ (sum_a >> 32) ^ sum_b ^ (sum_b >> 29));
}

// Reserve and Commit are inline: the op record's path (records.cc) builds its record between them,
// and as calls they cost it ~30 instructions more (saved registers, the reservation through
// memory).
inline bool RingWriter::Reserve(std::uint32_t count, std::uint32_t lane_hint,
                                Reservation* reservation) {
  if (header_ == nullptr || count == 0 || count > kMaxGroup) return false;
  const std::uint32_t lanes = geometry_.lanes;
  const std::uint64_t capacity = geometry_.lane_capacity;
  bool saw_full = false;
  // (lane_hint + attempt) % lanes, without a division per record: a hint below the lane count (a
  // process with fewer writing threads than lanes, ThreadLaneHint) is its own remainder, and each
  // further attempt steps one lane on, wrapping. The same lanes in the same order; a 32-bit div
  // has ~26 cycles of latency on Skylake, 12 on Ice Lake (Agner Fog's tables); not timed here
  // (measured: 2 instructions fewer per record). No lanes: no attempt, and no division by zero.
  std::uint32_t index = lane_hint < lanes ? lane_hint : lanes != 0 ? lane_hint % lanes : 0;
  for (std::uint32_t attempt = 0; attempt < kLaneTries && attempt < lanes;
       ++attempt, index = index + 1 == lanes ? 0 : index + 1) {
    ncclscope_lane& lane = lanes_[index];
    std::atomic_ref<std::uint32_t> busy(lane.busy);
    std::uint32_t expected = 0;
    if (busy.load(std::memory_order_relaxed) != 0 ||
        !busy.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      continue;
    }
    const std::uint64_t head =
        std::atomic_ref<std::uint64_t>(lane.head).load(std::memory_order_relaxed);
    const std::uint64_t tail =
        std::atomic_ref<std::uint64_t>(lane.tail).load(std::memory_order_acquire);
    // A tail beyond head or more than a lap behind can only come from a broken consumer: treat
    // the lane as full rather than trust it.
    const std::uint64_t used = head - tail;
    if (tail > head || used > capacity || capacity - used < count) {
      busy.store(0, std::memory_order_release);
      saw_full = true;
      continue;  // another lane may have room
    }
    unsigned char* lane_data =
        data_ + static_cast<std::uint64_t>(index) * capacity * NCCLSCOPE_RECORD_SIZE;
    reservation->slots[0] = lane_data + (head & (capacity - 1)) * NCCLSCOPE_RECORD_SIZE;
    // Most groups are one record (an op with no followers): no loop for them.
    for (std::uint32_t i = 1; i < count; ++i) {
      reservation->slots[i] = lane_data + ((head + i) & (capacity - 1)) * NCCLSCOPE_RECORD_SIZE;
    }
    reservation->count = count;
    reservation->lane = index;
    reservation->head = head;
    return true;
  }
  if (saw_full) {
    // Counted on the writer's own lane (any lane would do: the agent sums them).
    std::atomic_ref<std::uint64_t>(lanes_[lane_hint % lanes].dropped)
        .fetch_add(count, std::memory_order_relaxed);
  } else {
    Count(NCCLSCOPE_CTR_DROPPED_CONTENTION, count);
  }
  return false;
}

// A reserved record's header: its position, layout and checksum (the field does not count).
inline void SealRecord(unsigned char* record, std::uint64_t position) {
  auto* rh = reinterpret_cast<ncclscope_record_header*>(record);
  rh->position = position;
  rh->layout = NCCLSCOPE_RECORD_LAYOUT;
  rh->checksum = RecordChecksum(record);
}

inline void RingWriter::Commit(const Reservation& reservation) {
  // The first record apart: a reservation has at least one (Reserve), and most have only it, whose
  // slot the compiler then keeps where the caller built it instead of reading the reservation's
  // array back (measured: 7 instructions per op record).
  SealRecord(reservation.slots[0], reservation.head);
  for (std::uint32_t i = 1; i < reservation.count; ++i) {
    SealRecord(reservation.slots[i], reservation.head + i);
  }
  ncclscope_lane& lane = lanes_[reservation.lane];
  std::atomic_ref<std::uint64_t>(lane.head).store(reservation.head + reservation.count,
                                                  std::memory_order_release);
  std::atomic_ref<std::uint32_t>(lane.busy).store(0, std::memory_order_release);
}

}  // namespace ncclscope::ring
