#include "agent/ebpf/attribution.h"

#include "agent/ebpf/cgroup/kubepods.h"
#include "agent/ebpf/proc/maps.h"

namespace ncclscope::ebpf {

Attributor::Attributor(std::string proc_root, std::unique_ptr<cgroup::CgroupPaths> cgroup_paths,
                       std::unique_ptr<cgroup::PodMetadata> metadata, std::size_t max_label_sets)
    : proc_root_(std::move(proc_root)),
      cgroup_paths_(std::move(cgroup_paths)),
      metadata_(std::move(metadata)),
      max_label_sets_(max_label_sets) {}

PodLabels Attributor::For(const ProcessKey& process, std::uint64_t cgroup_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(process); it != cache_.end()) return it->second;
  }
  PodLabels labels = Resolve(process, cgroup_id);
  std::lock_guard<std::mutex> lock(mutex_);
  labels = Cap(std::move(labels));
  cache_.emplace(process, labels);
  return labels;
}

void Attributor::Forget(const ProcessKey& process) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.erase(process);
}

std::uint64_t Attributor::overflows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return overflows_;
}

PodLabels Attributor::Resolve(const ProcessKey& process, std::uint64_t cgroup_id) {
  std::optional<cgroup::PodRef> ref;
  if (cgroup_paths_ && cgroup_id != 0) {
    if (const auto path = cgroup_paths_->PathOf(cgroup_id)) ref = cgroup::ParseKubepodsPath(*path);
  }
  if (!ref) {
    const std::string dir = proc_root_ + "/" + std::to_string(process.pid);
    const auto text = proc::ReadProcFile(dir + "/cgroup", 64 << 10);
    // Read before checking the start time: if the pid was reused after the read, the check
    // fails and the text is not trusted.
    if (text && proc::StartTicks(proc_root_, process.pid) == process.start_ticks) {
      ref = cgroup::ParseProcCgroup(*text);
    }
  }
  if (!ref) return {};
  PodLabels labels;
  if (!ref->container_id.empty() && metadata_) {
    if (const auto names = metadata_->Lookup(ref->container_id)) {
      return {names->namespace_name, names->pod, names->container};
    }
  }
  labels.pod = ref->pod_uid;
  labels.container = ref->container_id.substr(0, 12);
  return labels;
}

PodLabels Attributor::Cap(PodLabels labels) {
  if (label_sets_.count(labels) != 0) return labels;
  if (label_sets_.size() < max_label_sets_) {
    label_sets_.insert(labels);
    return labels;
  }
  ++overflows_;
  return {"_other", "_other", "_other"};
}

}  // namespace ncclscope::ebpf
