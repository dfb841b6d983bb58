#include "rdma/health/nvlink_health.h"

namespace ncclscope::rdma::health {
namespace {

LinkHistoryParams Params(const config::NvlinkConfig& config) {
  LinkHistoryParams params;
  params.down_after = config.down_after.value();
  params.down_hold = std::chrono::seconds(0);
  return params;
}

}  // namespace

NvLinkHealth::NvLinkHealth(const config::NvlinkConfig& config)
    : history_(Params(config)), errors_(config.errors.window.value()) {
  limit_ = config.errors.increase;
  severity_ = config.errors.severity;
}

void NvLinkHealth::Reconfigure(const config::NvlinkConfig& config) {
  history_.SetParams(Params(config));
  if (config.errors.window.value() != std::chrono::nanoseconds(0)) {
    errors_ = IncreaseWindow(config.errors.window.value());
  }
  limit_ = config.errors.increase;
  severity_ = config.errors.severity;
}

void NvLinkHealth::Observe(TimePoint now, int active, double error_total) {
  if (active >= 0) history_.Observe(now, active == 1);
  if (error_total >= 0) errors_.Add(now, error_total);
}

bool NvLinkHealth::Errors() const {
  return severity_ != "none" && !errors_.empty() && errors_.Increase() > limit_;
}

}  // namespace ncclscope::rdma::health
