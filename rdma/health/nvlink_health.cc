#include "rdma/health/nvlink_health.h"

namespace ncclscope::rdma::health {
namespace {

LinkHistoryParams Params(const NvlinkHealthParams& p) {
  LinkHistoryParams params;
  params.down_after = p.down_after;
  params.down_hold = std::chrono::seconds(0);
  return params;
}

}  // namespace

NvlinkHealth::NvlinkHealth(const NvlinkHealthParams& params)
    : history_(Params(params)), errors_(params.errors.window) {
  limit_ = params.errors.increase;
  severity_ = params.errors.severity;
}

void NvlinkHealth::Reconfigure(const NvlinkHealthParams& params) {
  history_.SetParams(Params(params));
  if (params.errors.window != std::chrono::nanoseconds(0)) {
    errors_ = IncreaseWindow(params.errors.window);
  }
  limit_ = params.errors.increase;
  severity_ = params.errors.severity;
}

void NvlinkHealth::Observe(TimePoint now, int active, double error_total) {
  if (active >= 0) history_.Observe(now, active == 1);
  if (error_total >= 0) errors_.Add(now, error_total);
}

bool NvlinkHealth::Errors() const {
  return severity_ != "none" && !errors_.empty() && errors_.Increase() > limit_;
}

}  // namespace ncclscope::rdma::health
