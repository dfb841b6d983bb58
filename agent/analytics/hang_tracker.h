#pragma once

// Progress and hangs per (comm, rank), from the rings' communicator tables (right even when
// records are dropped) and the completed ops:
//   ops in flight (enqueued, not completed), last completion time (last progress), the age of the
//   oldest op in flight, how many in-flight ops are older than detection.hang_timeout, and the
//   last enqueued and completed seq per collective function. Ages are computed at scrape time, so
//   a hung op's age grows from scrape to scrape even when nothing else happens.
// Across nodes (PromQL): a rank whose last enqueued seq is behind its peers' while they have hung
// ops is the one that never arrived (deploy/prometheus/rules/ncclscope-nccl.yaml).
//
// The table keeps the last NCCLSCOPE_RECENT_OPS (8) enqueued ops: with more in flight, the
// oldest one's age is known only as at least that of the oldest of those 8.

#include <chrono>
#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

struct RankProgress {
  std::uint64_t in_flight = 0;
  std::uint64_t last_completion_ns = 0;
  std::uint64_t oldest_age_ns = 0;  // 0 when nothing is in flight
  std::uint64_t hung = 0;           // in-flight ops older than the timeout
};

// What the table says about `slot` at host time `now_ns`.
RankProgress ProgressOf(const profiler::CommSlotSnapshot& slot, std::uint64_t now_ns,
                        std::uint64_t hang_timeout_ns);

// Renders the progress families of every live local rank (comms over the label cap are
// aggregated under comm="other": counts summed, ages and times maxed).
void RenderProgress(const CommRegistry& registry, std::uint64_t now_ns,
                    std::uint64_t hang_timeout_ns, metrics::TextWriter& out);

}  // namespace ncclscope::analytics
