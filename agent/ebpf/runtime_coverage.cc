// Runtime::RefreshCoverage: which live processes use NCCL, who holds a profiler ring, and why each
// NCCL process is covered or not (coverage.h), rebuilt by the worker every kCoverageRefresh so that
// scrapes read no file (render.cc writes the last result).

#include "agent/core/log.h"
#include "agent/ebpf/functions.h"
#include "agent/ebpf/runtime.h"

namespace ncclscope::ebpf {
namespace {

std::string Describe(const ProcessKey& process, const NcclProcess& p) {
  std::string out = "pid=" + std::to_string(process.pid) + " pod=";
  out += p.labels.pod.empty()
             ? "host"
             : p.labels.namespace_name + "/" + p.labels.pod + "/" + p.labels.container;
  out += " nccl=" + (p.nccl_version ? p.nccl_version->Text() : std::string("unknown"));
  return out;
}

}  // namespace

void Runtime::RefreshCoverage() {
  if (!coverage_.writers || !facts_) return;
  const std::optional<RingAbis> writers = coverage_.writers(coverage_.ring_dir, config_.proc_root);
  std::optional<std::map<ProcessKey, NcclProcess>> processes;
  if (writers) {
    // Live processes that use NCCL: an NCCL call counted or a communicator known.
    std::map<ProcessKey, PodLabels> users;
    objects_->calls().ForEach([&](const ncclscope_proc_key& key, const ncclscope_call_counts& v) {
      const ProbedFunction* f = FunctionForOp(key.op);
      if (f == nullptr || f->library != Library::kNccl || v.calls == 0) return;
      const ProcessKey process{static_cast<pid_t>(key.tgid), key.start_ticks};
      if (auto [it, added] = users.try_emplace(process); added) {
        it->second = attributor_->For(process, key.cgroup_id);
      }
    });
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      for (const auto& [process, list] : communicators_) {
        if (!list.empty()) users.emplace(process, list.begin()->second.labels);
      }
    }
    processes.emplace();
    const auto now = ProcessFactsReader::Clock::now();
    std::set<ProcessKey> live;
    for (const auto& [process, labels] : users) {
      std::optional<std::uint32_t> ring_abi;
      if (const auto it = writers->find(process.pid); it != writers->end()) ring_abi = it->second;
      const std::optional<ProcessFacts> facts = facts_->Get(process, ring_abi.has_value(), now);
      if (!facts) continue;  // exited
      live.insert(process);
      NcclProcess p{labels, facts->nccl_version, Classify(*facts, ring_abi)};
      // One line per process when first seen and when its coverage changes.
      const auto logged = logged_coverage_.find(process);
      if (logged == logged_coverage_.end() || logged->second != p.coverage) {
        const bool was_uncovered = logged != logged_coverage_.end() && !logged->second.covered;
        if (p.coverage.covered && was_uncovered) {
          NCCLSCOPE_LOG(kInfo, "ebpf")
              << "NCCL process now covered by the profiler plugin " << Describe(process, p)
              << " plugin=" << p.coverage.PluginLabel();
        } else if (p.coverage.covered) {
          NCCLSCOPE_LOG(kDebug, "ebpf")
              << "NCCL process covered by the profiler plugin " << Describe(process, p)
              << " plugin=" << p.coverage.PluginLabel();
        } else {
          NCCLSCOPE_LOG(kInfo, "ebpf")
              << "NCCL process not covered by the profiler plugin " << Describe(process, p)
              << " library=" << (facts->nccl_library.empty() ? "?" : facts->nccl_library)
              << " reason=" << ReasonName(p.coverage.reason) << ": "
              << ReasonHelp(p.coverage.reason);
        }
        logged_coverage_[process] = p.coverage;
      }
      processes->emplace(process, std::move(p));
    }
    facts_->Retain(live);
    for (auto it = logged_coverage_.begin(); it != logged_coverage_.end();) {
      it = live.count(it->first) == 0 ? logged_coverage_.erase(it) : std::next(it);
    }
  }
  std::lock_guard<std::mutex> lock(state_mutex_);
  nccl_processes_ = std::move(processes);
}

}  // namespace ncclscope::ebpf
