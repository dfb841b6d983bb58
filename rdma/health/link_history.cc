#include "rdma/health/link_history.h"

#include <algorithm>

namespace ncclscope::rdma::health {
namespace {

// Episodes older than the window are dropped; this caps memory when the window is long and a
// link flaps thousands of times.
constexpr std::size_t kMaxEpisodes = 4096;

}  // namespace

void LinkHistory::AddEpisode(TimePoint now) {
  episodes_.push_back(now);
  if (episodes_.size() > kMaxEpisodes) episodes_.pop_front();
}

void LinkHistory::Observe(TimePoint now, bool up, std::uint64_t down_events) {
  if (!up) {
    if (!down_first_) {
      down_first_ = now;
      down_events_in_period_ = 0;
    }
    down_last_ = now;
    down_events_in_period_ += down_events;
  } else if (down_first_) {
    // Back up: one down period ends.
    const Duration observed_down = *down_last_ - *down_first_;
    if (observed_down >= params_.flap_min_down || down_events_in_period_ + down_events > 0) {
      AddEpisode(now);
    }
    if (ever_up_ && observed_down >= params_.down_after) hold_until_ = now + params_.down_hold;
    down_first_.reset();
    down_last_.reset();
  } else if (last_up_.value_or(false) && down_events > 0) {
    // Up at both polls, yet the HCA counted link-down events: flaps shorter than the interval.
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(down_events, kMaxEpisodes); ++i) {
      AddEpisode(now);
    }
  }
  if (up) ever_up_ = true;
  last_up_ = up;
  const TimePoint oldest = now - params_.flap_window;
  while (!episodes_.empty() && episodes_.front() < oldest) episodes_.pop_front();
}

bool LinkHistory::Down(TimePoint now) const {
  if (down_first_ && ever_up_ && now - *down_first_ >= params_.down_after) return true;
  return hold_until_ && now < *hold_until_;
}

std::size_t LinkHistory::Episodes(TimePoint now) const {
  const TimePoint oldest = now - params_.flap_window;
  return static_cast<std::size_t>(
      std::count_if(episodes_.begin(), episodes_.end(), [&](TimePoint t) { return t >= oldest; }));
}

}  // namespace ncclscope::rdma::health
