#include "agent/profiler/ring_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "agent/core/log.h"
#include "platform/clock.h"
#include "platform/errno_text.h"
#include "platform/fd_io.h"
#include "plugin/ring/regular_file.h"

namespace ncclscope::profiler {
namespace {

constexpr const char* kRingPrefix = "ncclscope-";
constexpr const char* kTempPrefix = ".ncclscope-";
constexpr const char* kControlsName = NCCLSCOPE_CONTROLS_FILE;
constexpr std::uint32_t kDrainRoundsForExited = 1024;  // upper bound on a dead ring's final drain
constexpr time_t kStaleTempSeconds = 60;
constexpr std::uint32_t kRejectionsLoggedPerPass = 4;

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool AllDigits(const std::string& text, std::size_t begin, std::size_t end) {
  if (begin >= end) return false;
  for (std::size_t i = begin; i < end; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// Whether nobody holds a lock on `name` (its creator is gone). Takes and drops an exclusive lock.
// Only a regular file is opened (a FIFO would block the open, a device would run its driver).
bool Unowned(int dirfd, const char* name) {
  struct stat st {};
  const int fd = ring::OpenRegularFile(dirfd, name, O_RDONLY, &st);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

// Unique over the agent's life, across RingDirectory instances (a reconfigured source makes a new
// one while the analytics, which remember which ring owns what, live on).
std::uint32_t NextRingId() {
  static std::atomic<std::uint32_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

std::string Errno(const std::string& what) {
  return what + ": " + platform::ErrnoText(errno).c_str();
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mode == b.st_mode && a.st_uid == b.st_uid && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

}  // namespace

const char* DirectoryLimitName(DirectoryLimit limit) {
  switch (limit) {
    case DirectoryLimit::kRings:
      return "rings";
    case DirectoryLimit::kOpens:
      return "opens_per_pass";
    case DirectoryLimit::kRejected:
      return "rejected_names";
    case DirectoryLimit::kNames:
      return "directory_entries";
    case DirectoryLimit::kSlotsPerRing:
      return "comm_slots_per_ring";
    case DirectoryLimit::kSlotsTotal:
      return "comm_slots_total";
    case DirectoryLimit::kCount:
      break;
  }
  return "unknown";
}

bool IsRingName(const std::string& name) {
  const std::size_t prefix = std::strlen(kRingPrefix);
  const std::size_t suffix = std::strlen(NCCLSCOPE_RING_SUFFIX);
  if (name.size() > NCCLSCOPE_MAX_RING_NAME || name.size() <= prefix + suffix ||
      name.rfind(kRingPrefix, 0) != 0 || !EndsWith(name, NCCLSCOPE_RING_SUFFIX)) {
    return false;
  }
  const std::size_t end = name.size() - suffix;
  const std::size_t dash = name.find('-', prefix);
  return dash != std::string::npos && dash < end && AllDigits(name, prefix, dash) &&
         AllDigits(name, dash + 1, end);
}

RingDirectory::RingDirectory(std::string dir, DirectoryLimits limits,
                             std::unique_ptr<RingAttribution> owners)
    : dir_(std::move(dir)), limits_(limits), owners_(std::move(owners)) {
  if (!owners_) owners_ = std::make_unique<RingAttribution>("/proc", std::vector<std::string>{});
}

void RingDirectory::SetControls(const ncclscope_controls& controls) {
  controls_ = controls;
  ++controls_version_;
}

void RingDirectory::SetControlsFileText(std::string text) {
  controls_text_ = std::move(text);
  controls_written_ = false;
}

void RingDirectory::Reject(const std::string& name, const std::string& reason) {
  ++snapshot_.rings_rejected[reason];
  if (rejected_.size() >= limits_.max_rejected && !rejected_order_.empty()) {
    // Forget the oldest: if still there it is opened (and counted) again in a later pass.
    rejected_.erase(rejected_order_.front());
    rejected_order_.pop_front();
    ++snapshot_.limited[static_cast<std::size_t>(DirectoryLimit::kRejected)];
  }
  if (rejected_.emplace(name, reason).second) rejected_order_.push_back(name);
}

bool RingDirectory::ListingNeeded(int dirfd) {
  struct stat st {};
  const auto now = std::chrono::steady_clock::now();
  if (::fstat(dirfd, &st) != 0) return true;
  auto same_time = [](const timespec& a, const timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
  };
  const bool unchanged = st.st_dev == listed_dir_.st_dev && st.st_ino == listed_dir_.st_ino &&
                         same_time(st.st_mtim, listed_dir_.st_mtim) &&
                         same_time(st.st_ctim, listed_dir_.st_ctim);
  // A name added in the same timestamp tick as the last listing leaves the mtime as it was: while
  // the directory changed in the last two seconds (or claims a future time), list every pass.
  const auto real_s = static_cast<time_t>(platform::RealtimeNs() / 1'000'000'000);
  const bool recent = st.st_mtim.tv_sec > real_s - 2 || st.st_ctim.tv_sec > real_s - 2;
  // And at least once a second whatever the directory says (rechecks, stale temporary files).
  if (unchanged && !recent && !listing_left_work_ && now - listed_at_ < std::chrono::seconds(1)) {
    return false;
  }
  listed_dir_ = st;
  listed_at_ = now;
  return true;
}

void RingDirectory::Discover(int dirfd) {
  listing_left_work_ = true;  // until this listing is through
  ++snapshot_.listings;
  Listing listing;
  if (!ListNames(dirfd, &listing)) return;
  RecheckLeftovers(dirfd, listing);
  // Files this listing leaves for a later one: list again next pass, whatever the directory says.
  const bool left = listing.seen > limits_.max_names_per_pass || !listing.rejected_here.empty() ||
                    !listing.temps.empty();
  listing_left_work_ = OpenCandidates(listing.candidates) || left;
}

// The directory's names, sorted into new ring names, rejected ones and temporary files; false when
// it cannot be listed.
bool RingDirectory::ListNames(int dirfd, Listing* listing) {
  const int list_fd = ::dup(dirfd);
  if (list_fd < 0) return false;
  DIR* d = ::fdopendir(list_fd);
  if (d == nullptr) {
    ::close(list_fd);
    return false;
  }
  while (dirent* entry = ::readdir(d)) {
    if (++listing->seen > limits_.max_names_per_pass) {
      ++snapshot_.limited[static_cast<std::size_t>(DirectoryLimit::kNames)];
      break;
    }
    const std::size_t length = ::strnlen(entry->d_name, sizeof(entry->d_name));
    if (length > NCCLSCOPE_MAX_RING_NAME) continue;
    std::string name(entry->d_name, length);
    if (name.rfind(kTempPrefix, 0) == 0 && EndsWith(name, ".tmp")) {
      listing->temps.push_back(std::move(name));
      continue;
    }
    if (!IsRingName(name) || rings_.count(name) != 0) continue;
    if (rejected_.count(name) != 0) {
      listing->rejected_here.push_back(std::move(name));
    } else {
      listing->candidates.push_back(std::move(name));
    }
  }
  ::closedir(d);
  return true;
}

// Rejected names and stale temporary files: a bounded, rotating share per pass.
void RingDirectory::RecheckLeftovers(int dirfd, const Listing& listing) {
  std::uint32_t rechecks = 0;
  const std::vector<std::string>& rejected_here = listing.rejected_here;
  const std::size_t n_rejected = rejected_here.size();
  for (std::size_t k = 0; k < n_rejected && rechecks < limits_.rechecks_per_pass; ++k, ++rechecks) {
    const std::string& name = rejected_here[(recheck_cursor_ + k) % n_rejected];
    // Left alone while its owner lives; gone once it does not.
    if (Unowned(dirfd, name.c_str())) {
      ::unlinkat(dirfd, name.c_str(), 0);
      rejected_.erase(name);
      const auto order = std::find(rejected_order_.begin(), rejected_order_.end(), name);
      if (order != rejected_order_.end()) rejected_order_.erase(order);
    }
  }
  recheck_cursor_ += rechecks;
  const time_t now = ::time(nullptr);
  for (const std::string& name : listing.temps) {
    if (rechecks++ >= limits_.rechecks_per_pass) break;
    // A plugin died between creating and publishing its ring.
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        now - st.st_mtime > kStaleTempSeconds && Unowned(dirfd, name.c_str())) {
      ::unlinkat(dirfd, name.c_str(), 0);
    }
  }
}

// Opens and tracks the new rings, within the pass's bounds; true when some are left for later.
bool RingDirectory::OpenCandidates(const std::vector<std::string>& candidates) {
  std::uint32_t opens = 0;
  std::uint32_t logged_rejections = 0;
  bool refreshed = false;
  bool left = false;
  for (const std::string& name : candidates) {
    if (rings_.size() >= limits_.max_rings) {
      ++snapshot_.limited[static_cast<std::size_t>(DirectoryLimit::kRings)];
      left = true;
      continue;
    }
    if (opens >= limits_.opens_per_pass) {
      ++snapshot_.limited[static_cast<std::size_t>(DirectoryLimit::kOpens)];
      left = true;
      continue;
    }
    ++opens;
    const std::string path = dir_ + "/" + name;
    std::string reason;
    std::unique_ptr<RingFile> file = RingFile::Open(path, &reason, limits_.ring);
    if (file == nullptr) {
      Reject(name, reason);
      // A pod can make thousands of these: a few per pass in the log, every one in the metric.
      if (++logged_rejections <= kRejectionsLoggedPerPass) {
        NCCLSCOPE_LOG(kWarn, "profiler") << "ignoring ring " << path << ": " << reason;
      }
      continue;
    }
    if (!refreshed) {
      owners_->Refresh();  // the lock table once per pass that found rings
      refreshed = true;
    }
    Track(name, path, std::move(file));
  }
  return left;
}

// A newly opened ring: its id and owner, and into rings_.
void RingDirectory::Track(const std::string& name, const std::string& path,
                          std::unique_ptr<RingFile> file) {
  file->mutable_origin().ring_id = NextRingId();
  owners_->Attribute(file->stat(), file->mutable_origin());
  if (!file->writable()) {
    NCCLSCOPE_LOG(kWarn, "profiler")
        << "ring " << path << " is read-only for the agent: records are read but the plugin "
        << "cannot reuse their space, and controls cannot be applied";
  }
  NCCLSCOPE_LOG(kDebug, "profiler") << "found ring " << path << " (" << file->origin().attribution
                                    << ", " << file->origin().principal << ")";
  Tracked tracked;
  tracked.file = std::move(file);
  rings_.emplace(name, std::move(tracked));
}

void RingDirectory::KeepControlsFile(int dirfd) {
  if (!controls_text_) return;
  struct stat st {};
  const bool present = ::fstatat(dirfd, kControlsName, &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (controls_written_ && present && SameFile(st, controls_stat_)) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < controls_retry_after_) return;
  const bool repair = controls_written_;
  std::string error;
  struct stat written {};
  if (!WriteControlsFile(dir_, *controls_text_, &error, &written)) {
    ++snapshot_.controls_file_errors;
    controls_retry_after_ = now + std::chrono::seconds(10);  // and log at most that often
    NCCLSCOPE_LOG(kWarn, "profiler") << error << " (jobs start on their built-in defaults)";
    return;
  }
  controls_stat_ = written;
  controls_written_ = true;
  if (repair) {
    ++snapshot_.controls_file_repairs;
    NCCLSCOPE_LOG(kWarn, "profiler")
        << dir_ << "/" << kControlsName << " was changed or removed by someone else: rewritten";
  }
}

void RingDirectory::KeepControlsFile() {
  const int dirfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return;
  KeepControlsFile(dirfd);
  ::close(dirfd);
}

void RingDirectory::Retire(Tracked& ring) {
  for (std::size_t i = 0; i < retired_counters_.size(); ++i) {
    retired_counters_[i] = SaturatingAdd(retired_counters_[i], ring.last_header.counters[i]);
  }
  retired_dropped_ = SaturatingAdd(retired_dropped_, ring.last_header.dropped_ring_full);
}

namespace {

// One live ring's governor state into the node's summary, if it makes sense (the ring is
// untrusted: a state out of range is ignored).
void AbsorbGovernor(const ncclscope_governor_state& g, DirectoryTotals::Governor& out) {
  if (g.level == NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE && g.sample_every != 0) {
    ++out.nccl_override;  // its mask is NCCL's: the duty cycles and the load say nothing
    return;
  }
  if (g.level > NCCLSCOPE_GOVERNOR_FLOOR || g.kernel_duty_pm > 1000 || g.proxy_duty_pm > 1000 ||
      g.sample_every == 0) {
    return;  // not written yet (sample_every 0), or nonsense
  }
  ++out.rings;
  ++out.by_level[g.level];
  out.min_kernel_duty_pm = std::min(out.min_kernel_duty_pm, g.kernel_duty_pm);
  out.min_proxy_duty_pm = std::min(out.min_proxy_duty_pm, g.proxy_duty_pm);
  out.max_load_ppm = std::max(out.max_load_ppm, g.load_ppm);
  out.max_op_ns = std::max(out.max_op_ns, g.op_ns);
  // 0 from plugins before record_one_in, or before their first second; bounded as the setting.
  if (g.record_one_in <= NCCLSCOPE_MAX_RECORD_ONE_IN) {
    out.max_record_one_in = std::max(out.max_record_one_in, g.record_one_in);
  }
}

}  // namespace

bool RingDirectory::Poll(RecordSink& sink) {
  const int dirfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd >= 0) {
    if (ListingNeeded(dirfd)) Discover(dirfd);
    KeepControlsFile(dirfd);
    ::close(dirfd);
  }
  BeginPass();
  // First which rings are alive, and the live rings' communicator tables, before any record is
  // drained: the sink learns every communicator a live ring lists (its size, its local ranks)
  // before the pass's records, so a record waits for its communicator (NcclAnalytics' held
  // records) only when the communicator appeared between the table read and the drain.
  LiveTables live;
  const std::vector<Verdict> verdicts = DecideLiveness(&live);
  ShareSlots(live);
  sink.OnCommTables(snapshot_.comms);
  return DrainAndRetire(verdicts, sink);
}

void RingDirectory::BeginPass() {
  DirectorySnapshot& s = snapshot_;
  s.rings_live = s.rings_closed = 0;
  s.fullest_lane_permille = 0;
  s.comms.clear();
  s.ring_ids.clear();
  s.mapped_bytes = 0;
  s.governor = {};
}

std::vector<RingDirectory::Verdict> RingDirectory::DecideLiveness(LiveTables* live) {
  std::vector<Verdict> verdicts;
  verdicts.reserve(rings_.size());
  for (auto it = rings_.begin(); it != rings_.end(); ++it) {
    RingFile& file = *it->second.file;
    // Decide liveness before draining: records written before the owner died are all in the
    // ring by then, so one full drain after this verdict loses nothing. A ring that delivered
    // records in the last pass is taken as alive without asking its lock (one flock per ring per
    // pass otherwise): a writer that died since leaves no new records, and the first pass that
    // finds none asks, drains to the end and reclaims.
    const bool alive = it->second.delivered_last_pass || file.OwnerAlive();
    verdicts.push_back({it, alive});
    if (!alive) continue;
    std::vector<CommSlotSnapshot> table = file.ReadCommTable();
    snapshot_.limited[static_cast<std::size_t>(DirectoryLimit::kSlotsPerRing)] +=
        file.slots_over_limit();
    std::erase_if(table,
                  [](const CommSlotSnapshot& slot) { return slot.state != NCCLSCOPE_COMM_LIVE; });
    if (!table.empty()) {
      live->slots += table.size();
      live->tables.push_back(std::move(table));
      live->rings.push_back(&file);
    }
  }
  return verdicts;
}

void RingDirectory::ShareSlots(LiveTables& live) {
  DirectorySnapshot& s = snapshot_;
  // Over the total, every ring keeps an equal share: many rings cannot crowd out one.
  std::size_t share = SIZE_MAX;
  if (live.slots > limits_.max_live_slots && !live.tables.empty()) {
    share = std::max<std::size_t>(1, limits_.max_live_slots / live.tables.size());
  }
  s.comms.reserve(std::min<std::size_t>(live.slots, limits_.max_live_slots));
  for (std::size_t r = 0; r < live.tables.size(); ++r) {
    const RingOrigin& origin = live.rings[r]->origin();
    std::size_t taken = 0;
    for (CommSlotSnapshot& slot : live.tables[r]) {
      if (taken == share || s.comms.size() >= limits_.max_live_slots) {
        ++s.limited[static_cast<std::size_t>(DirectoryLimit::kSlotsTotal)];
        continue;
      }
      s.comms.push_back({std::move(slot), &origin});
      ++taken;
    }
  }
}

bool RingDirectory::DrainAndRetire(const std::vector<Verdict>& verdicts, RecordSink& sink) {
  DirectorySnapshot& s = snapshot_;
  bool more = false;
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> live_counters{};
  std::uint64_t live_dropped = 0;
  for (const Verdict& verdict : verdicts) {
    Tracked& ring = verdict.ring->second;
    RingFile& file = *ring.file;
    if (controls_ && ring.controls_seq_written != controls_version_ && file.writable()) {
      if (file.WriteControls(*controls_)) ring.controls_seq_written = controls_version_;
    }
    more = Drain(ring, verdict.alive, sink) || more;
    // The exact counts, after the records (which introduce the communicators), and for a ring
    // whose process is gone once more before it is reclaimed: its last totals.
    for (const OpCounts& counts : file.ReadCounts()) sink.OnOpCounts(file.origin(), counts);
    RingHeaderSnapshot header;
    if (file.ReadHeader(&header)) ring.last_header = header;
    if (!file.healthy()) {
      ++s.ring_faults;
      NCCLSCOPE_LOG(kWarn, "profiler") << "ring " << file.path() << " broke (truncated, holed or "
                                       << "rewritten); dropping it";
      // Its communicators leave the snapshot with it (their origin is about to go).
      std::erase_if(s.comms, [&](const LiveComm& c) { return c.origin == &file.origin(); });
      Retire(ring);
      if (!verdict.alive) ::unlink(file.path().c_str());
      rings_.erase(verdict.ring);
      continue;
    }
    if (!verdict.alive) {
      Retire(ring);
      ::unlink(file.path().c_str());
      ++s.rings_reclaimed;
      NCCLSCOPE_LOG(kDebug, "profiler") << "reclaimed ring " << file.path();
      rings_.erase(verdict.ring);
      continue;
    }
    s.mapped_bytes += file.mapped_bytes();
    s.ring_ids.push_back(file.origin().ring_id);
    for (std::size_t i = 0; i < live_counters.size(); ++i) {
      live_counters[i] = SaturatingAdd(live_counters[i], ring.last_header.counters[i]);
    }
    live_dropped = SaturatingAdd(live_dropped, ring.last_header.dropped_ring_full);
    AbsorbGovernor(ring.last_header.governor, s.governor);
    if (ring.last_header.state == NCCLSCOPE_RING_CLOSED) {
      ++s.rings_closed;
    } else {
      ++s.rings_live;
    }
  }
  // Reclaimed rings' final counts plus the live ones: monotonic across reclaims.
  for (std::size_t i = 0; i < live_counters.size(); ++i) {
    s.plugin_counters[i] = SaturatingAdd(retired_counters_[i], live_counters[i]);
  }
  s.dropped_ring_full = SaturatingAdd(retired_dropped_, live_dropped);
  s.rejected_remembered = static_cast<std::uint32_t>(rejected_.size());
  return more;
}

bool RingDirectory::Drain(Tracked& ring, bool alive, RecordSink& sink) {
  DirectorySnapshot& s = snapshot_;
  const auto absorb = [&s](const DrainStats& stats) {
    for (std::size_t i = 0; i < stats.by_type.size(); ++i) s.records[i] += stats.by_type[i];
    for (std::size_t i = 0; i < stats.corrupt.size(); ++i) s.corrupt[i] += stats.corrupt[i];
    s.lane_resyncs += stats.lane_resyncs;
    s.fullest_lane_permille = std::max(s.fullest_lane_permille, stats.fullest_lane_permille);
  };
  if (alive) {
    const DrainStats stats = ring.file->Drain(sink);
    absorb(stats);
    ring.delivered_last_pass = stats.records > 0;
    return stats.more;
  }
  // Its owner is gone: everything it wrote is in the ring; drain it to the end (bounded).
  for (std::uint32_t round = 0; round < kDrainRoundsForExited; ++round) {
    const DrainStats stats = ring.file->Drain(sink);
    absorb(stats);
    if (!stats.more) break;
  }
  return false;
}

bool WriteControlsFile(const std::string& dir, const std::string& content, std::string* error,
                       struct stat* st) {
  const std::string path = dir + "/" + kControlsName;
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    *error = Errno("cannot write " + path);
    return false;
  }
  // A name nobody can have planted beforehand; O_EXCL | O_NOFOLLOW refuse it anyway if so.
  std::uint64_t random[2] = {};
  if (::getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    random[0] =
        static_cast<std::uint64_t>(::getpid()) ^ static_cast<std::uint64_t>(::time(nullptr));
  }
  char temp[96];
  std::snprintf(temp, sizeof(temp), ".%s.%016llx%016llx.tmp", kControlsName,
                static_cast<unsigned long long>(random[0]),
                static_cast<unsigned long long>(random[1]));
  const int fd = ::openat(dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = Errno("cannot create " + dir + "/" + temp);
    ::close(dirfd);
    return false;
  }
  const bool ok = platform::WriteAll(fd, content.data(), content.size()) &&
                  ::fchmod(fd, 0644) == 0 && (st == nullptr || ::fstat(fd, st) == 0);
  ::close(fd);
  if (!ok || ::renameat(dirfd, temp, dirfd, kControlsName) != 0) {
    *error = Errno("cannot write " + path);
    ::unlinkat(dirfd, temp, 0);
    ::close(dirfd);
    return false;
  }
  // The rename changes the file's ctime: record what the directory now holds.
  if (st != nullptr) ::fstatat(dirfd, kControlsName, st, AT_SYMLINK_NOFOLLOW);
  ::close(dirfd);
  return true;
}

}  // namespace ncclscope::profiler
