#pragma once

// The rdma config section in the health library's own terms (rdma/health builds without the
// agent): the thresholds of rdma.thresholds, in config order, and the link-state timings of
// rdma.link.

#include <vector>

#include "agent/config/config.h"
#include "rdma/health/link_history.h"
#include "rdma/health/port_health.h"
#include "rdma/health/threshold.h"

namespace ncclscope::rdma {

health::Threshold ThresholdOf(const config::CounterThreshold& threshold);
std::vector<health::ThresholdSpec> ThresholdSpecs(const config::RdmaThresholdsConfig& thresholds);
health::LinkHistoryParams LinkParams(const config::RdmaLinkConfig& link);

}  // namespace ncclscope::rdma
