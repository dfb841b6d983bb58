#pragma once

// Everything the running eBPF source owns, in construction order (destroyed in reverse): the
// BPF objects, the attacher and registry over them, discovery, attribution, the ring buffer and
// the worker thread that drives discovery from exec/exit events, rescans and sweeps. State that
// scrapes read (folded totals of exited processes, live communicators) is guarded by one mutex.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/config/config.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/ebpf/attach/bpf_attacher.h"
#include "agent/ebpf/attach/registry.h"
#include "agent/ebpf/attribution.h"
#include "agent/ebpf/bpf_objects.h"
#include "agent/ebpf/coverage.h"
#include "agent/ebpf/discovery.h"
#include "agent/ebpf/process_facts.h"

namespace ncclscope::ebpf {

// Counts of exited processes, kept so counters never go down when a process's BPF map entries
// are deleted.
struct CallTotals {
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;
};
struct Totals {
  std::map<std::tuple<PodLabels, std::uint32_t>, CallTotals> calls;
  std::map<std::tuple<PodLabels, std::uint32_t, std::int64_t>, std::uint64_t> results;
  std::map<std::tuple<PodLabels, std::int64_t>, std::uint64_t> qp_states;
  std::map<PodLabels, std::uint64_t> aborts;
};

struct Communicator {
  std::int32_t nranks = -1;
  std::int32_t rank = -1;
  PodLabels labels;
};

// Where the profiler rings are, for coverage; `writers` empty: not exported. `errors`: where
// failed reads of processes' environ, maps and libraries are counted (may be null).
struct Coverage {
  std::string ring_dir;
  RingWriters writers;
  ErrorCounters* errors = nullptr;
};

class Runtime {
 public:
  // Loads, attaches the lifecycle tracepoints and starts the worker; nullptr with *error when the
  // source cannot run.
  static std::shared_ptr<Runtime> Start(const config::EbpfConfig& config, Coverage coverage,
                                        const Features& features, std::string* error);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void Render(metrics::TextWriter& out) const;

 private:
  Runtime() = default;
  void Work();
  void HandleEvent(const ncclscope_event& event);
  // Moves the BPF map entries of `dead` processes into totals_ (state_mutex_ held).
  void Fold(const std::set<ProcessKey>& dead);
  // Processes in the BPF maps that no longer exist.
  std::set<ProcessKey> DeadInMaps() const;

  // Reads who holds a ring, which processes use NCCL and why each is covered or not (worker
  // only, every kCoverageRefresh; runtime_coverage.cc).
  void RefreshCoverage();

  // Render's steps (state_mutex_ held; render.cc): the folded totals of exited processes plus
  // what the BPF maps hold for live ones; the probes' own counters (attachments, scans, drops).
  Totals LiveTotals() const;
  void RenderSelfMetrics(metrics::FamilySet& families) const;

  config::EbpfConfig config_;
  Coverage coverage_;
  std::unique_ptr<BpfObjects> objects_;
  std::unique_ptr<BpfAttacher> attacher_;
  std::unique_ptr<AttachRegistry> registry_;
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<Attributor> attributor_;
  std::unique_ptr<EventRing> events_;
  std::unique_ptr<ProcessFactsReader> facts_;  // worker only; null without coverage

  mutable std::mutex state_mutex_;
  Totals totals_;
  std::map<ProcessKey, std::map<std::uint64_t, Communicator>> communicators_;
  std::size_t communicator_count_ = 0;
  // The NCCL processes and their coverage as of the last refresh; nullopt: coverage unknown.
  std::optional<std::map<ProcessKey, NcclProcess>> nccl_processes_;

  std::vector<ProcessKey> exits_;  // worker only: exits seen in the current poll
  std::map<ProcessKey, ProcessCoverage> logged_coverage_;  // worker only: what the log last said
  std::atomic<std::uint64_t> scans_{0};
  std::atomic<std::uint64_t> rescan_overflows_{0};
  std::atomic<std::uint64_t> communicator_overflows_{0};
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace ncclscope::ebpf
