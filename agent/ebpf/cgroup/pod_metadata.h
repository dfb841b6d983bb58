#pragma once

// Container id -> Kubernetes namespace, pod and container names, read from the container
// runtime's state on the node (no API server round trip): the OCI bundle's config.json that
// containerd (annotations io.kubernetes.cri.sandbox-namespace / sandbox-name / container-name)
// and CRI-O (io.kubernetes.pod.namespace / pod.name / container.name) write for every container,
// or Docker's config.v2.json labels (same keys as CRI-O). The files are bounded in size and parsed
// without exceptions; results (hits and misses) are cached.

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ncclscope::ebpf::cgroup {

struct PodNames {
  std::string namespace_name;
  std::string pod;
  std::string container;
};

// Names from one runtime state file's text, or nullopt when it has none.
std::optional<PodNames> ParseRuntimeState(std::string_view json_text);

class PodMetadata {
 public:
  // `patterns`: file paths with "{id}" standing for the container id, tried in order, e.g.
  // "/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json".
  explicit PodMetadata(std::vector<std::string> patterns, std::size_t max_cached = 4096);

  std::optional<PodNames> Lookup(const std::string& container_id);

 private:
  const std::vector<std::string> patterns_;
  const std::size_t max_cached_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::optional<PodNames>> cache_;
};

}  // namespace ncclscope::ebpf::cgroup
