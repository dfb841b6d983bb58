// The plugin's settings: parsers, the controls file, environment precedence and pins.

#include "plugin/src/settings.h"

#include <gtest/gtest.h>

#include <map>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::plugin {
namespace {

// An environment of `vars`, alive for the full expression that uses it (Env({...}) as an argument).
struct Env {
  Env(std::initializer_list<std::pair<const std::string, std::string>> v) : vars(v) {}
  operator EnvLookup() const {  // NOLINT(google-explicit-constructor)
    return EnvLookup(
        [](const void* context, const char* name) -> const char* {
          const auto& all = static_cast<const Env*>(context)->vars;
          const auto it = all.find(name);
          return it == all.end() ? nullptr : it->second.c_str();
        },
        this);
  }
  std::map<std::string, std::string> vars;
};

TEST(SettingsTest, Parsers) {
  EXPECT_EQ(ParseBytes("8MiB"), 8u << 20);
  EXPECT_EQ(ParseBytes("64k"), 65536u);
  EXPECT_EQ(ParseBytes("1000"), 1000u);
  EXPECT_EQ(ParseBytes("2GB"), 2000000000u);
  EXPECT_EQ(ParseBytes("x"), std::nullopt);
  EXPECT_EQ(ParseBytes("5 parsecs"), std::nullopt);
  EXPECT_EQ(ParseDurationNs("10s"), 10'000'000'000u);
  EXPECT_EQ(ParseDurationNs("1m30s"), 90'000'000'000u);
  EXPECT_EQ(ParseDurationNs("250ms"), 250'000'000u);
  EXPECT_EQ(ParseDurationNs("10"), std::nullopt);
  EXPECT_EQ(ParseFractionPm("0.25"), 250u);
  EXPECT_EQ(ParseFractionPm("1"), 1000u);
  EXPECT_EQ(ParseFractionPm("12.5%"), 125u);
  EXPECT_EQ(ParseFractionPm("1.5"), std::nullopt);
  EXPECT_EQ(ParseFractionPm("-1"), std::nullopt);
  EXPECT_EQ(ParseFractionPpm("0.01"), 10'000u);
  EXPECT_EQ(ParseFractionPpm("1%"), 10'000u);
  EXPECT_EQ(ParseFractionPpm("0.25%"), 2'500u);
  EXPECT_EQ(ParseFractionPpm("0.000001"), 1u);
  EXPECT_EQ(ParseFractionPpm("0"), 0u);
  EXPECT_EQ(ParseFractionPpm("1"), 1'000'000u);
  EXPECT_EQ(ParseFractionPpm("100%"), 1'000'000u);
  EXPECT_EQ(ParseFractionPpm("101%"), std::nullopt);
  EXPECT_EQ(ParseFractionPpm("2"), std::nullopt);
  EXPECT_EQ(ParseFractionPpm("1e-2"), std::nullopt);
  EXPECT_EQ(ParseEvents("coll,p2p,kernel_ch"), kEventColl | kEventP2p | kEventKernelCh);
  EXPECT_EQ(ParseEvents("proxy_step"), kEventProxyStep | kEventProxyOp);  // needs its parent
  EXPECT_EQ(ParseEvents("0x46"), 0x46u);
  EXPECT_EQ(ParseEvents("none"), 0u);
  EXPECT_EQ(ParseEvents("all"), kUsableEvents);
  EXPECT_EQ(ParseEvents("coll,bogus"), std::nullopt);
  EXPECT_EQ(ParseEvents("net_plugin"), kEventNetPlugin | kEventProxyStep | kEventProxyOp);
  EXPECT_EQ(ParseEvents("0x20"), std::nullopt);  // ProxyCtrl is not ours to ask for
  EXPECT_EQ(ParseEvents("ce_coll,coll"), kEventCeColl | kEventColl);
}

TEST(SettingsTest, TheRingHeadersEventGroupsAreThePluginsEventBits) {
  // The agent writes these bits into the controls, the plugin parses these names: one table.
  std::uint32_t all = 0;
  for (unsigned group = 0; group < NCCLSCOPE_EVENT_GROUP_COUNT; ++group) {
    const char* name = ncclscope_event_group_name(group);
    ASSERT_NE(name, nullptr);
    EXPECT_EQ(ParseEvents(name), ncclscope_event_group_bits(group)) << name;
    all |= ncclscope_event_group_bits(group);
  }
  EXPECT_EQ(all, kUsableEvents);
  EXPECT_EQ(ncclscope_event_group_name(NCCLSCOPE_EVENT_GROUP_COUNT), nullptr);
  EXPECT_EQ(ncclscope_event_group_bits(NCCLSCOPE_EVENT_GROUP_COUNT), 0u);
}

TEST(SettingsTest, DefaultsRecordEverythingWithGpuTimingAndSampleTheNetwork) {
  const Settings s = LoadSettings(Env({{"NCCLSCOPE_RING_DIR", "/nonexistent/dir"}}));
  EXPECT_EQ(s.ring_dir, "/nonexistent/dir");
  EXPECT_EQ(s.event_mask, kUsableEvents);
  EXPECT_EQ(s.kernel_duty_pm, 1000u);
  EXPECT_EQ(s.proxy_duty_pm, 100u);
  EXPECT_EQ(s.min_bytes, 0u);
  EXPECT_EQ(s.ring_bytes, 8u << 20);
  EXPECT_EQ(s.overhead_budget_ppm, 10'000u);  // the governor keeps the plugin under 1 % of a core
  EXPECT_EQ(s.overhead_sample, 256u);
  EXPECT_EQ(s.record_one_in, 1u);  // every op recorded unless the agent or the job asks
  EXPECT_EQ(s.record_rate_limit, 0u);
  EXPECT_TRUE(s.test_spin_file.empty());
  EXPECT_EQ(s.pinned, 0u);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(SettingsTest, OverheadBudgetFromTheControlsFileOrPinnedByTheEnvironment) {
  Settings s;
  ApplyControlsFile("overhead_budget=0.5%\n", s);
  EXPECT_EQ(s.overhead_budget_ppm, 5'000u);
  ApplyEnvironment(Env({{"NCCLSCOPE_OVERHEAD_BUDGET", "0"},
                        {"NCCLSCOPE_OVERHEAD_SAMPLE", "64"},
                        {"NCCLSCOPE_TEST_SPIN_FILE", "/tmp/spin"}}),
                   s);
  EXPECT_EQ(s.overhead_budget_ppm, 0u);
  EXPECT_EQ(s.pinned, NCCLSCOPE_CONTROL_OVERHEAD_BUDGET);
  EXPECT_EQ(s.overhead_sample, 64u);
  EXPECT_EQ(s.test_spin_file, "/tmp/spin");
  ApplyControlsFile("overhead_budget=2%\n", s);  // pinned: the agent's value is ignored
  EXPECT_EQ(s.overhead_budget_ppm, 0u);
  Settings bad;
  ApplyEnvironment(
      Env({{"NCCLSCOPE_OVERHEAD_SAMPLE", "100"}, {"NCCLSCOPE_OVERHEAD_BUDGET", "lots"}}), bad);
  EXPECT_EQ(bad.overhead_sample, 256u);  // not a power of two
  EXPECT_EQ(bad.overhead_budget_ppm, 10'000u);
  EXPECT_EQ(bad.warnings.size(), 2u);
}

TEST(SettingsTest, RecordOneInAndRateLimitFromTheControlsFileOrPinnedByTheEnvironment) {
  Settings s;
  ApplyControlsFile("record_one_in=8\n", s);
  EXPECT_EQ(s.record_one_in, 8u);
  EXPECT_EQ(s.pinned, 0u);
  ApplyEnvironment(Env({{"NCCLSCOPE_RECORD_ONE_IN", "3"}}), s);
  EXPECT_EQ(s.record_one_in, 3u);
  EXPECT_EQ(s.pinned, NCCLSCOPE_CONTROL_RECORD_ONE_IN);
  ApplyControlsFile("record_one_in=16\n", s);  // pinned: the agent's value is ignored
  EXPECT_EQ(s.record_one_in, 3u);
  ApplyControlsFile("record_rate_limit=1000\n", s);
  EXPECT_EQ(s.record_rate_limit, 1000u);
  ApplyEnvironment(Env({{"NCCLSCOPE_RECORD_RATE_LIMIT", "0"}}), s);
  EXPECT_EQ(s.record_rate_limit, 0u);
  EXPECT_NE(s.pinned & NCCLSCOPE_CONTROL_RECORD_RATE_LIMIT, 0u);
  Settings bad;
  ApplyEnvironment(Env({{"NCCLSCOPE_RECORD_ONE_IN", "0"}}), bad);
  ApplyControlsFile("record_one_in=65537\nrecord_rate_limit=-5\n", bad);
  EXPECT_EQ(bad.record_one_in, 1u);
  EXPECT_EQ(bad.record_rate_limit, 0u);
  EXPECT_EQ(bad.warnings.size(), 3u);
}

TEST(SettingsTest, EnvironmentWinsOverTheControlsFileAndPinsThatControl) {
  Settings s;
  ApplyControlsFile(
      "# agent\nevents=coll,p2p\nmin_bytes=4096\nproxy_duty=50%\nring_size=16MiB\n"
      "unknown_key=1\n",
      s);
  EXPECT_EQ(s.event_mask, kEventColl | kEventP2p);
  EXPECT_EQ(s.min_bytes, 4096u);
  EXPECT_EQ(s.proxy_duty_pm, 500u);
  EXPECT_EQ(s.ring_bytes, 16u << 20);
  ApplyEnvironment(Env({{"NCCLSCOPE_MIN_BYTES", "0"},
                        {"NCCLSCOPE_KERNEL_DUTY", "0.5"},
                        {"SLURM_JOB_ID", "1234"}}),
                   s);
  EXPECT_EQ(s.min_bytes, 0u);
  EXPECT_EQ(s.kernel_duty_pm, 500u);
  EXPECT_EQ(s.pinned, NCCLSCOPE_CONTROL_MIN_BYTES | NCCLSCOPE_CONTROL_KERNEL_DUTY);
  EXPECT_EQ(s.job_id, "1234");
}

TEST(SettingsTest, BadValuesWarnAndKeepTheDefault) {
  Settings s;
  ApplyEnvironment(Env({{"NCCLSCOPE_RING_SIZE", "1KiB"},
                        {"NCCLSCOPE_RING_LANES", "0"},
                        {"NCCLSCOPE_EVENTS", "everything"},
                        {"NCCLSCOPE_CLOCK", "sundial"},
                        {"NCCLSCOPE_DISABLE", "1"}}),
                   s);
  EXPECT_EQ(s.ring_bytes, 8u << 20);
  EXPECT_EQ(s.lanes, 16u);
  EXPECT_EQ(s.event_mask, kUsableEvents);
  EXPECT_EQ(s.clock, "auto");
  EXPECT_TRUE(s.disabled);
  EXPECT_EQ(s.warnings.size(), 4u);
}

}  // namespace
}  // namespace ncclscope::plugin
