#include "agent/analytics/hang_tracker.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "agent/analytics/analytics_metrics.h"
#include "agent/analytics/series_table.h"

namespace ncclscope::analytics {

RankProgress ProgressOf(const profiler::CommSlotSnapshot& slot, std::uint64_t now_ns,
                        std::uint64_t hang_timeout_ns) {
  RankProgress p;
  p.last_completion_ns = slot.last_complete_ns;
  if (slot.ops_enqueued <= slot.ops_completed) return p;
  p.in_flight = slot.ops_enqueued - slot.ops_completed;
  const std::uint64_t window = NCCLSCOPE_RECENT_OPS;
  // In-flight ops whose enqueue time the table still has: [first_known, ops_enqueued).
  const std::uint64_t first_known =
      slot.ops_enqueued - std::min<std::uint64_t>(p.in_flight, window);
  for (std::uint64_t k = first_known; k < slot.ops_enqueued; ++k) {
    const std::uint64_t enqueued = slot.recent[k % window].enqueue_ns;
    const std::uint64_t age = now_ns > enqueued && enqueued != 0 ? now_ns - enqueued : 0;
    if (k == first_known) p.oldest_age_ns = age;
    if (age > hang_timeout_ns) {
      ++p.hung;
      // Ops in flight before the ones the table keeps are older still.
      if (k == first_known && p.in_flight > window) p.hung += p.in_flight - window;
    }
  }
  return p;
}

void RenderProgress(const CommRegistry& registry, std::uint64_t now_ns,
                    std::uint64_t hang_timeout_ns, metrics::TextWriter& out) {
  struct Row {
    std::string labels;
    RankProgress p;
    const LocalRank* rank = nullptr;  // null for aggregated "other" rows
  };
  std::vector<Row> rows;
  std::map<std::int32_t, RankProgress> other;  // by rank
  registry.ForEach([&](const Comm& comm) {
    for (const LocalRank& r : comm.ranks) {
      if (!r.in_table || !r.table) continue;
      const RankProgress p = ProgressOf(*r.table, now_ns, hang_timeout_ns);
      if (comm.label == LabelCap::kOverflow) {
        RankProgress& o = other[r.rank];
        AddSat(o.in_flight, p.in_flight);
        AddSat(o.hung, p.hung);
        o.oldest_age_ns = std::max(o.oldest_age_ns, p.oldest_age_ns);
        o.last_completion_ns = std::max(o.last_completion_ns, p.last_completion_ns);
        continue;
      }
      Row row;
      metrics::AppendLabel(row.labels, "comm", registry.Label(comm.label));
      row.labels += ',';
      metrics::AppendLabel(row.labels, "rank", std::to_string(r.rank));
      row.p = p;
      row.rank = &r;
      rows.push_back(std::move(row));
    }
  });
  for (const auto& [rank, p] : other) {
    Row row;
    metrics::AppendLabel(row.labels, "comm", "other");
    row.labels += ',';
    metrics::AppendLabel(row.labels, "rank", std::to_string(rank));
    row.p = p;
    rows.push_back(std::move(row));
  }

  out.Rows(kNcclOpsInFlight, rows, [&](const Row& row) { return row.p.in_flight; });
  out.Rows(kNcclLastOpCompletionTimestampSeconds, rows,
           [&](const Row& row) { return static_cast<double>(row.p.last_completion_ns) * 1e-9; });
  out.Rows(kNcclOldestInFlightOpAgeSeconds, rows,
           [&](const Row& row) { return static_cast<double>(row.p.oldest_age_ns) * 1e-9; });
  out.Header(kNcclOpsHung);
  // Only hung ranks, as the findings: the rules test `> 0`, and a healthy node's 24 communicator
  // ranks were 24 series at 0 (docs/metrics.md, "Cost").
  for (const Row& row : rows) {
    if (row.p.hung == 0) continue;
    out.Sample(kNcclOpsHung, row.labels, row.p.hung);
  }

  auto seq_family = [&](const metrics::MetricDef& family, bool completed) {
    out.Header(family);
    for (const Row& row : rows) {
      if (row.rank == nullptr) continue;
      // The completed seq tells something the enqueued one and ops_in_flight do not only while
      // an op of the rank hangs: shown then (24 series on the healthy simulated node otherwise).
      if (completed && row.p.hung == 0) continue;
      const SeqByFunc& seqs = completed ? row.rank->completed : row.rank->enqueued;
      for (std::uint32_t f = 0; f < NCCLSCOPE_FUNC_COUNT; ++f) {
        if ((seqs.known & (1u << f)) == 0) continue;
        std::string func;
        metrics::AppendLabel(func, "func", ncclscope_func_name(f));
        out.Sample(family, row.labels, func, static_cast<double>(seqs.seq[f]));
      }
    }
  };
  seq_family(kNcclLastEnqueuedSeq, false);
  seq_family(kNcclLastCompletedSeq, true);
}

}  // namespace ncclscope::analytics
