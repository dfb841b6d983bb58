// Runtime::Render: the eBPF source's metric families, built at scrape time from the BPF maps
// (live processes) plus the totals folded from exited ones. Names and labels: docs/metrics.md.

#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/ebpf/ebpf_metrics.h"
#include "agent/ebpf/functions.h"
#include "agent/ebpf/runtime.h"

namespace ncclscope::ebpf {
namespace {

metrics::Labels PodLabelSet(const PodLabels& p) {
  return {{"namespace", p.namespace_name}, {"pod", p.pod}, {"container", p.container}};
}

metrics::Labels With(metrics::Labels labels,
                     std::initializer_list<std::pair<std::string, std::string>> more) {
  for (const auto& [name, value] : more) labels.push_back({name, value});
  return labels;
}

// The call, byte, result and QP-transition counters and the aborts, per pod and function.
void RenderTotals(const Totals& t, metrics::FamilySet& families) {
  // Created in the order they are written (FamilySet: on first use).
  metrics::Family& nccl_calls = families.Get(kEbpfNcclCallsTotal);
  metrics::Family& nccl_bytes = families.Get(kEbpfNcclBytesTotal);
  metrics::Family& nccl_errors = families.Get(kEbpfNcclErrorsTotal);
  metrics::Family& ibv_calls = families.Get(kEbpfIbvCallsTotal);
  metrics::Family& ibv_bytes = families.Get(kEbpfIbvRegisteredBytesTotal);
  metrics::Family& ibv_errors = families.Get(kEbpfIbvErrorsTotal);
  metrics::Family& qp = families.Get(kEbpfIbvQpTransitionsTotal);
  for (const auto& [key, v] : t.calls) {
    const auto& [labels, op] = key;
    const ProbedFunction* f = FunctionForOp(op);
    if (f == nullptr) continue;
    auto set = With(PodLabelSet(labels), {{"function", std::string(f->name)}});
    if (f->library == Library::kNccl) {
      nccl_calls.Add(set, static_cast<double>(v.calls));
      if (f->has_bytes) nccl_bytes.Add(set, static_cast<double>(v.bytes));
    } else {
      ibv_calls.Add(set, static_cast<double>(v.calls));
      if (f->has_bytes) ibv_bytes.Add(set, static_cast<double>(v.bytes));
    }
  }
  for (const auto& [key, count] : t.results) {
    const auto& [labels, op, value] = key;
    const ProbedFunction* f = FunctionForOp(op);
    if (f == nullptr) continue;
    auto set = With(PodLabelSet(labels),
                    {{"function", std::string(f->name)}, {"result", ResultName(op, value)}});
    (f->library == Library::kNccl ? nccl_errors : ibv_errors).Add(set, static_cast<double>(count));
  }
  for (const auto& [key, count] : t.qp_states) {
    const auto& [labels, state] = key;
    qp.Add(With(PodLabelSet(labels), {{"state", std::string(QpStateName(state))}}),
           static_cast<double>(count));
  }

  metrics::Family& aborts = families.Get(kEbpfNcclCommunicatorAbortsTotal);
  for (const auto& [labels, count] : t.aborts) {
    aborts.Add(PodLabelSet(labels), static_cast<double>(count));
  }
}

// Live communicators, counted per pod, process, size and rank.
void RenderCommunicators(
    const std::map<ProcessKey, std::map<std::uint64_t, Communicator>>& communicators,
    metrics::FamilySet& families) {
  metrics::Family& comms = families.Get(kEbpfNcclCommunicators);
  std::map<std::tuple<PodLabels, pid_t, std::int32_t, std::int32_t>, int> grouped;
  for (const auto& [process, list] : communicators) {
    for (const auto& [handle, c] : list) ++grouped[{c.labels, process.pid, c.nranks, c.rank}];
  }
  auto show = [](std::int32_t n) { return n < 0 ? std::string("unknown") : std::to_string(n); };
  for (const auto& [key, count] : grouped) {
    const auto& [labels, pid, nranks, rank] = key;
    comms.Add(With(PodLabelSet(labels),
                   {{"pid", std::to_string(pid)}, {"nranks", show(nranks)}, {"rank", show(rank)}}),
              count);
  }
}

}  // namespace

void Runtime::Render(metrics::TextWriter& out) const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  metrics::FamilySet families;
  RenderTotals(LiveTotals(), families);
  RenderCommunicators(communicators_, families);
  // As of the worker's last refresh (runtime_coverage.cc), at most kCoverageRefresh old.
  if (nccl_processes_) RenderCoverage(*nccl_processes_, families);
  RenderSelfMetrics(families);
  families.WriteTo(out);
}

