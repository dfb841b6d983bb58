#pragma once

// The rings in the configured directory: discovery, draining, and reclaiming the rings of exited
// processes. One Poll() finds new `ncclscope-*.ring` files (validating each; a file that fails is
// counted once by reason and left alone while its owner lives), drains every ring into the sink,
// and for a ring whose owner is gone (its flock is free) drains it to the end and deletes it. The
// result of each pass is a snapshot the exporter renders at scrape time without touching any
// mapping. Used by one thread at a time.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/profiler/ring_file.h"

namespace ncclscope::profiler {

// A communicator from a live ring's comm table, with where it runs.
struct LiveComm {
  CommSlotSnapshot slot;
  std::string hostname;
  std::int32_t pid = 0;
};

struct DirectorySnapshot {
  std::uint32_t rings_live = 0;    // owner alive, still recording
  std::uint32_t rings_closed = 0;  // owner alive, every communicator finalized
  std::uint64_t rings_reclaimed = 0;
  std::map<std::string, std::uint64_t> rings_rejected;  // by reason
  std::uint64_t ring_faults = 0;  // rings dropped because their file broke under us
  std::array<std::uint64_t, NCCLSCOPE_REC_TYPE_MAX + 1> records{};
  std::array<std::uint64_t, static_cast<std::size_t>(CorruptReason::kCount)> corrupt{};
  std::uint64_t lane_resyncs = 0;
  // Plugin-side counters and ring-full drops: current rings plus every reclaimed one.
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> plugin_counters{};
  std::uint64_t dropped_ring_full = 0;
  std::vector<LiveComm> comms;  // LIVE slots of rings whose owner is alive
};

class RingDirectory {
 public:
  explicit RingDirectory(std::string dir);

  const std::string& dir() const { return dir_; }

  // Controls written into every ring now and into each ring found later.
  void SetControls(const ncclscope_controls& controls);

  // One pass. Returns true when some lane had more records than one batch (poll again soon).
  bool Poll(RecordSink& sink);

  const DirectorySnapshot& snapshot() const { return snapshot_; }

 private:
  struct Tracked {
    std::unique_ptr<RingFile> file;
    RingHeaderSnapshot last_header;
    std::uint32_t controls_seq_written = 0;
  };

  void Discover();
  void Retire(Tracked& ring);

  std::string dir_;
  std::optional<ncclscope_controls> controls_;
  std::uint32_t controls_version_ = 0;
  std::map<std::string, Tracked> rings_;         // by file name
  std::map<std::string, std::string> rejected_;  // file name -> reason (counted once)
  DirectorySnapshot snapshot_;
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> retired_counters_{};
  std::uint64_t retired_dropped_ = 0;
};

// Writes <dir>/ncclscope.controls (read by plugins when they create their ring) atomically.
bool WriteControlsFile(const std::string& dir, const std::string& text, std::string* error);

}  // namespace ncclscope::profiler
