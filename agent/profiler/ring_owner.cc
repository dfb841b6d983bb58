#include "agent/profiler/ring_owner.h"

#include <sys/sysmacros.h>

#include <charconv>

#include "agent/ebpf/cgroup/kubepods.h"
#include "agent/ebpf/proc/maps.h"

namespace ncclscope::profiler {
namespace {

constexpr std::size_t kMaxLocksText = 4 << 20;  // ~80,000 locks
constexpr std::size_t kMaxCgroupText = 64 << 10;

std::string_view NextField(std::string_view& line) {
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  const std::size_t end = line.find(' ');
  const std::string_view field = line.substr(0, end);
  line = end == std::string_view::npos ? std::string_view() : line.substr(end);
  return field;
}

template <typename T>
bool Parse(std::string_view text, T* out, int base) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return result.ec == std::errc() && result.ptr == text.data() + text.size() && !text.empty();
}

}  // namespace

std::optional<std::int32_t> FlockHolder(std::string_view proc_locks, dev_t dev, ino_t ino) {
  while (!proc_locks.empty()) {
    const std::size_t newline = proc_locks.find('\n');
    std::string_view line = proc_locks.substr(0, newline);
    proc_locks =
        newline == std::string_view::npos ? std::string_view() : proc_locks.substr(newline + 1);
    NextField(line);  // "N:"
    std::string_view kind = NextField(line);
    if (kind == "->") continue;  // a waiter
    if (kind != "FLOCK") continue;
    NextField(line);  // ADVISORY
    NextField(line);  // READ / WRITE
    std::int32_t pid = 0;
    if (!Parse(NextField(line), &pid, 10) || pid <= 0) continue;
    std::string_view id = NextField(line);  // maj:min:inode
    const std::size_t c1 = id.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : id.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    unsigned major_dev = 0;
    unsigned minor_dev = 0;
    std::uint64_t inode = 0;
    if (!Parse(id.substr(0, c1), &major_dev, 16) ||
        !Parse(id.substr(c1 + 1, c2 - c1 - 1), &minor_dev, 16) ||
        !Parse(id.substr(c2 + 1), &inode, 10)) {
      continue;
    }
    if (major_dev == major(dev) && minor_dev == minor(dev) && inode == ino) return pid;
  }
  return std::nullopt;
}

RingOwners::RingOwners(std::string proc_root, std::vector<std::string> runtime_state_files)
    : proc_root_(std::move(proc_root)),
      metadata_(std::make_unique<ebpf::cgroup::PodMetadata>(std::move(runtime_state_files))) {}

void RingOwners::Refresh() {
  locks_ = ebpf::proc::ReadProcFile(proc_root_ + "/locks", kMaxLocksText);
}

void RingOwners::Attribute(const struct stat& st, RingOrigin& origin) {
  origin.principal = "uid:" + std::to_string(origin.owner_uid);
  origin.attribution = "claimed";
  if (!locks_) Refresh();
  const auto holder = locks_ ? FlockHolder(*locks_, st.st_dev, st.st_ino) : std::nullopt;
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
