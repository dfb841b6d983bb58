#pragma once

// Health of one NVLink: link_inactive when a link that was active stays inactive for down_after
// (links inactive by design, e.g. 12 of 18 on H100 PCIe, never were active and stay quiet), and
// link_errors when its error total (CRC and recovery errors; on NVLink5 malformed, overrun,
// receive, integrity and failed-recovery counts) grew past the configured threshold.

#include <chrono>
#include <string>

#include "rdma/health/finding.h"
#include "rdma/health/increase_window.h"
#include "rdma/health/link_history.h"
#include "rdma/health/threshold.h"

namespace ncclscope::rdma::health {

struct NvlinkHealthParams {
  std::chrono::nanoseconds down_after{std::chrono::minutes(2)};  // link_inactive after this
  Threshold errors;                                              // link_errors
};

class NvlinkHealth {
 public:
  explicit NvlinkHealth(const NvlinkHealthParams& params);
  void Reconfigure(const NvlinkHealthParams& params);

  // `active` unknown (nullopt-like -1) is skipped; `error_total` < 0 when no counter is readable.
  void Observe(TimePoint now, int active, double error_total);

  bool Inactive(TimePoint now) const { return history_.Down(now); }
  bool Errors() const;
  const std::string& error_severity() const { return severity_; }

 private:
  LinkHistory history_;
  IncreaseWindow errors_;
  double limit_ = 0;
  std::string severity_;
};

}  // namespace ncclscope::rdma::health
