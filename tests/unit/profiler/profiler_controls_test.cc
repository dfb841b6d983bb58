// The profiler source's controls, checked against the plugin's own parser so agent and plugin
// agree on every control. (What the source derives from records: tests/unit/analytics.)

#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/profiler/profiler_source.h"
#include "plugin/src/settings.h"

namespace ncclscope::profiler {
namespace {

TEST(ProfilerControlsTest, TheAgentsControlsAreWhatThePluginReads) {
  config::PluginConfig plugin;
  plugin.events = {"coll", "kernel_ch", "proxy_step"};
  plugin.min_bytes = 12345;
  plugin.duty_cycle_period = config::Seconds(30);
  plugin.kernel_duty_cycle = 0.25;
  plugin.proxy_duty_cycle = 0.05;
  plugin.ring_size = 32u << 20;
  plugin.overhead_budget = 0.0025;
  plugin.record_one_in = 8;
  plugin.record_rate_limit = 2500;
  const ncclscope_controls header = ControlsFromConfig(plugin);
  EXPECT_EQ(header.overhead_budget_ppm, 2'500u);
  EXPECT_EQ(header.record_one_in, 8u);
  EXPECT_EQ(header.record_rate_limit, 2500u);
  EXPECT_EQ(header.flags, static_cast<std::uint32_t>(NCCLSCOPE_CONTROLS_HAS_BUDGET |
                                                     NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN |
                                                     NCCLSCOPE_CONTROLS_HAS_RECORD_RATE_LIMIT));
  EXPECT_EQ(header.event_mask, 0x2u | 0x40u | 0x18u);
  EXPECT_EQ(header.kernel_duty_pm, 250u);
  EXPECT_EQ(header.proxy_duty_pm, 50u);
  EXPECT_EQ(header.duty_period_ns, 30'000'000'000u);

  plugin::Settings settings;
  plugin::ApplyControlsFile(ControlsFileText(plugin), settings);
  EXPECT_TRUE(settings.warnings.empty()) << settings.warnings[0].c_str();
  EXPECT_EQ(settings.event_mask, header.event_mask);
  EXPECT_EQ(settings.min_bytes, header.min_bytes);
  EXPECT_EQ(settings.duty_period_ns, header.duty_period_ns);
  EXPECT_EQ(settings.kernel_duty_pm, header.kernel_duty_pm);
  EXPECT_EQ(settings.proxy_duty_pm, header.proxy_duty_pm);
  EXPECT_EQ(settings.ring_bytes, plugin.ring_size);
  EXPECT_EQ(settings.overhead_budget_ppm, header.overhead_budget_ppm);
  EXPECT_EQ(settings.record_one_in, header.record_one_in);
  EXPECT_EQ(settings.record_rate_limit, header.record_rate_limit);

  plugin.events.clear();
  plugin::Settings none;
  plugin::ApplyControlsFile(ControlsFileText(plugin), none);
  EXPECT_EQ(none.event_mask, 0u);
}

// Every value a duty cycle can take (per mille), and budgets down to 1 ppm, reach the plugin as the
// header carries them: the file's text is exact, not a rounded decimal.
TEST(ProfilerControlsTest, EveryDutyAndBudgetValueCrossesTheFileExactly) {
  config::PluginConfig plugin;
  for (std::uint32_t pm = 0; pm <= 1000; ++pm) {
    plugin.kernel_duty_cycle = pm / 1000.0;
    plugin.proxy_duty_cycle = (1000 - pm) / 1000.0;
    const ncclscope_controls header = ControlsFromConfig(plugin);
    ASSERT_EQ(header.kernel_duty_pm, pm);
    plugin::Settings settings;
    plugin::ApplyControlsFile(ControlsFileText(plugin), settings);
    ASSERT_TRUE(settings.warnings.empty()) << pm << ": " << settings.warnings[0].c_str();
    ASSERT_EQ(settings.kernel_duty_pm, header.kernel_duty_pm) << ControlsFileText(plugin);
    ASSERT_EQ(settings.proxy_duty_pm, header.proxy_duty_pm) << ControlsFileText(plugin);
  }
  for (const std::uint32_t ppm : {1u, 9u, 10u, 99u, 2'500u, 12'345u, 100'001u, 999'999u}) {
    plugin.overhead_budget = ppm / 1e6;
    const ncclscope_controls header = ControlsFromConfig(plugin);
    ASSERT_EQ(header.overhead_budget_ppm, ppm);
    plugin::Settings settings;
    plugin::ApplyControlsFile(ControlsFileText(plugin), settings);
    EXPECT_EQ(settings.overhead_budget_ppm, ppm) << ControlsFileText(plugin);
  }
}

}  // namespace
}  // namespace ncclscope::profiler
