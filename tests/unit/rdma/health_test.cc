// Findings judged over time with a manual clock: link down after 4 minutes (not one sample),
// flapping from episodes within the window, short flaps seen only by link_downed, sticky
// recovery, counter thresholds over their windows, saturated counters.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/nvlink/nvlink_source.h"
#include "agent/rdma/health_config.h"
#include "rdma/health/increase_window.h"
#include "rdma/health/link_history.h"
#include "rdma/health/nvlink_health.h"
#include "rdma/health/port_health.h"

namespace ncclscope::rdma::health {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr TimePoint kT0 = TimePoint{} + hours(100);

// Observes the link every `step` from `from` for `duration`, up or down.
TimePoint Hold(LinkHistory& link, TimePoint from, Duration duration, bool up,
               Duration step = seconds(10)) {
  TimePoint t = from;
  for (; t < from + duration; t += step) link.Observe(t, up);
  return t;
}

TEST(LinkHistoryTest, DownOnlyAfterFourMinutesOfHistory) {
  LinkHistory link;
  TimePoint t = Hold(link, kT0, minutes(5), true);
  t = Hold(link, t, minutes(3), false);
  EXPECT_FALSE(link.Down(t)) << "3 minutes down is not yet a drop";
  t = Hold(link, t, minutes(1) + seconds(10), false);
  EXPECT_TRUE(link.Down(t));
  // Recovery: the finding holds for down_hold (10m) so the alert does not flap, then clears.
  link.Observe(t, true);
  EXPECT_TRUE(link.Down(t + minutes(9)));
  EXPECT_FALSE(link.Down(t + minutes(10) + seconds(1)));
}

TEST(LinkHistoryTest, APortThatWasNeverUpIsNotDown) {
  LinkHistory link;
  const TimePoint t = Hold(link, kT0, hours(1), false);  // uncabled: Polling forever
  EXPECT_FALSE(link.Down(t));
  EXPECT_FALSE(link.ever_up());
}

TEST(LinkHistoryTest, FlappingNeedsThreeEpisodesInTheWindow) {
  LinkHistory link;
  TimePoint t = Hold(link, kT0, minutes(2), true);
  for (int episode = 1; episode <= 3; ++episode) {
    t = Hold(link, t, seconds(40), false);  // down >= 25s (two samples 30s apart)
    t = Hold(link, t, minutes(5), true);
    EXPECT_EQ(link.Episodes(t), static_cast<std::size_t>(episode));
    EXPECT_EQ(link.Flapping(t), episode >= 3);
  }
  // No down -> up transition was ever long enough for link_down.
  EXPECT_FALSE(link.Down(t));
  // An hour after the first episode it drops out of the window and the flag clears by itself.
  EXPECT_FALSE(link.Flapping(t + minutes(50)));
}

TEST(LinkHistoryTest, ShortDownsWithoutDownEventsAreNoEpisodes) {
  LinkHistory link;
  TimePoint t = Hold(link, kT0, minutes(1), true);
  for (int i = 0; i < 5; ++i) {
    link.Observe(t, false);  // one down sample (e.g. INIT during an SM sweep), no link_downed
    t += seconds(10);
    t = Hold(link, t, minutes(1), true);
  }
  EXPECT_EQ(link.Episodes(t), 0u);
}

TEST(LinkHistoryTest, FlapsShorterThanThePollIntervalCountFromLinkDowned) {
  LinkHistory link;
  TimePoint t = Hold(link, kT0, minutes(1), true);
  // Up at every poll, but the HCA counted link-down events in between.
  link.Observe(t, true, 2);
  t += seconds(10);
  link.Observe(t, true, 0);
  t += seconds(10);
  link.Observe(t, true, 1);
  EXPECT_EQ(link.Episodes(t), 3u);
  EXPECT_TRUE(link.Flapping(t));
  // A short observed down with a link_downed event is one episode, not two.
  LinkHistory other;
  TimePoint u = Hold(other, kT0, minutes(1), true);
  other.Observe(u, false, 1);
  other.Observe(u + seconds(10), true, 0);
  EXPECT_EQ(other.Episodes(u + seconds(10)), 1u);
}

TEST(IncreaseWindowTest, MeasuresGrowthWithinTheWindowOnly) {
  IncreaseWindow window(hours(1));
  double total = 0;
  TimePoint t = kT0;
  for (int i = 0; i < 360; ++i, t += seconds(10)) {  // one hour, +1 every 10 s
    window.Add(t, total);
    total += 1;
  }
  EXPECT_NEAR(window.Increase(), 359, 360.0 / 32 + 1);
  // Nothing more for two hours: the increase falls to zero.
  for (int i = 0; i < 720; ++i, t += seconds(10)) window.Add(t, total);
  EXPECT_DOUBLE_EQ(window.Increase(), 0);
  // Bounded memory whatever the rate of samples: a burst 1000 times in a second is fine.
  for (int i = 0; i < 1000; ++i) window.Add(t + std::chrono::milliseconds(i), total + i);
  EXPECT_DOUBLE_EQ(window.Increase(), 999);
}

config::RdmaConfig DefaultConfig() { return config::RdmaConfig{}; }

struct PortFixture {
  config::RdmaConfig config = DefaultConfig();
  std::vector<ThresholdSpec> specs = ThresholdSpecs(config.thresholds);
  PortHealth health{&specs, LinkParams(config.link)};
  PortCounters counters;

