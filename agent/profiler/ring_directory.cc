#include "agent/profiler/ring_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/core/log.h"

namespace ncclscope::profiler {
namespace {

constexpr const char* kRingPrefix = "ncclscope-";
constexpr const char* kTempPrefix = ".ncclscope-";
constexpr std::uint32_t kDrainRoundsForExited = 1024;  // upper bound on a dead ring's final drain
constexpr time_t kStaleTempSeconds = 60;

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whether nobody holds a lock on `path` (its creator is gone). Takes and drops an exclusive lock.
bool Unowned(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

}  // namespace

RingDirectory::RingDirectory(std::string dir) : dir_(std::move(dir)) {}

void RingDirectory::SetControls(const ncclscope_controls& controls) {
  controls_ = controls;
  ++controls_version_;
}

void RingDirectory::Discover() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(d)) names.emplace_back(entry->d_name);
  ::closedir(d);
  const time_t now = ::time(nullptr);
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    if (name.rfind(kTempPrefix, 0) == 0 && EndsWith(name, ".tmp")) {
      // A plugin died between creating and publishing its ring.
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && now - st.st_mtime > kStaleTempSeconds &&
          Unowned(path)) {
        ::unlink(path.c_str());
      }
      continue;
    }
    if (name.rfind(kRingPrefix, 0) != 0 || !EndsWith(name, NCCLSCOPE_RING_SUFFIX)) continue;
    if (rings_.count(name) != 0) continue;
    if (auto it = rejected_.find(name); it != rejected_.end()) {
      // Left alone while its owner lives; gone once it does not.
      if (Unowned(path)) {
        ::unlink(path.c_str());
        rejected_.erase(it);
      }
      continue;
    }
    std::string reason;
    std::unique_ptr<RingFile> file = RingFile::Open(path, &reason);
    if (file == nullptr) {
      ++snapshot_.rings_rejected[reason];
      rejected_[name] = reason;
      NCCLSCOPE_LOG(kWarn, "profiler") << "ignoring ring " << path << ": " << reason;
      continue;
    }
    if (!file->writable()) {
      NCCLSCOPE_LOG(kWarn, "profiler")
          << "ring " << path << " is read-only for the agent: records are read but the plugin "
          << "cannot reuse their space, and controls cannot be applied";
    }
    NCCLSCOPE_LOG(kDebug, "profiler") << "found ring " << path;
    Tracked tracked;
    tracked.file = std::move(file);
    rings_.emplace(name, std::move(tracked));
  }
}

void RingDirectory::Retire(Tracked& ring) {
  for (std::size_t i = 0; i < retired_counters_.size(); ++i) {
    retired_counters_[i] += ring.last_header.counters[i];
  }
  retired_dropped_ += ring.last_header.dropped_ring_full;
}

bool RingDirectory::Poll(RecordSink& sink) {
  Discover();
  bool more = false;
  DirectorySnapshot& s = snapshot_;
  s.rings_live = s.rings_closed = 0;
  s.comms.clear();
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> live_counters{};
  std::uint64_t live_dropped = 0;

  auto absorb = [&](const DrainStats& stats) {
    for (std::size_t i = 0; i < stats.by_type.size(); ++i) s.records[i] += stats.by_type[i];
    for (std::size_t i = 0; i < stats.corrupt.size(); ++i) s.corrupt[i] += stats.corrupt[i];
    s.lane_resyncs += stats.lane_resyncs;
  };

  for (auto it = rings_.begin(); it != rings_.end();) {
    Tracked& ring = it->second;
    RingFile& file = *ring.file;
    // Decide liveness before draining: records written before the owner died are all in the
    // ring by then, so one full drain after this verdict loses nothing.
    const bool alive = file.OwnerAlive();
    if (controls_ && ring.controls_seq_written != controls_version_ && file.writable()) {
      if (file.WriteControls(*controls_)) ring.controls_seq_written = controls_version_;
    }
    if (alive) {
      const DrainStats stats = file.Drain(sink);
      absorb(stats);
      more = more || stats.more;
    } else {
      for (std::uint32_t round = 0; round < kDrainRoundsForExited; ++round) {
        const DrainStats stats = file.Drain(sink);
        absorb(stats);
        if (!stats.more) break;
      }
    }
    RingHeaderSnapshot header;
    if (file.ReadHeader(&header)) ring.last_header = header;
    if (!file.healthy()) {
      ++s.ring_faults;
      NCCLSCOPE_LOG(kWarn, "profiler") << "ring " << file.path() << " broke (truncated or "
                                       << "rewritten); dropping it";
      Retire(ring);
      if (!alive) ::unlink(file.path().c_str());
      it = rings_.erase(it);
      continue;
    }
    if (!alive) {
      Retire(ring);
      ::unlink(file.path().c_str());
      ++s.rings_reclaimed;
      NCCLSCOPE_LOG(kDebug, "profiler") << "reclaimed ring " << file.path();
      it = rings_.erase(it);
      continue;
    }
    for (std::size_t i = 0; i < live_counters.size(); ++i) {
      live_counters[i] += ring.last_header.counters[i];
    }
    live_dropped += ring.last_header.dropped_ring_full;
    if (ring.last_header.state == NCCLSCOPE_RING_CLOSED) {
      ++s.rings_closed;
    } else {
      ++s.rings_live;
    }
    for (CommSlotSnapshot& slot : file.ReadCommTable()) {
      if (slot.state != NCCLSCOPE_COMM_LIVE) continue;
      s.comms.push_back({std::move(slot), file.origin().hostname, file.origin().pid});
    }
    ++it;
  }
  // Reclaimed rings' final counts plus the live ones: monotonic across reclaims.
  for (std::size_t i = 0; i < live_counters.size(); ++i) {
    s.plugin_counters[i] = retired_counters_[i] + live_counters[i];
  }
  s.dropped_ring_full = retired_dropped_ + live_dropped;
  return more;
}

bool WriteControlsFile(const std::string& dir, const std::string& content, std::string* error) {
  char text[128];  // strerror_r buffer
  const std::string path = dir + "/ncclscope.controls";
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot write " + temp + ": " + strerror_r(errno, text, sizeof(text));
    return false;
  }
  const ssize_t written = ::write(fd, content.data(), content.size());
  ::fchmod(fd, 0644);
  ::close(fd);
  if (written != static_cast<ssize_t>(content.size()) ||
      ::rename(temp.c_str(), path.c_str()) != 0) {
    *error = "cannot write " + path + ": " + strerror_r(errno, text, sizeof(text));
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

}  // namespace ncclscope::profiler
