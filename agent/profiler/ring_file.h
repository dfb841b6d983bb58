#pragma once

// The agent's view of one plugin ring (format: plugin/ring/ncclscope_ring.h). Open() opens only a
// regular file (plugin/ring/regular_file.h: never a FIFO, device or symlink), validates the header
// against the file with overflow-free arithmetic (every region inside the file, every count bounded
// before it is multiplied) and maps the metadata only: header, comm table and lanes. Record data is
// read with pread(), never through the mapping: a hole in a pod's file then reads as zeros instead
// of faulting in a page charged to the agent's memory. Drain() copies new records out of every
// lane, validates each one, commits the lane's tail and only then hands the records to a sink, so
// an agent killed at any point never counts a record twice and a restarted agent finds everything
// it had not consumed. Every access to the mapping is guarded (guarded_memory.h): a file truncated
// under us marks the ring broken instead of killing the agent.

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/profiler/record_decoder.h"
#include "agent/profiler/record_sink.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::profiler {

// Live header fields and plugin counters (cumulative for the process's life).
struct RingHeaderSnapshot {
  std::uint32_t state = 0;  // ncclscope_ring_state
  std::uint32_t nccl_abi = 0;
  std::uint32_t effective_mask = 0;
  std::uint32_t applied_control_seq = 0;
  std::uint32_t control_seq = 0;  // the agent's latest controls (applied once equal to the above)
  std::uint32_t pinned_controls = 0;
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> counters{};
  std::uint64_t dropped_ring_full = 0;  // sum of the lanes' `dropped`
  ncclscope_governor_state governor{};  // as the plugin wrote it: untrusted, check before use
};

struct DrainStats {
  std::uint64_t records = 0;  // valid records delivered (continuations included)
  std::array<std::uint64_t, NCCLSCOPE_REC_TYPE_MAX + 1> by_type{};
  std::array<std::uint64_t, static_cast<std::size_t>(CorruptReason::kCount)> corrupt{};
  std::uint64_t lane_resyncs = 0;  // lanes whose head/tail made no sense; skipped to head
  bool more = false;               // a lane had more than the batch limit
  // The fullest lane found, in thousandths of its capacity (its records before the drain took
  // them): what paces the passes (pass_pacer.h).
  std::uint32_t fullest_lane_permille = 0;
};

// What the agent may map and read of one ring (bounds on a pod's file, see ncclscope_ring.h).
struct RingLimits {
  std::uint64_t max_file_bytes = NCCLSCOPE_AGENT_MAX_RING_FILE_BYTES;
  std::uint32_t max_live_slots = NCCLSCOPE_AGENT_MAX_COMMS_PER_RING;  // live comm slots read
};

class RingFile {
 public:
  ~RingFile();
  RingFile(const RingFile&) = delete;
  RingFile& operator=(const RingFile&) = delete;

  // Opens and validates `path`. On failure returns nullptr and a short reason for the
  // rejected-rings metric ("magic", "version", "format", "geometry", "size", "sparse", "open",
  // "not_regular", "map").
  static std::unique_ptr<RingFile> Open(const std::string& path, std::string* reason,
                                        const RingLimits& limits = {});

  const std::string& path() const { return path_; }
  const RingOrigin& origin() const { return origin_; }
  // For the directory's attribution (ring_attribution.h) right after Open().
  RingOrigin& mutable_origin() { return origin_; }
  std::uint32_t lanes() const { return lanes_; }
  std::uint32_t lane_capacity() const { return capacity_; }
  std::uint32_t comm_slots() const { return comm_slots_; }
  // Whether the ring has a count table (features EXACT_COUNTS): exact op counts, ReadCounts().
  bool exact_counts() const { return count_table_offset_ != 0; }
  bool writable() const { return writable_; }
  // The file as opened: owner (attribution), device and inode (its lock holder in /proc/locks).
  const struct stat& stat() const { return stat_; }
  // Bytes of the file mapped (metadata only: header, comm table, lanes).
  std::uint64_t mapped_bytes() const { return map_size_; }
  // Live comm slots beyond RingLimits::max_live_slots in the last ReadCommTable() (not read).
  std::uint32_t slots_over_limit() const { return slots_over_limit_; }
  // False once an access faulted (the file was truncated) or the header went bad.
  bool healthy() const { return healthy_; }

