#pragma once

// The life of one hardware counter across polls: saturation, wrap and reset told apart, the value
// to export, and the total increase the health engine measures thresholds on.
//
//  - Saturated (at 2^width-1): exported as is, with saturated() true, so dashboards show a stuck
//    counter as "saturated" instead of a silent zero rate.
//  - Wrap (only 32-bit mlx5 Q counters, which may wrap): a drop from the top half to a value at
//    least 2^31 lower. The exported value keeps counting (wraps x 2^32 + raw) so rate() is right.
//  - Reset (any other decrease: perfquery -R, driver reload, device re-created): counted in
//    resets(); the exported value restarts from the raw value, as Prometheus expects of counters.

#include <cstdint>

#include "rdma/counters/catalogue.h"

namespace ncclscope::rdma::counters {

struct CounterUpdate {
  double increase = 0;  // events since the previous reading (0 on the first)
  bool reset = false;
  bool wrapped = false;
};

class CounterState {
 public:
  CounterUpdate Update(std::uint64_t raw, Behavior behavior, unsigned width_bits);

  bool seen() const { return seen_; }
  std::uint64_t raw() const { return raw_; }
  // Raw value extended past 32-bit wraps; multiply by CounterInfo::scale to export.
  double extended() const;
  // Sum of increases since the first reading (never decreases).
  double accumulated() const { return accumulated_; }
  std::uint64_t resets() const { return resets_; }
  std::uint64_t wraps() const { return wraps_; }
  bool saturated() const { return saturated_; }

 private:
  bool seen_ = false;
  bool saturated_ = false;
  std::uint64_t raw_ = 0;
  std::uint64_t wraps_ = 0;
  std::uint64_t resets_ = 0;
  double accumulated_ = 0;
};

}  // namespace ncclscope::rdma::counters
