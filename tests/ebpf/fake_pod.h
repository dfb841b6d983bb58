#pragma once

// A Kubernetes pod as the node sees it, without Kubernetes: a cgroup shaped like kubelet's
// systemd-driver layout (cgroup v2 when the host has a unified hierarchy, else the v1 memory
// hierarchy in the cgroupfs-driver layout) and a containerd-style OCI config.json carrying the
// pod's names. Moving a test program into it gives its probe hits unique pod labels, so tests
// stay exact while other processes on the machine use NCCL too. Needs root.

#include <sys/types.h>

#include <string>

#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

class FakePod {
 public:
  // `state_dir` holds "<container id>/config.json" (runtime_state_files: <state_dir>/{id}/...).
  FakePod(const std::string& state_dir, const std::string& name_space, const std::string& pod,
          const std::string& container, bool cgroup_v1 = false);
  ~FakePod();
  FakePod(const FakePod&) = delete;
  FakePod& operator=(const FakePod&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Moves process `pid` into the pod's container cgroup.
  bool Adopt(pid_t pid);
  // The Prometheus label matcher for this pod, e.g. namespace="a",pod="b",container="c".
  std::string Labels() const;

 private:
  std::string name_space_, pod_, container_;
  std::string leaf_;
  std::string top_;
  std::string error_;
};

// cgroup v2 root writable by this process (/sys/fs/cgroup or its unified/ subdir), or "".
std::string WritableUnifiedCgroupRoot();

}  // namespace ncclscope::testing