  // Delivers up to `max_per_lane` new records of every lane to `sink`.
  DrainStats Drain(RecordSink& sink, std::uint32_t max_per_lane = 4096);

  bool ReadHeader(RingHeaderSnapshot* out);
  // Whether the file is still whole (size and allocated blocks): a pod that truncates its ring or
  // punches holes in it loses the ring (healthy() turns false) before anything is read.
  bool CheckFile();
  // Consistent copies of the slots in use (live or finalized), skipping ones being rewritten.
  std::vector<CommSlotSnapshot> ReadCommTable();
  // The exact op counts of every slot in use with a communicator identity (live or finalized;
  // none without a count table), skipping slots being rewritten and invalid keys.
  std::vector<OpCounts> ReadCounts();

  // Publishes controls for the plugin (seqlock). False when read-only or faulted.
  bool WriteControls(const ncclscope_controls& controls);

  // Whether the process that created the ring still holds it (its shared flock). When it does not,
  // this takes the lock exclusively and keeps it, so the verdict cannot change.
  bool OwnerAlive();

 private:
  RingFile() = default;
  // Open()'s steps after the header was validated: map the metadata; take the geometry and the
  // origin from the header; a read-only ring, which cannot commit tails, starts from what is there
  // now and keeps its position in memory.
  bool Map(const ncclscope_ring_header& header);
  void Adopt(const ncclscope_ring_header& header);
  void StartAtCurrentTails();
  bool DrainLane(std::uint32_t lane, RecordSink& sink, std::uint32_t max, DrainStats& stats);
  // Copies `copy` records of the lane from position `tail` on (the ring wraps: one or two preads).
  bool ReadLaneRecords(std::uint32_t lane, std::uint64_t tail, std::uint64_t copy,
                       std::vector<unsigned char>& bytes);
  // Logs the first record of this ring rejected for each reason (the failed check, its lane,
  // position and type), once: the counters say how many, the log line says what to look for.
  void LogFirstRejections(std::uint32_t lane, const std::vector<unsigned char>& bytes,
                          const std::vector<CorruptReason>& verdict, std::uint64_t tail,
                          std::uint64_t take);
  // The same for an op whose follower records were missing or not its own (DeliverOp).
  void LogFirstContinuationLoss(std::uint32_t lane, std::uint64_t tail, std::uint64_t take);
  // How many comm slots to read: those the plugin ever took, or all. False (and unhealthy) when the
  // header cannot be read.
  bool SlotsUsed(std::uint32_t* slots);

  std::string path_;
  RingOrigin origin_;
  int fd_ = -1;
  struct stat stat_ {};
  unsigned char* map_ = nullptr;
  std::uint64_t map_size_ = 0;  // data_offset_: the data region is read with pread
  std::uint64_t size_ = 0;      // file_size from the header
  RingLimits limits_;
  std::uint32_t slots_over_limit_ = 0;
  bool writable_ = false;
  bool healthy_ = true;
  bool owner_dead_ = false;
  std::uint32_t lanes_ = 0;
  std::uint32_t capacity_ = 0;
  std::uint32_t comm_slots_ = 0;
  std::uint64_t comm_table_offset_ = 0;
  std::uint64_t count_table_offset_ = 0;  // 0: no count table
  std::uint64_t lanes_offset_ = 0;
  std::uint64_t data_offset_ = 0;
  std::vector<std::uint64_t> local_tails_;  // used when the ring is read-only
  std::uint32_t logged_reasons_ = 0;        // bit per CorruptReason: its first rejection was logged
  // Drains and table reads use per-thread scratch (ring_file.cc), not per ring: hundreds of rings
  // would otherwise each keep their largest batch allocated.
};

}  // namespace ncclscope::profiler
