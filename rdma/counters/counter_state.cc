#include "rdma/counters/counter_state.h"

namespace ncclscope::rdma::counters {
namespace {

constexpr std::uint64_t kTwo31 = std::uint64_t{1} << 31;
constexpr std::uint64_t kTwo32 = std::uint64_t{1} << 32;

}  // namespace

double CounterState::extended() const {
  return static_cast<double>(wraps_) * static_cast<double>(kTwo32) + static_cast<double>(raw_);
}

CounterUpdate CounterState::Update(std::uint64_t raw, Behavior behavior, unsigned width_bits) {
  CounterUpdate update;
  const std::uint64_t top = SaturationValue(behavior, width_bits);
  // Legacy (non-extended) PMA tables have 32-bit data counters that clamp like the error ones.
  const bool at_top = raw == top || (behavior == Behavior::kData && raw == 0xFFFFFFFFu);
  if (!seen_) {
    seen_ = true;
    raw_ = raw;
    saturated_ = behavior != Behavior::kGauge && at_top;
    return update;
  }
  if (behavior == Behavior::kGauge) {
    raw_ = raw;
    return update;
  }
  if (raw >= raw_) {
    update.increase = static_cast<double>(raw - raw_);
  } else if (behavior == Behavior::kWrapOrClamp32 && raw_ != top && raw_ >= kTwo31 &&
             raw + kTwo31 <= raw_) {
    // Near the top, then small: the 32-bit counter wrapped (a clamped one would sit at the top).
    update.wrapped = true;
    update.increase = static_cast<double>(kTwo32 - raw_ + raw);
    ++wraps_;
  } else {
    // Anything else going down was reset (to 0) and has counted `raw` events since.
    update.reset = true;
    update.increase = static_cast<double>(raw);
    ++resets_;
    wraps_ = 0;
  }
  raw_ = raw;
  saturated_ = at_top;
  accumulated_ += update.increase;
  return update;
}

}  // namespace ncclscope::rdma::counters
