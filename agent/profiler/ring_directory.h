#pragma once

// The rings in the configured directory: discovery, draining, and reclaiming the rings of exited
// processes. One Poll() finds new `ncclscope-<pid>-<ns>.ring` files (validating each; a file that
// fails is counted once by reason and left alone while its owner lives), hands the sink the live
// rings' communicator tables (RecordSink::OnCommTables), then drains every ring into the sink, and
// for a ring whose owner is gone (its flock is free) drains it to the end and deletes it.
// The result of each pass is a snapshot the exporter renders at scrape time without touching any
// mapping. Used by one thread at a time.
//
// The directory is shared with every pod on the node, so everything in it is untrusted and every
// amount of work is bounded (docs/trust-model.md): names are matched before anything is opened,
// only regular files are opened (never a FIFO, a device or a symlink), at most max_rings rings are
// held (one descriptor and one mapping of at most ~33 MiB of metadata each), each pass opens and
// re-checks a bounded number of files, and the names remembered as rejected are bounded. Each ring
// is attributed to the process holding its lock and that process's pod (ring_owner.h).

#include <sys/stat.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/profiler/ring_attribution.h"
#include "agent/profiler/ring_file.h"

namespace ncclscope::profiler {

// Bounds a pass works within whatever the directory holds.
struct DirectoryLimits {
  std::uint32_t max_rings = 256;             // rings held open (plugin.max_rings)
  std::uint32_t opens_per_pass = 64;         // new files opened and validated per pass
  std::uint32_t rechecks_per_pass = 64;      // rejected files checked for an owner per pass
  std::uint32_t max_rejected = 4096;         // rejected names remembered (oldest forgotten)
  std::uint32_t max_names_per_pass = 65536;  // directory entries looked at per pass
  std::uint32_t max_live_slots = 16384;      // live comm slots handed on per pass, all rings
  RingLimits ring;
};

// Why the agent left something out because a bound was reached (each counted).
enum class DirectoryLimit {
  kRings = 0,     // a ring not opened: max_rings are held
  kOpens,         // a file left for a later pass: the pass's open budget was spent
  kRejected,      // a rejected name forgotten: max_rejected were remembered
  kNames,         // directory entries beyond max_names_per_pass, not looked at
  kSlotsPerRing,  // live comm slots beyond RingLimits::max_live_slots of one ring
  kSlotsTotal,    // live comm slots beyond max_live_slots over all rings
  kCount
};
const char* DirectoryLimitName(DirectoryLimit limit);

// What a scrape shows of the directory: gauges of the last pass and counters since the agent
// started. The scrape side copies it whole (a field-by-field copy once left the governor's
// families out of every scrape), so every field added here reaches /metrics' renderer.
struct DirectoryTotals {
  std::uint32_t rings_live = 0;    // owner alive, still recording
  std::uint32_t rings_closed = 0;  // owner alive, every communicator finalized
  std::uint64_t rings_reclaimed = 0;
  std::map<std::string, std::uint64_t> rings_rejected;  // by reason
  std::uint64_t ring_faults = 0;  // rings dropped because their file broke under us
  std::array<std::uint64_t, NCCLSCOPE_REC_TYPE_MAX + 1> records{};
  std::array<std::uint64_t, static_cast<std::size_t>(CorruptReason::kCount)> corrupt{};
  std::uint64_t lane_resyncs = 0;
  // Plugin-side counters and ring-full drops: current rings plus every reclaimed one (saturating).
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> plugin_counters{};
  std::uint64_t dropped_ring_full = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(DirectoryLimit::kCount)> limited{};
  std::uint64_t mapped_bytes = 0;           // metadata mapped, all rings held
  std::uint32_t rejected_remembered = 0;    // names remembered as rejected
  std::uint64_t controls_file_repairs = 0;  // ncclscope.controls rewritten after a change
  std::uint64_t controls_file_errors = 0;   // ncclscope.controls could not be written
  // The plugins' overhead governors (live rings that published a valid state).
  struct Governor {
    std::uint32_t rings = 0;                  // live rings with a governor state
    std::array<std::uint32_t, 5> by_level{};  // ncclscope_governor_level, OFF to FLOOR
    std::uint32_t nccl_override = 0;          // rings whose mask NCCL's RAS took over
    std::uint32_t min_kernel_duty_pm = 1000;  // lowest duty cycles in force
    std::uint32_t min_proxy_duty_pm = 1000;
    std::uint32_t max_load_ppm = 0;       // highest share of a core per GPU, last window
    std::uint64_t max_op_ns = 0;          // highest plugin time per timed op, last window
    std::uint32_t max_record_one_in = 1;  // largest 1-in-N recording in force
  } governor;
};

// A pass's result: the totals, and what the reader thread acts on before the next pass.
struct DirectorySnapshot : DirectoryTotals {
  std::uint64_t listings = 0;               // passes that listed the directory (for tests)
  std::uint32_t fullest_lane_permille = 0;  // of the last pass (DrainStats), paces the next
  std::vector<LiveComm> comms;              // LIVE slots of rings whose owner is alive
  std::vector<std::uint32_t> ring_ids;      // RingOrigin::ring_id of the rings held
};

class RingDirectory {
 public:
  explicit RingDirectory(std::string dir, DirectoryLimits limits = {},
                         std::unique_ptr<RingAttribution> owners = nullptr);