Totals Runtime::LiveTotals() const {
  Totals t = totals_;
  auto labels_of = [&](const ncclscope_proc_key& k) {
    return attributor_->For({static_cast<pid_t>(k.tgid), k.start_ticks}, k.cgroup_id);
  };
  objects_->calls().ForEach([&](const ncclscope_proc_key& key, const ncclscope_call_counts& v) {
    auto& total = t.calls[{labels_of(key), key.op}];
    total.calls += v.calls;
    total.bytes += v.bytes;
  });
  objects_->results().ForEach([&](const ncclscope_result_key& key, std::uint64_t v) {
    t.results[{labels_of(key.proc), key.proc.op, key.value}] += v;
  });
  objects_->qp_states().ForEach([&](const ncclscope_result_key& key, std::uint64_t v) {
    t.qp_states[{labels_of(key.proc), key.value}] += v;
  });
  return t;
}

void Runtime::RenderSelfMetrics(metrics::FamilySet& families) const {
  const AttachRegistry::Stats stats = registry_->stats();
  metrics::Family& files = families.Get(kEbpfAttachedFiles);
  metrics::Family& probes = families.Get(kEbpfAttachedProbes);
  metrics::Family& processes = families.Get(kEbpfProcesses);
  metrics::Family& failures = families.Get(kEbpfAttachFailuresTotal);
  for (int lib = 0; lib < kLibraryCount; ++lib) {
    const metrics::Labels set = {{"library", std::string(LibraryName(static_cast<Library>(lib)))}};
    files.Add(set, static_cast<double>(stats.files[lib]));
    probes.Add(set, static_cast<double>(stats.probes[lib]));
    processes.Add(set, static_cast<double>(stats.processes[lib]));
    failures.Add(set, static_cast<double>(stats.failures[lib]));
  }
  metrics::Family& scans = families.Get(kEbpfProcessScansTotal);
  scans.Add({}, static_cast<double>(scans_.load()));
  metrics::Family& dropped = families.Get(kEbpfDroppedTotal);
  std::uint64_t counters[NCCLSCOPE_BPF_COUNTER_COUNT] = {};
  for (std::uint32_t i = 0; i < NCCLSCOPE_BPF_COUNTER_COUNT; ++i) {
    counters[i] = objects_->counters().Lookup(i).value_or(0);
  }
  const std::pair<const char*, std::uint64_t> reasons[] = {
      {"events_lost", counters[NCCLSCOPE_BPF_EVENTS_LOST]},
      {"calls_map_full", counters[NCCLSCOPE_BPF_CALLS_FULL]},
      {"results_map_full", counters[NCCLSCOPE_BPF_RESULTS_FULL]},
      {"thread_state_lost", counters[NCCLSCOPE_BPF_THREAD_STATE_LOST]},
      {"rescan_queue_full", rescan_overflows_.load()},
      {"label_sets_overflow", attributor_->overflows()},
      {"communicators_overflow", communicator_overflows_.load()},
  };
  for (const auto& [reason, value] : reasons) {
    dropped.Add({{"reason", reason}}, static_cast<double>(value));
  }
}

}  // namespace ncclscope::ebpf
