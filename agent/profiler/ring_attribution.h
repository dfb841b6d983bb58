#pragma once

// Who owns a ring, found out by the agent rather than read from the ring: the process holding the
// ring's flock (the plugin takes a shared flock for its whole life) from <proc_root>/locks (parsed
// by ring_owner.h, which also maps the holder to the ring's QP owner), and that process's pod from
// <proc_root>/<pid>/cgroup and the container runtime's state files (the same parsers as the eBPF
// source's attribution, agent/ebpf/cgroup). Every file read is bounded.

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ebpf/cgroup/pod_metadata.h"
#include "agent/profiler/record_sink.h"

namespace ncclscope::profiler {

// The pid holding a FLOCK on the file with device `dev` and inode `ino`, from /proc/locks text
// (ParseProcLocks: waiters are not holders). The first holder when several share the lock.
std::optional<std::int32_t> RingLockHolder(std::string_view proc_locks, dev_t dev, ino_t ino);

// The processes (pids as <proc_root> names them) holding the flock of a ring in `ring_dir`: the
// jobs that load the plugin, each with the profiler ABI its ring's header names (RingHeaderAbi;
// the highest when a process holds several). Files that are not ring names (IsRingName) or not
// regular are ignored; at most kMaxRingWriterEntries directory entries are looked at and
// kMaxRingHeaderReads headers read (the ABI of the rest is 0, unknown). A missing ring directory
// is no writer (no job created it yet); nullopt when <proc_root>/locks cannot be read.
inline constexpr std::size_t kMaxRingWriterEntries = 65536;
inline constexpr std::size_t kMaxRingHeaderReads = 4096;
std::optional<std::map<std::int32_t, std::uint32_t>> RingWriterAbis(const std::string& ring_dir,
                                                                    const std::string& proc_root);

// The profiler ABI NCCL chose, from the header of the ring open at `fd`: nccl_abi when the magic
// and version are the format's and it is 1..kMaxRingAbi, else 0 (unknown, or before the first
// communicator init). One bounded pread of the header's identity fields; nothing is mapped.
inline constexpr std::uint32_t kMaxRingAbi = 7;
std::uint32_t RingHeaderAbi(int fd);

class RingAttribution {
 public:
  // `runtime_state_files`: as ebpf.runtime_state_files ({id} stands for the container id).
  RingAttribution(std::string proc_root, std::vector<std::string> runtime_state_files);

  // Fills the verified fields of `origin` (owner_uid must already be the file's owner).
  void Attribute(const struct stat& st, RingOrigin& origin);

  // Reads <proc_root>/locks once for every Attribute() until the next Refresh().
  void Refresh();

 private:
  std::string proc_root_;
  std::unique_ptr<ebpf::cgroup::PodMetadata> metadata_;
  std::optional<std::string> locks_;
};

}  // namespace ncclscope::profiler