  void Set(const std::string& key, std::uint64_t raw, counters::Behavior behavior, unsigned width) {
    counters[key].Update(raw, behavior, width);
  }
  bool Active(TimePoint now, const std::string& name, std::string* severity = nullptr) const {
    std::vector<Finding> findings;
    health.Findings(now, false, &findings);
    for (const Finding& f : findings) {
      if (f.name == name) {
        if (severity != nullptr) *severity = f.severity;
        return f.active;
      }
    }
    ADD_FAILURE() << "no finding " << name;
    return false;
  }
  bool Has(TimePoint now, const std::string& name) const {
    std::vector<Finding> findings;
    health.Findings(now, false, &findings);
    for (const Finding& f : findings) {
      if (f.name == name) return true;
    }
    return false;
  }
};

TEST(PortHealthTest, SymbolErrorThresholdsOverTime) {
  PortFixture port;
  using counters::Behavior;
  std::uint64_t symbol = 0;
  TimePoint t = kT0;
  // 3 symbol errors every 10 s: 180 in 10 minutes is over the BER limit (120/h) but far under
  // the burst limit (10/s).
  for (int i = 0; i <= 60; ++i, t += seconds(10)) {
    port.Set("counters/symbol_error", symbol, Behavior::kSaturating, 16);
    port.health.Observe(t, {true, 4, 5}, port.counters);
    symbol += 3;
  }
  std::string severity;
  EXPECT_TRUE(port.Active(t, "symbol_error_ber", &severity));
  EXPECT_EQ(severity, "critical");
  EXPECT_FALSE(port.Active(t, "symbol_error_burst"));

  // A burst: +1000 in 10 s.
  symbol += 1000;
  port.Set("counters/symbol_error", symbol, Behavior::kSaturating, 16);
  port.health.Observe(t, {true, 4, 5}, port.counters);
  EXPECT_TRUE(port.Active(t, "symbol_error_burst", &severity));
  EXPECT_EQ(severity, "warning");
  // Quiet for a minute: the burst clears, the hourly BER finding stays.
  for (int i = 0; i < 8; ++i) {
    t += seconds(10);
    port.health.Observe(t, {true, 4, 5}, port.counters);
  }
  EXPECT_FALSE(port.Active(t, "symbol_error_burst"));
  EXPECT_TRUE(port.Active(t, "symbol_error_ber"));
}

TEST(PortHealthTest, AnyLinkDownedOrIntegrityErrorIsCriticalForTenMinutes) {
  PortFixture port;
  using counters::Behavior;
  TimePoint t = kT0;
  port.Set("counters/link_downed", 3, Behavior::kSaturating, 8);
  port.Set("counters/local_link_integrity_errors", 0, Behavior::kSaturating, 4);
  port.health.Observe(t, {true, 4, 5}, port.counters);
  EXPECT_FALSE(port.Active(t, "link_downed")) << "the first reading is a baseline";
  t += seconds(10);
  port.Set("counters/link_downed", 4, Behavior::kSaturating, 8);
  port.Set("counters/local_link_integrity_errors", 1, Behavior::kSaturating, 4);
  port.health.Observe(t, {true, 4, 5}, port.counters);
  EXPECT_TRUE(port.Active(t, "link_downed"));
  EXPECT_TRUE(port.Active(t, "local_link_integrity"));
  for (int i = 0; i < 62; ++i) {
    t += seconds(10);
    port.health.Observe(t, {true, 4, 5}, port.counters);
  }
  EXPECT_FALSE(port.Active(t, "link_downed"));
  // The link_downed event, seen while the port looked up at both polls, is a flap episode.
  EXPECT_EQ(port.health.history().Episodes(t), 1u);
}

TEST(PortHealthTest, CongestionAndRoceThresholds) {
  PortFixture port;
  using counters::Behavior;
  TimePoint t = kT0;
  std::uint64_t wait = 0, cnp_ignored = 0, oob = 0, discards = 0;
  for (int i = 0; i <= 31; ++i, t += seconds(10)) {
    port.Set("counters/port_xmit_wait", wait, Behavior::kSaturating, 32);
    port.Set("counters/port_xmit_discards", discards, Behavior::kSaturating, 16);
    port.Set("hw_counters/rp_cnp_ignored", cnp_ignored, Behavior::kPlain64, 64);
    port.Set("hw_counters/out_of_buffer", oob, Behavior::kWrapOrClamp32, 32);
    port.health.Observe(t, {true, 4, 5}, port.counters);
    wait += 20'000'000;  // 2e6 ticks/s: over the 1e6 placeholder
    discards += 2000;    // 200/s: over 100/s
    if (i == 20) cnp_ignored += 1;
    if (i == 25) oob += 3;
  }
  EXPECT_TRUE(port.Active(t, "transmit_wait"));
  EXPECT_TRUE(port.Active(t, "discards"));
  EXPECT_TRUE(port.Active(t, "cnp_ignored"));
  EXPECT_TRUE(port.Active(t, "out_of_buffer"));
  EXPECT_FALSE(port.Has(t, "ack_timeouts")) << "no such counter on this port";

  // Discards while the port is down are expected, not congestion.
  port.health.Observe(t, {true, 1, 2}, port.counters);
  EXPECT_FALSE(port.Active(t, "discards"));
}

TEST(PortHealthTest, ThresholdsOfCountersThePortLacksAreNotReported) {
  PortFixture port;
  port.Set("counters/symbol_error", 0, counters::Behavior::kSaturating, 16);
  port.health.Observe(kT0, {true, 4, 5}, port.counters);
  std::vector<Finding> findings;
  port.health.Findings(kT0, false, &findings);
  std::vector<std::string> names;
  names.reserve(findings.size());
  for (const Finding& f : findings) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"link_down", "link_flapping", "counter_saturated",
                                             "symbol_error_burst", "symbol_error_ber"}));
}

