#pragma once

// Kubernetes pod and container identity from cgroup paths. Layouts handled (from kubelet's two
// cgroup drivers and the common runtimes; see ../shared/reference/ebpf.md §2.1):
//   systemd driver:  /kubepods.slice/kubepods-burstable.slice/
//                      kubepods-burstable-pod<uid with _>.slice/cri-containerd-<64 hex>.scope
//                    (Guaranteed pods: kubepods-pod<uid>.slice; runtimes cri-containerd-, crio-,
//                    docker-; nested under kubelet.slice/kubelet-kubepods.slice)
//   containerd's systemd form: .../kubepods-...-pod<uid>.slice:cri-containerd:<64 hex>
//   cgroupfs driver: /kubepods/burstable/pod<uid>/<64 hex>  (Guaranteed: /kubepods/pod<uid>/...)
// Paths read from /proc/<pid>/cgroup inside a private cgroup namespace start with "/../..": the
// parser only looks at segments, so those work too. cgroup v1 lines ("4:memory:/kubepods/...")
// carry the same shapes.

#include <optional>
#include <string>
#include <string_view>

namespace ncclscope::ebpf::cgroup {

struct PodRef {
  std::string pod_uid;       // 8-4-4-4-12 lower-case hex with dashes
  std::string container_id;  // hex id of the container, empty when the cgroup is the pod's own
  std::string runtime;       // "containerd", "crio", "docker" or "" (cgroupfs: unknown)
};

// nullopt when the path is not inside a Kubernetes pod.
std::optional<PodRef> ParseKubepodsPath(std::string_view path);

// Picks the pod from /proc/<pid>/cgroup text: the v2 line ("0::...") when it names a pod, else
// the first v1 line that does (the v1 fallback for hosts without a unified hierarchy).
std::optional<PodRef> ParseProcCgroup(std::string_view text);

// The cgroup v2 path from /proc/<pid>/cgroup text ("0::<path>"), if any.
std::optional<std::string> UnifiedPath(std::string_view text);

}  // namespace ncclscope::ebpf::cgroup
