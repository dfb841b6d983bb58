#pragma once

// Process -> (namespace, pod, container) labels, the same label names as kube-state-metrics and
// dcgm-exporter so the series join. Order of evidence:
//   1. the cgroup v2 id the BPF side recorded -> its path under the host's unified hierarchy;
//   2. /proc/<pid>/cgroup (v2 line, else v1 lines: the v1 fallback), checked against the
//      process's start time so a reused pid cannot lend its cgroup;
//   3. pod and container ids from the path -> names from the runtime's state files; without
//      them, pod = pod UID and container = the first 12 characters of the container id.
// Host processes get empty labels. At most max_label_sets distinct label sets are handed out;
// later ones map to pod="_other" (counted), so a node churning pods cannot grow the series
// without bound.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "agent/ebpf/attach/registry.h"
#include "agent/ebpf/cgroup/cgroup_paths.h"
#include "agent/ebpf/cgroup/pod_metadata.h"

namespace ncclscope::ebpf {

struct PodLabels {
  std::string namespace_name;
  std::string pod;
  std::string container;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend auto operator<=>(const PodLabels&, const PodLabels&) = default;
};

class Attributor {
 public:
  Attributor(std::string proc_root, std::unique_ptr<cgroup::CgroupPaths> cgroup_paths,
             std::unique_ptr<cgroup::PodMetadata> metadata, std::size_t max_label_sets);

  // Labels of a process (cached until Forget).
  PodLabels For(const ProcessKey& process, std::uint64_t cgroup_id);
  void Forget(const ProcessKey& process);

  std::uint64_t overflows() const;

 private:
  PodLabels Resolve(const ProcessKey& process, std::uint64_t cgroup_id);
  PodLabels Cap(PodLabels labels);

  const std::string proc_root_;
  std::unique_ptr<cgroup::CgroupPaths> cgroup_paths_;
  std::unique_ptr<cgroup::PodMetadata> metadata_;
  const std::size_t max_label_sets_;
  mutable std::mutex mutex_;
  std::map<ProcessKey, PodLabels> cache_;
  std::set<PodLabels> label_sets_;
  std::uint64_t overflows_ = 0;
};

}  // namespace ncclscope::ebpf
