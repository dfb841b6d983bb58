#include "agent/profiler/ring_attribution.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <tuple>

#include "agent/ebpf/cgroup/kubepods.h"
#include "agent/ebpf/proc/maps.h"
#include "agent/profiler/ring_directory.h"
#include "agent/profiler/ring_owner.h"
#include "platform/fd_io.h"
#include "plugin/ring/ncclscope_ring.h"
#include "plugin/ring/regular_file.h"

namespace ncclscope::profiler {
namespace {

constexpr std::size_t kMaxCgroupText = 64 << 10;

}  // namespace

std::optional<std::int32_t> RingLockHolder(std::string_view proc_locks, dev_t dev, ino_t ino) {
  for (const FlockHolder& holder : ParseProcLocks(proc_locks)) {
    if (holder.major == major(dev) && holder.minor == minor(dev) && holder.inode == ino) {
      return holder.pid;
    }
  }
  return std::nullopt;
}

std::uint32_t RingHeaderAbi(int fd) {
  // The identity fields up to nccl_abi: written once, before the ring got its name.
  constexpr std::size_t kIdentity = offsetof(ncclscope_ring_header, created_ns);
  ncclscope_ring_header header{};
  if (!platform::PreadExactly(fd, &header, kIdentity, 0)) return 0;
  if (header.magic != NCCLSCOPE_RING_MAGIC || header.version != NCCLSCOPE_RING_VERSION) return 0;
  return header.nccl_abi >= 1 && header.nccl_abi <= kMaxRingAbi ? header.nccl_abi : 0;
}

std::optional<std::map<std::int32_t, std::uint32_t>> RingWriterAbis(const std::string& ring_dir,
                                                                    const std::string& proc_root) {
  const auto locks = ebpf::proc::ReadProcFile(proc_root + "/locks", kMaxProcLocksBytes);
  if (!locks) return std::nullopt;
  std::map<std::int32_t, std::uint32_t> writers;
  const int dir_fd = ::open(ring_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return writers;
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return writers;
  }
  // Every ring file by (major, minor, inode), as /proc/locks writes a lock's file, with its name.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, std::string> rings;
  std::size_t entries = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (++entries > kMaxRingWriterEntries) break;
    if (!IsRingName(entry->d_name)) continue;
    struct stat st {};
    if (::fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    rings.emplace(std::make_tuple(major(st.st_dev), minor(st.st_dev), st.st_ino), entry->d_name);
  }
  std::size_t reads = 0;
  for (const FlockHolder& holder : ParseProcLocks(*locks)) {
    const auto ring = rings.find({holder.major, holder.minor, holder.inode});
    if (ring == rings.end()) continue;
    std::uint32_t& abi = writers[holder.pid];
    if (reads >= kMaxRingHeaderReads) continue;
    ++reads;
    // Opened by name again: only a regular file, and only the inode whose lock was found.
    struct stat st {};
    const int fd = ring::OpenRegularFile(dir_fd, ring->second.c_str(), O_RDONLY, &st);
    if (fd < 0) continue;
    if (major(st.st_dev) == holder.major && minor(st.st_dev) == holder.minor &&
        st.st_ino == holder.inode) {
      abi = std::max(abi, RingHeaderAbi(fd));
    }
    ::close(fd);
  }
  ::closedir(dir);
  return writers;
}

RingAttribution::RingAttribution(std::string proc_root,
                                 std::vector<std::string> runtime_state_files)
    : proc_root_(std::move(proc_root)),
      metadata_(std::make_unique<ebpf::cgroup::PodMetadata>(std::move(runtime_state_files))) {}

void RingAttribution::Refresh() {
  locks_ = ebpf::proc::ReadProcFile(proc_root_ + "/locks", kMaxProcLocksBytes);
}

void RingAttribution::Attribute(const struct stat& st, RingOrigin& origin) {
  origin.principal = "uid:" + std::to_string(origin.owner_uid);
  origin.attribution = "claimed";
  if (!locks_) Refresh();
  const auto holder = locks_ ? RingLockHolder(*locks_, st.st_dev, st.st_ino) : std::nullopt;
  if (!holder) return;
  origin.holder_pid = *holder;
  origin.attribution = "process";
  const auto text = ebpf::proc::ReadProcFile(proc_root_ + "/" + std::to_string(*holder) + "/cgroup",
                                             kMaxCgroupText);
  if (!text) return;
  const auto ref = ebpf::cgroup::ParseProcCgroup(*text);
  if (!ref) return;
  origin.attribution = "verified";
  origin.pod = ref->pod_uid;
  origin.container = ref->container_id.substr(0, 12);
  if (!ref->container_id.empty()) {
    if (const auto names = metadata_->Lookup(ref->container_id)) {
      origin.namespace_name = names->namespace_name;
      origin.pod = names->pod;
      origin.container = names->container;
    }
  }
  // Namespaces are Kubernetes' tenant boundary; without the runtime's names, the pod itself is.
  origin.principal =
      !origin.namespace_name.empty() ? "ns:" + origin.namespace_name : "pod:" + ref->pod_uid;
}

}  // namespace ncclscope::profiler
