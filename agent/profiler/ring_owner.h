#pragma once

// The host process behind a ring. A ring header's pid is getpid() in the writer's own pid
// namespace (a container's); the kernel's QP table names tasks in the agent's (the host's, with
// hostPID). The plugin holds a shared flock() on its ring for its whole life
// (plugin/ring/ring_writer.h), and the kernel lists every flock with its holder in /proc/locks:
// the lock's inode, and the holder's thread group id as seen from the pid namespace of that /proc
// mount (fs/locks.c lock_get_status -> locks_translate_pid; the host's pid with the host's /proc).
// Holders of the ring's inode whose innermost pid (the last NSpid entry of /proc/<pid>/status)
// equals the header's pid are the writer.
//
// Why not fcntl(F_OFD_GETLK): Linux keeps flock() locks and POSIX/OFD record locks apart
// (fs/locks.c: flc_flock vs flc_posix lists); F_GETLK and F_OFD_GETLK test only the record locks,
// so they never see the plugin's flock, and for OFD locks they report l_pid = -1 by design
// (locks_translate_pid: "if (IS_OFDLCK(fl)) return -1"). Switching the plugin to record locks to
// make them visible would still give no pid. /proc/locks gives it, for any pid namespace.
//
// Everything read here belongs to other processes and is bounded: /proc/locks to 16 MiB, status
// files to 8 KiB, ring names must be plain file names. The ring is opened by name (O_NOFOLLOW)
// only to learn its inode; the reader's validated mapping is not touched.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/profiler/record_sink.h"

namespace ncclscope::profiler {

// One "FLOCK" line of /proc/locks held (not waited for): "1: FLOCK  ADVISORY  READ 4242
// fe:00:10953155 0 EOF".
struct FlockHolder {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::uint64_t inode = 0;
  std::int32_t pid = 0;
};
std::vector<FlockHolder> ParseProcLocks(std::string_view text);
// How much of /proc/locks is read: thousands of locks are a few hundred KiB.
inline constexpr std::size_t kMaxProcLocksBytes = 16u << 20;

// A numeric field of /proc/<pid>/status ("Tgid"), or the last value of "NSpid" (the pid in the
// process's own namespace).
std::optional<std::int32_t> StatusField(std::string_view status, std::string_view field);
std::optional<std::int32_t> InnermostPid(std::string_view status);

class ProcRingOwners : public HostProcesses {
 public:
  ProcRingOwners(std::string ring_dir, std::string proc_root);

  RingOwner OwnerOf(const RingOrigin& origin) override;
  std::optional<std::int32_t> ThreadGroupOf(std::int32_t task) override;

 private:
  std::optional<std::string> Status(std::int32_t pid) const;

  std::string ring_dir_;
  std::string proc_root_;
};

}  // namespace ncclscope::profiler
