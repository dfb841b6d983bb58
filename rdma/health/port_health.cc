#include "rdma/health/port_health.h"

#include "rdma/sysfs/attributes.h"

namespace ncclscope::rdma::health {
PortHealth::PortHealth(const std::vector<ThresholdSpec>* specs, LinkHistoryParams link)
    : specs_(specs), history_(link) {
  Reconfigure(specs, link);
}

void PortHealth::Reconfigure(const std::vector<ThresholdSpec>* specs, LinkHistoryParams link) {
  // A new window length starts a new measurement; the link history survives a reload.
  std::vector<IncreaseWindow> windows;
  windows.reserve(specs->size());
  for (const ThresholdSpec& spec : *specs) windows.emplace_back(spec.threshold.window);
  windows_ = std::move(windows);
  specs_ = specs;
  history_.SetParams(link);
}

void PortHealth::Observe(TimePoint now, const PortObservation& observation,
                         const PortCounters& counters) {
  last_seen_ = now;
  const int state = observation.present ? observation.state_id : 1;  // vanished: down
  if (last_state_ >= 0 && state >= 0 && state != last_state_) {
    ++transitions_[{sysfs::StateLabel(last_state_), sysfs::StateLabel(state)}];
  }
  if (state >= 0) last_state_ = state;

  // link_downed events since the last poll tell flaps shorter than the interval apart.
  std::uint64_t down_events = 0;
  if (auto it = counters.find("counters/link_downed"); it != counters.end() && it->second.seen()) {
    const double total = it->second.accumulated();
    if (last_link_downed_ >= 0 && total > last_link_downed_) {
      down_events = static_cast<std::uint64_t>(total - last_link_downed_);
    }
    last_link_downed_ = total;
  }
  if (state >= 0) history_.Observe(now, state == sysfs::kStateActive, down_events);

  any_saturated_ = false;
  for (const auto& [key, counter] : counters) {
    if (counter.saturated()) any_saturated_ = true;
  }
  for (std::size_t i = 0; i < specs_->size(); ++i) {
    double total = 0;
    bool any = false;
    for (const std::string& key : (*specs_)[i].counter_keys) {
      auto it = counters.find(key);
      if (it == counters.end() || !it->second.seen()) continue;
      total += it->second.accumulated();
      any = true;
    }
    if (any) windows_[i].Add(now, total);
  }
}

void PortHealth::Findings(TimePoint now, bool force_down, std::vector<Finding>* out) const {
  const bool down = history_.Down(now) || (force_down && !history_.up());
  out->push_back({"link_down", "critical", down});
  out->push_back({"link_flapping", "critical", history_.Flapping(now)});
  out->push_back({"counter_saturated", "info", any_saturated_});
  const bool active = history_.up();
  for (std::size_t i = 0; i < specs_->size(); ++i) {
    const ThresholdSpec& spec = (*specs_)[i];
    // Off, or about counters this port does not have (no hw_counters on mlx4, no PMA on iWARP).
    if (spec.threshold.severity == "none" || windows_[i].empty()) continue;
    bool fired = windows_[i].Increase() > spec.threshold.increase;
    if (spec.only_when_active && !active) fired = false;
    out->push_back({spec.name, spec.threshold.severity, fired});
  }
}

}  // namespace ncclscope::rdma::health
