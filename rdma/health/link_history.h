#pragma once

// The history of one link's up/down state, from which link-down and flapping are judged over time
// rather than from one sample (fabric.md 0.8, 5.5; gpud's drop and flap windows):
//  - down (gpud "drop"): not up continuously for at least down_after, on a link that was up at
//    some point (a port that was never up is uncabled, not down); it stays reported for down_hold
//    after recovery so the alert itself does not flap.
//  - an episode: a down period that ends with the link back up and either lasted flap_min_down
//    (two down observations that far apart) or saw the hardware count a link-down event; and, on a
//    link seen up at two consecutive polls, each link-down event the hardware counted in between
//    (a flap shorter than the poll interval).
//  - flapping: at least flap_episodes episodes within flap_window.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

#include "rdma/health/clock.h"

namespace ncclscope::rdma::health {

struct LinkHistoryParams {
  Duration down_after = std::chrono::minutes(4);
  Duration down_hold = std::chrono::minutes(10);
  Duration flap_min_down = std::chrono::seconds(25);
  unsigned flap_episodes = 3;
  Duration flap_window = std::chrono::hours(1);
};

class LinkHistory {
 public:
  explicit LinkHistory(LinkHistoryParams params = {}) : params_(params) {}
  void SetParams(const LinkHistoryParams& params) { params_ = params; }

  // One observation at `now`. `down_events`: link-down events the hardware counted since the
  // previous observation (the link_downed delta), 0 when unknown.
  void Observe(TimePoint now, bool up, std::uint64_t down_events = 0);

  bool observed() const { return last_up_.has_value(); }
  bool up() const { return last_up_.value_or(false); }
  bool ever_up() const { return ever_up_; }
  // Since when the link has been down (first down observation), if it is down now.
  std::optional<TimePoint> down_since() const { return down_first_; }

  bool Down(TimePoint now) const;
  std::size_t Episodes(TimePoint now) const;
  bool Flapping(TimePoint now) const { return Episodes(now) >= params_.flap_episodes; }

 private:
  void AddEpisode(TimePoint now);

  LinkHistoryParams params_;
  std::optional<bool> last_up_;
  bool ever_up_ = false;
  std::optional<TimePoint> down_first_;
  std::optional<TimePoint> down_last_;
  std::uint64_t down_events_in_period_ = 0;
  std::optional<TimePoint> hold_until_;
  std::deque<TimePoint> episodes_;
};

}  // namespace ncclscope::rdma::health