TEST(PortHealthTest, SeverityNoneTurnsAThresholdOffAndConfigMovesLimits) {
  PortFixture port;
  port.config.thresholds.symbol_error_ber.severity = "none";
  port.config.thresholds.symbol_error_burst.increase = 5;
  port.config.thresholds.symbol_error_burst.severity = "critical";
  port.specs = ThresholdSpecs(port.config.thresholds);
  port.health.Reconfigure(&port.specs, LinkParams(port.config.link));
  port.Set("counters/symbol_error", 0, counters::Behavior::kSaturating, 16);
  port.health.Observe(kT0, {true, 4, 5}, port.counters);
  port.Set("counters/symbol_error", 6, counters::Behavior::kSaturating, 16);
  port.health.Observe(kT0 + seconds(10), {true, 4, 5}, port.counters);
  std::vector<Finding> findings;
  port.health.Findings(kT0 + seconds(10), false, &findings);
  bool burst = false;
  for (const Finding& f : findings) {
    EXPECT_NE(f.name, "symbol_error_ber");
    if (f.name == "symbol_error_burst") {
      burst = f.active;
      EXPECT_EQ(f.severity, "critical");
    }
  }
  EXPECT_TRUE(burst);
}

TEST(PortHealthTest, SaturatedCounterIsAnInfoFindingAndTransitionsAreCounted) {
  PortFixture port;
  TimePoint t = kT0;
  port.Set("counters/port_xmit_wait", 4294967295u, counters::Behavior::kSaturating, 32);
  port.health.Observe(t, {true, 4, 5}, port.counters);
  std::string severity;
  EXPECT_TRUE(port.Active(t, "counter_saturated", &severity));
  EXPECT_EQ(severity, "info");
  port.health.Observe(t += seconds(10), {true, 1, 2}, port.counters);
  port.health.Observe(t += seconds(10), {true, 2, 5}, port.counters);
  port.health.Observe(t += seconds(10), {true, 4, 5}, port.counters);
  port.health.Observe(t += seconds(10), {false, -1, -1}, port.counters);  // device vanished
  const auto& transitions = port.health.transitions();
  EXPECT_EQ(transitions.at({"active", "down"}), 2u);
  EXPECT_EQ(transitions.at({"down", "init"}), 1u);
  EXPECT_EQ(transitions.at({"init", "active"}), 1u);
}

TEST(PortHealthTest, VanishedPortGoesDownAfterTheDropWindow) {
  PortFixture port;
  TimePoint t = kT0;
  for (int i = 0; i < 6; ++i) port.health.Observe(t += seconds(10), {true, 4, 5}, port.counters);
  for (int i = 0; i < 30; ++i)
    port.health.Observe(t += seconds(10), {false, -1, -1}, port.counters);
  EXPECT_TRUE(port.Active(t, "link_down"));
}

TEST(NvlinkHealthTest, InactiveAfterDownAfterAndErrorsOverTheWindow) {
  const NvlinkHealthParams config = nvlink::NvlinkParams(config::NvlinkConfig{});  // the defaults
  NvlinkHealth link(config);
  TimePoint t = kT0;
  link.Observe(t, 1, 0);
  for (int i = 0; i < 11; ++i) link.Observe(t += seconds(10), 0, 0);
  EXPECT_FALSE(link.Inactive(t));
  link.Observe(t += seconds(25), 0, 0);  // 2 minutes since the first inactive sample
  EXPECT_TRUE(link.Inactive(t));
  EXPECT_FALSE(link.Errors());
  link.Observe(t += seconds(10), 1, 2);
  EXPECT_TRUE(link.Errors());
  EXPECT_FALSE(link.Inactive(t));  // down_hold is 0 for NVLink

  NvlinkHealth by_design(config);  // never active: a link unused by design stays quiet
  for (int i = 0; i < 100; ++i) by_design.Observe(kT0 + seconds(10 * i), 0, -1);
  EXPECT_FALSE(by_design.Inactive(kT0 + seconds(1000)));
}

}  // namespace
}  // namespace ncclscope::rdma::health
