#include "agent/profiler/ring_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "agent/ebpf/proc/maps.h"

namespace ncclscope::profiler {
namespace {

constexpr std::size_t kMaxStatusBytes = 8192;  // /proc/<pid>/status is about 1.5 KiB

template <typename T>
bool ParseNumber(std::string_view text, T* value, int base = 10) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value, base);
  return error == std::errc() && end == text.data() + text.size();
}

// Whitespace-separated fields of one line.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

// The value part of "Name:\t..." in a status file, or nullopt.
std::optional<std::string_view> StatusLine(std::string_view status, std::string_view field) {
  std::size_t at = 0;
  while (at < status.size()) {
    std::size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    const std::string_view line = status.substr(at, end - at);
    if (line.size() > field.size() && line.substr(0, field.size()) == field &&
        line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::vector<FlockHolder> ParseProcLocks(std::string_view text) {
  // fs/locks.c lock_get_status: "<id>: " then, for a waiter, "-> "; for flock() locks
  // "FLOCK  ADVISORY  " then "READ " / "WRITE ", then "<pid> <major>:<minor>:<inode> " with major
  // and minor in hex (%02x) and the inode in decimal, then the range ("0 EOF").
  std::vector<FlockHolder> holders;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::vector<std::string_view> f = Fields(text.substr(at, end - at));
    at = end + 1;
    if (f.size() < 6 || f[0].empty() || f[0].back() != ':' || f[1] != "FLOCK") continue;
    FlockHolder h;
    const std::string_view id = f[5];
    const std::size_t c1 = id.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : id.find(':', c1 + 1);
    if (c2 == std::string_view::npos || !ParseNumber(f[4], &h.pid) || h.pid <= 0 ||
        !ParseNumber(id.substr(0, c1), &h.major, 16) ||
        !ParseNumber(id.substr(c1 + 1, c2 - c1 - 1), &h.minor, 16) ||
        !ParseNumber(id.substr(c2 + 1), &h.inode)) {
      continue;
    }
    holders.push_back(h);
  }
  return holders;
}

std::optional<std::int32_t> StatusField(std::string_view status, std::string_view field) {
  const std::optional<std::string_view> value = StatusLine(status, field);
  if (!value) return std::nullopt;
  const std::vector<std::string_view> f = Fields(*value);
  std::int32_t n = 0;
  if (f.size() != 1 || !ParseNumber(f[0], &n)) return std::nullopt;
  return n;
}

std::optional<std::int32_t> InnermostPid(std::string_view status) {
  const std::optional<std::string_view> value = StatusLine(status, "NSpid");
  if (!value) return std::nullopt;
  const std::vector<std::string_view> f = Fields(*value);
  std::int32_t n = 0;
  if (f.empty() || !ParseNumber(f.back(), &n)) return std::nullopt;
  return n;
}

ProcRingOwners::ProcRingOwners(std::string ring_dir, std::string proc_root)
    : ring_dir_(std::move(ring_dir)), proc_root_(std::move(proc_root)) {}

std::optional<std::string> ProcRingOwners::Status(std::int32_t pid) const {
  return ebpf::proc::ReadProcFile(proc_root_ + "/" + std::to_string(pid) + "/status",
                                  kMaxStatusBytes);
}

RingOwner ProcRingOwners::OwnerOf(const RingOrigin& origin) {
  RingOwner unknown;
  // Names come from the directory listing; still, only a plain name may be joined to the path.
  if (origin.ring.empty() || origin.ring.find('/') != std::string::npos || origin.ring == "." ||
      origin.ring == ".." || origin.pid <= 0) {
    return unknown;
  }
  const std::string path = ring_dir_ + "/" + origin.ring;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return unknown;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return unknown;
  const std::optional<std::string> locks =
      ebpf::proc::ReadProcFile(proc_root_ + "/locks", kMaxProcLocksBytes);
  if (!locks) return unknown;
  // /proc/locks names the lock's superblock device, which is stat's st_dev on tmpfs and most
  // filesystems (not on btrfs subvolumes or overlayfs files): take exact matches when there are
  // some, else the inode alone; the pid check below keeps a wrong match out either way.
  std::vector<std::int32_t> exact;
  std::vector<std::int32_t> by_inode;
  for (const FlockHolder& h : ParseProcLocks(*locks)) {
    if (h.inode != st.st_ino) continue;
    by_inode.push_back(h.pid);
    if (h.major == major(st.st_dev) && h.minor == minor(st.st_dev)) exact.push_back(h.pid);
  }
  std::vector<std::int32_t>& candidates = exact.empty() ? by_inode : exact;
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  RingOwner found;
  int matches = 0;
  for (const std::int32_t pid : candidates) {
    const std::optional<std::string> status = Status(pid);
    if (!status || InnermostPid(*status) != origin.pid) continue;
    found.pid = StatusField(*status, "Tgid").value_or(pid);
    ++matches;
  }
  if (matches == 1) {
    found.status = OwnerStatus::kOk;
    return found;
  }
  if (matches > 1) return {OwnerStatus::kAmbiguous, 0};
  return unknown;
}

std::optional<std::int32_t> ProcRingOwners::ThreadGroupOf(std::int32_t task) {
  if (task <= 0) return std::nullopt;
  // /proc/<tid>/status exists for every thread, though readdir lists only thread group leaders.
  const std::optional<std::string> status = Status(task);
  if (!status) return std::nullopt;
  return StatusField(*status, "Tgid");
}

}  // namespace ncclscope::profiler
