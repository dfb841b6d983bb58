#include "agent/analytics/latency_buckets.h"

#include <vector>

namespace ncclscope::analytics {

const metrics::HistogramBounds& LatencyBounds() {
  static const metrics::HistogramBounds bounds = [] {
    std::vector<double> b;
    double v = 1e-6;
    for (std::uint32_t i = 0; i < kLatencyBounds; ++i, v *= 4) b.push_back(v);
    return metrics::HistogramBounds(std::move(b));
  }();
  return bounds;
}

}  // namespace ncclscope::analytics
