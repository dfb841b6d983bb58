#pragma once

// The loaded BPF objects (bpftool skeletons of bpf/probes.bpf.c and bpf/vma_iter.bpf.c), their
// maps as typed BpfMaps, the event ring, and the kernel's feature probe. Everything that talks to
// libbpf directly lives here, in bpf_map.h, call_counts.cc and in attach/; the rest of agent/ebpf
// sees typed maps and plain structs (the boundary Falco's libpman draws).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/ebpf/attach/attached_probe.h"
#include "agent/ebpf/bpf_map.h"
#include "agent/ebpf/call_counts.h"
#include "ncclscope/bpf_intf.h"

struct ncclscope_probes;
struct ncclscope_vma_iter;
struct bpf_program;
struct ring_buffer;

namespace ncclscope::ebpf {

// Can this process load and attach our BPF programs at all? `reason` says why not, for the log
// and for /healthz.
struct Features {
  bool can_load = false;
  bool has_uprobe_pmu = false;
  bool has_vma_iterator = false;  // iter/task_vma with a pid filter (Linux 6.1+)
  std::string reason;
};

// What probing the kernel found, and the verdict on it (a pure function: tests take the paths
// of kernels this machine is not).
struct FeatureFacts {
  bool objects_loaded = false;
  std::string load_error;  // why the objects did not load
  bool uprobe_pmu = false;
  bool vma_iterator = false;
};
Features DecideFeatures(const FeatureFacts& facts);

// The probe the eBPF source asks (injected: tests pass their own). The kernel's loads the objects
// once per process and throws them away.
using FeatureProbe = std::function<Features()>;
Features ProbeKernelFeatures();

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
  // Calls and bytes per (process, cgroup, function).
  CallCounts calls() const;
  // Failed calls per (process, function, result), and ibv_modify_qp target states.
  BpfMap<ncclscope_result_key, std::uint64_t> results() const;
  BpfMap<ncclscope_result_key, std::uint64_t> qp_states() const;
  // What the BPF side dropped, by enum ncclscope_bpf_counter.
  BpfMap<std::uint32_t, std::uint64_t> counters() const;

  // The real files behind the executable mappings of `pid` (task_vma iterator), or nullopt when
  // the iterator is unavailable or the process is gone.
  std::optional<std::vector<ncclscope_vma_record>> ExecutableMappings(pid_t pid) const;

 private:
  BpfObjects() = default;
  ncclscope_probes* probes_ = nullptr;
  ncclscope_vma_iter* vma_ = nullptr;
  std::vector<AttachedProbe> lifecycle_;
  friend class EventRing;
};

// The BPF ring buffer of process lifecycle and rare API events (ncclscope_event records), owned:
// closed on destruction.
class EventRing {
 public:
  using Handler = std::function<void(const ncclscope_event&)>;
  // `handler` gets each whole record; records of another size are skipped.
  static std::unique_ptr<EventRing> Open(const BpfObjects& objects, Handler handler,
                                         std::string* error);
  ~EventRing();
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // Delivers what arrived, waiting up to `timeout_ms` for something; the records handled, or a
  // negative errno (-EINTR: interrupted, nothing lost).
  int Poll(int timeout_ms);

 private:
  explicit EventRing(Handler handler) : handler_(std::move(handler)) {}
  static int OnRecord(void* ctx, void* data, std::size_t size);
  Handler handler_;
  ring_buffer* ring_ = nullptr;
};

}  // namespace ncclscope::ebpf