  const std::string& dir() const { return dir_; }
  void SetLimits(const DirectoryLimits& limits) { limits_ = limits; }

  // Controls written into every ring now and into each ring found later.
  void SetControls(const ncclscope_controls& controls);
  // The text <dir>/ncclscope.controls must hold: written now, and written again whenever a pass
  // finds the file changed, replaced or gone (a pod can write the directory).
  void SetControlsFileText(std::string text);

  // One pass. Returns true when some lane had more records than one batch (poll again soon).
  bool Poll(RecordSink& sink);
  // Writes the controls file now if it is not as set (Poll() does this too, every pass).
  void KeepControlsFile();

  const DirectorySnapshot& snapshot() const { return snapshot_; }

 private:
  struct Tracked {
    std::unique_ptr<RingFile> file;
    RingHeaderSnapshot last_header;
    std::uint32_t controls_seq_written = 0;
    // Records came out of it in the last pass: its writer was alive a pass ago, and its lock is
    // not checked this pass (a writer that died since is found in the first pass without records).
    bool delivered_last_pass = false;
  };

  // Poll's steps, in order (the comments at their definitions say why in this order).
  struct Verdict {
    std::map<std::string, Tracked>::iterator ring;
    bool alive = false;
  };
  struct LiveTables {  // the LIVE slots of each live ring that has any
    std::vector<std::vector<CommSlotSnapshot>> tables;
    std::vector<const RingFile*> rings;
    std::size_t slots = 0;
  };
  void BeginPass();
  std::vector<Verdict> DecideLiveness(LiveTables* live);
  void ShareSlots(LiveTables& live);
  bool DrainAndRetire(const std::vector<Verdict>& verdicts, RecordSink& sink);
  bool Drain(Tracked& ring, bool alive, RecordSink& sink);  // true: more than one batch left

  // Whether the directory may have changed since it was last listed (listing it is 7 system
  // calls, most of a quiet pass's: docs/benchmarks.md, "NCCL analytics").
  bool ListingNeeded(int dirfd);
  // Discover's steps: list the names, tidy what earlier passes left, open the new rings.
  struct Listing {
    std::vector<std::string> candidates;     // ring names not tracked and not rejected
    std::vector<std::string> rejected_here;  // ring names rejected before
    std::vector<std::string> temps;          // temporary files of plugins creating a ring
    std::uint32_t seen = 0;                  // names read, one past the limit when cut short
  };
  void Discover(int dirfd);
  bool ListNames(int dirfd, Listing* listing);
  void RecheckLeftovers(int dirfd, const Listing& listing);
  bool OpenCandidates(const std::vector<std::string>& candidates);
  void Track(const std::string& name, const std::string& path, std::unique_ptr<RingFile> file);
  void Retire(Tracked& ring);
  void Reject(const std::string& name, const std::string& reason);
  void KeepControlsFile(int dirfd);

  std::string dir_;
  DirectoryLimits limits_;
  std::unique_ptr<RingAttribution> owners_;
  std::optional<ncclscope_controls> controls_;
  std::uint32_t controls_version_ = 0;
  std::optional<std::string> controls_text_;
  struct stat controls_stat_ {};  // of the controls file we last wrote
  bool controls_written_ = false;
  std::chrono::steady_clock::time_point controls_retry_after_{};
  std::map<std::string, Tracked> rings_;         // by file name
  std::map<std::string, std::string> rejected_;  // file name -> reason (counted once)
  std::deque<std::string> rejected_order_;       // oldest first, for forgetting
  std::size_t recheck_cursor_ = 0;
  struct stat listed_dir_ {};  // the directory as it was when last listed
  std::chrono::steady_clock::time_point listed_at_{};
  bool listing_left_work_ = true;  // the last listing left files for later passes
  DirectorySnapshot snapshot_;
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> retired_counters_{};
  std::uint64_t retired_dropped_ = 0;
};

// Whether `name` is a ring's final name: "ncclscope-<pid>-<created_ns>.ring", digits only.
bool IsRingName(const std::string& name);

// Writes <dir>/ncclscope.controls (read by plugins when they create their ring) atomically: into
// a new file with a random name, created O_EXCL | O_NOFOLLOW (a name a pod planted, as a file or a
// symlink, is never opened), then renamed over the old one. `st` gets the new file's identity.
bool WriteControlsFile(const std::string& dir, const std::string& text, std::string* error,
                       struct stat* st = nullptr);

}  // namespace ncclscope::profiler
