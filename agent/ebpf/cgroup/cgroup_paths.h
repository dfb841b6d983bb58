#pragma once

// cgroup v2 id -> path. bpf_get_current_cgroup_id() names a cgroup by its kernfs id, which on
// cgroup2fs is also the inode number of its directory; the path is found by walking the host's
// unified hierarchy (mounted at /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid v1 hosts).
// Walks are bounded in entries and depth and rate-limited; results are cached.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace ncclscope::ebpf::cgroup {

// The cgroup2 mount under `root`: `root` itself when it is cgroup2fs, else `root`/unified
// (hybrid hosts), else nullopt (v1 only: attribution falls back to /proc/<pid>/cgroup).
std::optional<std::string> FindUnifiedRoot(const std::string& root);

class CgroupPaths {
 public:
  struct Limits {
    std::size_t max_entries = 200'000;
    int max_depth = 32;
    std::chrono::milliseconds min_walk_interval{2000};
  };

  explicit CgroupPaths(std::string unified_root, Limits limits);
  explicit CgroupPaths(std::string unified_root) : CgroupPaths(std::move(unified_root), Limits{}) {}

  // Path of cgroup `id` relative to the unified root ("/" for the root), walking the hierarchy
  // again on a miss unless one walk ran less than min_walk_interval ago. Thread-safe.
  std::optional<std::string> PathOf(std::uint64_t id);

  std::uint64_t walks() const;

 private:
  void Walk();

  const std::string root_;
  const Limits limits_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::string> paths_;
  std::chrono::steady_clock::time_point last_walk_{};
  bool walked_ = false;
  std::uint64_t walks_ = 0;
};

}  // namespace ncclscope::ebpf::cgroup
