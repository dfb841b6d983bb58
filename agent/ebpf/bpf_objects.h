#pragma once

// The loaded BPF objects (bpftool skeletons of bpf/probes.bpf.c and bpf/vma_iter.bpf.c) and the
// one-time feature probe. Everything that talks to libbpf directly lives here and in
// attach/bpf_attacher.cc; the rest of agent/ebpf sees file descriptors and plain structs.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/ebpf/attach/attached_probe.h"
#include "ncclscope/bpf_intf.h"

struct ncclscope_probes;
struct ncclscope_vma_iter;
struct bpf_program;

namespace ncclscope::ebpf {

// Can this process load and attach our BPF programs at all? Computed once per process (the
// first call loads the objects and throws them away); `reason` says why not, for the log and
// for /healthz.
struct Features {
  bool can_load = false;
  bool has_uprobe_pmu = false;
  bool has_vma_iterator = false;  // iter/task_vma with a pid filter (Linux 6.1+)
  std::string reason;
};
const Features& ProbeFeatures();

class BpfObjects {
 public:
  static std::unique_ptr<BpfObjects> Load(std::string* error);
  ~BpfObjects();
  BpfObjects(const BpfObjects&) = delete;
  BpfObjects& operator=(const BpfObjects&) = delete;

  // Attaches tp_btf/sched_process_exec and tp_btf/sched_process_exit.
  bool AttachLifecycle(std::string* error);

  bpf_program* entry_program() const;
  bpf_program* return_program() const;
  int calls_fd() const;
  int results_fd() const;
  int qp_states_fd() const;
  int counters_fd() const;
  int events_fd() const;

  // The real files behind the executable mappings of `pid` (task_vma iterator), or nullopt when
  // the iterator is unavailable or the process is gone.
  std::optional<std::vector<ncclscope_vma_record>> ExecutableMappings(pid_t pid) const;

 private:
  BpfObjects() = default;
  ncclscope_probes* probes_ = nullptr;
  ncclscope_vma_iter* vma_ = nullptr;
  std::vector<AttachedProbe> lifecycle_;
};

}  // namespace ncclscope::ebpf
