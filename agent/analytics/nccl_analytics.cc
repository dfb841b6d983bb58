#include "agent/analytics/nccl_analytics.h"

#include "agent/analytics/analytics_metrics.h"
#include "agent/analytics/gpu_index.h"
#include "agent/analytics/hang_tracker.h"

namespace ncclscope::analytics {
namespace {

// A symmetric kernel's mean initial_sync over the channels that reported it (NCCL 2.31+):
// ArrivalMatcher's GPU-measured witness; kNoSync otherwise.
std::uint64_t SyncWaitOf(const profiler::OpView& view) {
  if ((view.op.flags & NCCLSCOPE_OP_SYMMETRIC) == 0) return ArrivalMatcher::kNoSync;
  std::uint64_t sum = 0;
  std::uint32_t n = 0;
  for (std::uint32_t c = 0; c < view.n_phase_channels; ++c) {
    if ((view.phases[c].present & 1u) == 0) continue;
    sum += view.phases[c].ns[0];
    ++n;
  }
  return n != 0 ? sum / n : ArrivalMatcher::kNoSync;
}

}  // namespace

NcclAnalytics::NcclAnalytics(const AnalyticsSettings& settings)
    : settings_(settings),
      registry_(settings.max_comms, settings.max_peers, settings.max_tracked_comms),
      gpus_(settings.sysfs_root),
      detection_(settings.detection),
      now_(Clock::now()),
      last_expiry_(Clock::now()) {
  arrivals_.SetLimits({settings.match_window, settings.match_timeout});
  // Who held the others, for the detectors: the last arriver by kernel start, or, where NCCL
  // 2.31+ symmetric kernels measured it on the GPU, the rank that waited least at their opening
  // barrier (arrival_matcher.h): the direct measurement of the same thing.
  arrivals_.SetObserver([this](std::uint32_t label, std::int32_t rank, std::uint64_t delay_ns,
                               const ArrivalMatcher::SyncWitness& sync, std::uint32_t weight) {
    if (sync.rank >= 0) {
      detection_.OnMatched(registry_, label, sync.rank, sync.delay_ns, weight);
    } else {
      detection_.OnMatched(registry_, label, rank, delay_ns, weight);
    }
  });
  nic_.SetEnabled(settings.nic_lookup && settings.channel_metrics);
  ops_.SetHistograms(settings.rank_histograms, settings.p2p_histograms);
  arrivals_.SetLagHistogram(settings.rank_histograms);
}

void NcclAnalytics::Configure(const AnalyticsSettings& settings) {
  settings_ = settings;
  registry_.SetLimits(settings.max_comms, settings.max_peers, settings.max_tracked_comms);
  arrivals_.SetLimits({settings.match_window, settings.match_timeout});
  gpus_.SetRoot(settings.sysfs_root);
  nic_.SetEnabled(settings.nic_lookup && settings.channel_metrics);
  ops_.SetHistograms(settings.rank_histograms, settings.p2p_histograms);
  arrivals_.SetLagHistogram(settings.rank_histograms);
  detection_.Configure(settings.detection);
}

void NcclAnalytics::SetHostProcesses(std::shared_ptr<HostProcesses> processes) {
  nic_.SetHostProcesses(std::move(processes));
}

void NcclAnalytics::OnQpDump(const rdma::netlink::QpDump& dump, Clock::time_point now) {
  nic_.OnQpDump(dump, now);
}

void NcclAnalytics::OnCommInit(const profiler::RingOrigin& origin,
                               const ncclscope_comm_init_record& record) {
  registry_.OnCommInit(origin, record);
}

void NcclAnalytics::OnCommFinalize(const profiler::RingOrigin& origin,
                                   const ncclscope_comm_finalize_record& record) {
  registry_.OnCommFinalize(origin, record);
}

void NcclAnalytics::OnOp(const profiler::RingOrigin& origin, const profiler::OpView& view) {
  Comm* known = registry_.Use(view.op.comm_id);
  const From from{origin.ring_id, origin.principal};
  if ((known == nullptr || known->nranks == 0) && held_ops_.size() < kMaxHeld) {
    held_ops_.emplace_back(from, view);
    return;
  }
  Op(from, known, view);
}

void NcclAnalytics::OnOpCounts(const profiler::RingOrigin& origin,
                               const profiler::OpCounts& counts) {
  if (counts.comm_id == 0 || counts.counts.empty()) return;
  Comm& comm = registry_.Get(counts.comm_id);
  if (registry_.Admit(origin.ring_id, origin.principal, comm, counts.rank) == nullptr) return;
  exact_.Observe(registry_, origin.ring_id, comm, counts, ops_);
}

void NcclAnalytics::Op(const From& from, Comm* known, const profiler::OpView& view) {
  const std::uint32_t ring_id = from.ring_id;
  const std::string_view principal = from.principal;
  const ncclscope_op_record& op = view.op;
  // An op still in flight when its communicator ended did not complete: the plugin's flushed_op
  // counter has it; the analytics describe completed ops.
  if ((op.flags & NCCLSCOPE_OP_FLUSHED) != 0) return;
  Comm& comm = known != nullptr ? *known : registry_.Get(op.comm_id);
  LocalRank* admitted = registry_.Admit(ring_id, principal, comm, op.rank);
  if (admitted == nullptr) return;  // counted by the registry
  const BandwidthModel model = ModelFor(op.func, op.bytes, comm.nranks);
  ops_.Observe(registry_, comm.label, op, model);
  details_.Observe(registry_, comm.label, view);
  if (op.kind == NCCLSCOPE_KIND_P2P) p2p_.Observe(registry_, comm, op);
  detection_.OnOp(registry_, comm, *admitted, op, now_);  // valid: the calls above only read comm
  if (settings_.channel_metrics) channels_.OnOp(registry_, comm, view, model, pass_);
  if (op.kind == NCCLSCOPE_KIND_COLL && IsCollectiveFunc(op.func)) {
    admitted->completed.Raise(op.func, op.seq);
    admitted->enqueued.Raise(op.func, op.seq);
    arrivals_.OnOp(registry_, comm, op, now_, SyncWaitOf(view));
  }
}

void NcclAnalytics::OnProxyOp(const profiler::RingOrigin& origin,
                              const ncclscope_proxy_op_record& record) {
  // The ring's writer is resolved now: a reclaimed ring's origin is gone by the end of the pass.
  const RingOwner owner = nic_.NeedsOwner(record) ? nic_.Owner(origin, now_) : RingOwner{};
  Comm* known = record.comm_id != 0 ? registry_.Use(record.comm_id) : nullptr;
  if (record.comm_id != 0 && (known == nullptr || known->nranks == 0) &&
      held_proxy_.size() < kMaxHeld) {
    held_proxy_.push_back({From{origin.ring_id, origin.principal}, record, owner});
    return;
  }
  ProxyOp(origin.ring_id, origin.principal, known, record, owner);
}

void NcclAnalytics::ProxyOp(std::uint32_t ring_id, std::string_view principal, Comm* known,
                            const ncclscope_proxy_op_record& record, const RingOwner& owner) {
  std::uint64_t comm_id = record.comm_id;
  if (comm_id == 0 && (record.flags & NCCLSCOPE_PROXY_FOREIGN) != 0) {
    comm_id = pxn_.Resolve(record.origin_pid, record.origin_context);
  }
  Comm* comm = nullptr;
  if (comm_id != 0) {
    comm = known != nullptr ? known : &registry_.Get(comm_id);
    // A PXN proxy op (comm id resolved) was raised here for a rank another process of the job
    // owns: same principal required, not the same ring.
    const std::uint32_t ring = record.comm_id != 0 ? ring_id : 0;
    if (registry_.Admit(ring, principal, *comm, record.rank) == nullptr) return;
  } else {
    ++unknown_network_ops_;
  }
  network_.Observe(registry_, comm, record, settings_.channel_metrics);
  if (settings_.channel_metrics) channels_.OnProxyOp(record, pass_);
  nic_.Observe(registry_, comm, owner, record, now_);
}

void NcclAnalytics::OnCommTables(const std::vector<profiler::LiveComm>& comms) {
  registry_.OnTables(comms);
  pxn_.Rebuild(comms);
}

void NcclAnalytics::EndPass(Clock::time_point now) {
  registry_.EndPass(now);
  // Records of a communicator that neither a table nor a comm-init record had sized when they
  // came (it appeared after the pass read the tables, or its ring lost the init record): the
  // comm-init records of the whole pass are in now. Network records first: the ops they belong
  // to may join them in this pass's attribution.
  for (const HeldProxy& held : held_proxy_) {
    ProxyOp(held.from.ring_id, held.from.principal, nullptr, held.record, held.owner);
  }
  for (const auto& [from, view] : held_ops_) Op(from, nullptr, view);
  held_proxy_.clear();
  held_ops_.clear();
  channels_.EndPass(registry_, pass_);
  arrivals_.EndPass(registry_, now);
  detection_.EndPass(registry_, now);
  registry_.ForEachMutable([&](Comm& comm) {
    for (LocalRank& r : comm.ranks) {
      if (r.gpu_index < 0 && !r.pci_bus_id.empty()) {
        if (auto index = gpus_.Lookup(r.pci_bus_id)) r.gpu_index = *index;
      }
    }
  });
  std::vector<std::uint32_t> freed = registry_.TakeEvictedLabels();
  if (now - last_expiry_ > std::chrono::seconds(1)) {
    last_expiry_ = now;
    const std::vector<std::uint32_t> expired = registry_.Expire(now, settings_.retention);
    freed.insert(freed.end(), expired.begin(), expired.end());
  }
  {
    if (!freed.empty()) {
      const absl::flat_hash_set<std::uint32_t> labels(freed.begin(), freed.end());
      ops_.DropLabels(labels);
      exact_.DropLabels(labels);
      details_.DropLabels(labels);
      p2p_.DropLabels(labels);
      network_.DropLabels(labels);
      channels_.DropLabels(labels);
      arrivals_.DropLabels(labels);
      nic_.DropLabels(labels);
      detection_.DropLabels(labels);
    }
  }
  ++pass_;
  now_ = now;
}

namespace {
// A rank's label list in the comm_info families (they list many), one label at a time, comma-
// separated; each starts with the communicator, its name and the rank.
class RankInfoLabels {
 public:
  RankInfoLabels(const CommRegistry& registry, const Comm& comm, const LocalRank& r) {
    Add("comm", registry.Label(comm.label));
    Add("comm_name", comm.name);
    Add("rank", std::to_string(r.rank));
  }
  void Add(std::string_view name, std::string_view value) {
    if (!text_.empty()) text_ += ',';
    metrics::AppendLabel(text_, name, value);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};
}  // namespace

void NcclAnalytics::RenderInfo(metrics::TextWriter& out) const {
  // The process's global rank: its rank in the largest communicator its GPU is in (the job's
  // world communicator, torch's global rank), per (ring, CUDA device): one process may drive
  // several GPUs. Unknown where sizes are (ABI v1-v3: nranks 0).
  struct World {
    std::int32_t nranks = 0;
    std::int32_t rank = -1;
  };
  absl::flat_hash_map<std::pair<std::uint32_t, std::int32_t>, World> worlds;
  registry_.ForEach([&](const Comm& comm) {
    for (const LocalRank& r : comm.ranks) {
      if (r.finalized || !r.in_table || comm.nranks <= 0) continue;
      World& w = worlds[{r.owner_ring, r.cuda_device}];
      if (comm.nranks > w.nranks) w = {comm.nranks, r.rank};
    }
  });
  out.Header(kNcclCommInfo);
  registry_.ForEach([&](const Comm& comm) {
    if (comm.label == LabelCap::kOverflow) return;
    int local_rank = 0;
    for (const LocalRank& r : comm.ranks) {
      if (r.finalized) continue;
      const int this_local = local_rank++;
      if (!r.in_table) continue;
      RankInfoLabels labels(registry_, comm, r);
      const auto world = worlds.find({r.owner_ring, r.cuda_device});
      labels.Add("global_rank", world != worlds.end() && world->second.rank >= 0
                                    ? std::to_string(world->second.rank)
                                    : "");
      labels.Add("local_rank", std::to_string(this_local));
      labels.Add("nranks", std::to_string(comm.nranks));
      labels.Add("nnodes", std::to_string(comm.nnodes));
      labels.Add("pid", std::to_string(r.pid));
      // The name the process saw (the pod's in Kubernetes, the node's on Slurm): not `hostname`,
      // which dcgm-exporter uses for the node.
      labels.Add("process_hostname", r.hostname);
      labels.Add("job_id", r.job_id);
      labels.Add("namespace", r.namespace_name);
      labels.Add("pod", r.pod);
      labels.Add("container", r.container);
      labels.Add("attribution", r.attribution);
      labels.Add("cuda_device", r.cuda_device >= 0 ? std::to_string(r.cuda_device) : "");
      labels.Add("gpu", r.gpu_index >= 0 ? std::to_string(r.gpu_index) : "");
      labels.Add("UUID", r.gpu_uuid);
      labels.Add("pci_bus_id", DcgmPciBusId(r.pci_bus_id));
      out.Sample(kNcclCommInfo, labels.text(), std::uint64_t{1});
    }
  });
  // Ended jobs' ranks, as long as their series are kept: what the node page shows once the job
  // is gone (comm_info is only for live ranks: alerts join it to end with the job).
  out.Header(kNcclCommEndTimestampSeconds);
  registry_.ForEach([&](const Comm& comm) {
    if (comm.label == LabelCap::kOverflow || comm.live || comm.ended_unix_ms == 0) return;
    for (const LocalRank& r : comm.ranks) {
      RankInfoLabels labels(registry_, comm, r);
      labels.Add("nranks", std::to_string(comm.nranks));
      labels.Add("job_id", r.job_id);
      labels.Add("namespace", r.namespace_name);
      labels.Add("pod", r.pod);
      labels.Add("gpu", r.gpu_index >= 0 ? std::to_string(r.gpu_index) : "");
      labels.Add("UUID", r.gpu_uuid);
      out.Sample(kNcclCommEndTimestampSeconds, labels.text(),
                 static_cast<double>(comm.ended_unix_ms) / 1000.0);
    }
  });
}

void NcclAnalytics::RenderLimits(metrics::TextWriter& out) const {
  out.Header(kNcclRecordsForeignTotal);
  for (Refusal r : {Refusal::kForeignComm, Refusal::kForeignRank}) {
    std::string labels;
    metrics::AppendLabel(labels, "reason", RefusalName(r));
    out.Sample(kNcclRecordsForeignTotal, labels, registry_.refusals(r));
  }
  out.Header(kNcclAnalyticsLimitsTotal);
  // A limit's series appears when the limit is first hit: no rule or panel reads these, and a
  // healthy node showed its 9 limits at 0 (docs/metrics.md, "Cost").
  auto limit = [&](std::string_view name, std::uint64_t value) {
    if (value == 0) return;
    std::string labels;
    metrics::AppendLabel(labels, "limit", name);
    out.Sample(kNcclAnalyticsLimitsTotal, labels, value);
  };
  for (Refusal r :
       {Refusal::kRankRange, Refusal::kRanksPerComm, Refusal::kRanksPerRing, Refusal::kEvicted}) {
    limit(RefusalName(r), registry_.refusals(r));
  }
  limit("series_op", ops_.refused());
  limit("series_kernel_details", details_.refused());
  limit("series_p2p", p2p_.refused());
  limit("series_network", network_.refused());
  limit("series_channel", channels_.refused());
  limit("series_arrival", arrivals_.refused());
  out.Header(kNcclCommsTracked);
  out.Sample(kNcclCommsTracked, "", static_cast<std::uint64_t>(registry_.tracked()));
}

void NcclAnalytics::Render(metrics::TextWriter& out, std::uint64_t now_ns) const {
  ops_.Render(out);
  details_.Render(out);
  p2p_.Render(out);
  network_.Render(out, settings_.channel_metrics);
  if (settings_.channel_metrics) channels_.Render(out, settings_.intra_node_channels);
  nic_.Render(out, settings_.channel_metrics);
  arrivals_.Render(out);
  detection_.Render(out);
  RenderInfo(out);
  RenderProgress(registry_, now_ns, static_cast<std::uint64_t>(settings_.hang_timeout.count()),
                 out);

  out.Header(kNcclComms);
  out.Sample(kNcclComms, "", static_cast<std::uint64_t>(registry_.admitted()));
  out.Header(kNcclCommsOverLimitTotal);
  out.Sample(kNcclCommsOverLimitTotal, "", registry_.overflowed());
  out.Header(kNcclPeersOverLimitTotal);
  out.Sample(kNcclPeersOverLimitTotal, "", registry_.peers_overflowed());
  out.Header(kNcclNetworkOpsUnattributedTotal);
  out.Sample(kNcclNetworkOpsUnattributedTotal, "", unknown_network_ops_);
  RenderLimits(out);
  out.Header(kNcclAnalyticsSeries);
  out.Sample(kNcclAnalyticsSeries, "group=\"op\"", static_cast<std::uint64_t>(ops_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"kernel_details\"",
             static_cast<std::uint64_t>(details_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"p2p\"", static_cast<std::uint64_t>(p2p_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"network\"",
             static_cast<std::uint64_t>(network_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"channel\"",
             static_cast<std::uint64_t>(channels_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"arrival\"",
             static_cast<std::uint64_t>(arrivals_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"nic\"", static_cast<std::uint64_t>(nic_.series()));
  out.Sample(kNcclAnalyticsSeries, "group=\"detection\"",
             static_cast<std::uint64_t>(detection_.series()));
}

}  // namespace ncclscope::analytics
