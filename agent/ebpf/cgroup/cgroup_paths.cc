#include "agent/ebpf/cgroup/cgroup_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace ncclscope::ebpf::cgroup {
namespace {

bool IsCgroup2(const std::string& path) {
  struct statfs fs {};
  return statfs(path.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

}  // namespace

std::optional<std::string> FindUnifiedRoot(const std::string& root) {
  if (IsCgroup2(root)) return root;
  if (IsCgroup2(root + "/unified")) return root + "/unified";
  return std::nullopt;
}

CgroupPaths::CgroupPaths(std::string unified_root, Limits limits)
    : root_(std::move(unified_root)), limits_(limits) {}

std::uint64_t CgroupPaths::walks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return walks_;
}

std::optional<std::string> CgroupPaths::PathOf(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = paths_.find(id); it != paths_.end()) return it->second;
  const auto now = std::chrono::steady_clock::now();
  if (walked_ && now - last_walk_ < limits_.min_walk_interval) return std::nullopt;
  Walk();
  last_walk_ = now;
  walked_ = true;
  if (auto it = paths_.find(id); it != paths_.end()) return it->second;
  return std::nullopt;
}

// Iterative depth-first walk; directories only, symlinks never followed (cgroupfs has none, but
// the root is configurable).
void CgroupPaths::Walk() {
  ++walks_;
  std::unordered_map<std::uint64_t, std::string> found;
  struct Pending {
    std::string relative;
    int depth;
  };
  std::vector<Pending> stack{{"", 0}};
  while (!stack.empty() && found.size() < limits_.max_entries) {
    Pending dir = std::move(stack.back());
    stack.pop_back();
    const std::string full = root_ + dir.relative;
    struct stat st {};
    if (lstat(full.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    found.emplace(st.st_ino, dir.relative.empty() ? "/" : dir.relative);
    if (dir.depth >= limits_.max_depth) continue;
    DIR* handle = opendir(full.c_str());
    if (handle == nullptr) continue;
    while (const dirent* entry = readdir(handle)) {  // NOLINT(concurrency-mt-unsafe): own DIR*
      if (entry->d_type != DT_DIR || std::strcmp(entry->d_name, ".") == 0 ||
          std::strcmp(entry->d_name, "..") == 0) {
        continue;
      }
      stack.push_back({dir.relative + "/" + entry->d_name, dir.depth + 1});
    }
    closedir(handle);
  }
  paths_ = std::move(found);
}

}  // namespace ncclscope::ebpf::cgroup
