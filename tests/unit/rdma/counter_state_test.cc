// Saturation, wrap and reset of hardware counters, and the catalogue they are described by.

#include "rdma/counters/counter_state.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "rdma/counters/catalogue.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::rdma::counters {
namespace {

using sysfs::CounterGroup;

TEST(CounterStateTest, NarrowPmaCountersSaturateAndAreReportedSo) {
  const CounterInfo* link_downed = Lookup(CounterGroup::kCounters, "link_downed");
  ASSERT_NE(link_downed, nullptr);
  EXPECT_EQ(link_downed->width_bits, 8);
  CounterState state;
  state.Update(250, link_downed->behavior, link_downed->width_bits);
  EXPECT_FALSE(state.saturated());
  auto update = state.Update(255, link_downed->behavior, link_downed->width_bits);
  EXPECT_DOUBLE_EQ(update.increase, 5);
  EXPECT_TRUE(state.saturated());
  // Stuck at the top: no increase, still saturated (a silent zero rate without the flag).
  update = state.Update(255, link_downed->behavior, link_downed->width_bits);
  EXPECT_DOUBLE_EQ(update.increase, 0);
  EXPECT_TRUE(state.saturated());
  EXPECT_DOUBLE_EQ(state.extended(), 255);

  // Saturated on the very first reading too (gpud PR #943: 255, 65535, 2^32-1 on a live H100).
  for (const auto& [file, value] :
       std::vector<std::pair<const char*, std::uint64_t>>{{"link_downed", 255},
                                                          {"port_xmit_discards", 65535},
                                                          {"port_xmit_wait", 4294967295u},
                                                          {"local_link_integrity_errors", 15},
                                                          {"link_error_recovery", 255}}) {
    const CounterInfo* info = Lookup(CounterGroup::kCounters, file);
    ASSERT_NE(info, nullptr) << file;
    CounterState first;
    first.Update(value, info->behavior, info->width_bits);
    EXPECT_TRUE(first.saturated()) << file;
  }
}

TEST(CounterStateTest, DecreaseOfASaturatingCounterIsAReset) {
  const CounterInfo* symbol = Lookup(CounterGroup::kCounters, "symbol_error");
  CounterState state;
  state.Update(65535, symbol->behavior, symbol->width_bits);
  ASSERT_TRUE(state.saturated());
  auto update = state.Update(3, symbol->behavior, symbol->width_bits);  // perfquery -R, then 3
  EXPECT_TRUE(update.reset);
  EXPECT_FALSE(update.wrapped);
  EXPECT_DOUBLE_EQ(update.increase, 3);
  EXPECT_EQ(state.resets(), 1u);
  EXPECT_FALSE(state.saturated());
  EXPECT_DOUBLE_EQ(state.extended(), 3);
  EXPECT_DOUBLE_EQ(state.accumulated(), 3);
}

TEST(CounterStateTest, MlxQCountersWrapOrClampAndResetsAreToldApart) {
  const CounterInfo* oob = Lookup(CounterGroup::kHwCounters, "out_of_buffer");
  ASSERT_NE(oob, nullptr);
  ASSERT_EQ(oob->behavior, Behavior::kWrapOrClamp32);
  CounterState state;
  state.Update(4294967000u, oob->behavior, oob->width_bits);
  // Near the top, then small: a wrap. 296 + 100 events, and the exported value keeps counting.
  auto wrap = state.Update(100, oob->behavior, oob->width_bits);
  EXPECT_TRUE(wrap.wrapped);
  EXPECT_FALSE(wrap.reset);
  EXPECT_DOUBLE_EQ(wrap.increase, 396);
  EXPECT_DOUBLE_EQ(state.extended(), 4294967296.0 + 100);
  EXPECT_EQ(state.resets(), 0u);

  // A drop from the middle is a reset, not a wrap.
  CounterState mid;
  mid.Update(3000000000u, oob->behavior, oob->width_bits);
  auto reset = mid.Update(2000000000u, oob->behavior, oob->width_bits);
  EXPECT_TRUE(reset.reset);
  EXPECT_EQ(mid.resets(), 1u);
  EXPECT_DOUBLE_EQ(mid.extended(), 2000000000.0);

  // Stuck at exactly 2^32-1 is a clamp (saturation); falling from there is a reset.
  CounterState clamp;
  clamp.Update(4294967295u, oob->behavior, oob->width_bits);
  EXPECT_TRUE(clamp.saturated());
  auto after_clamp = clamp.Update(5, oob->behavior, oob->width_bits);
  EXPECT_TRUE(after_clamp.reset);
  EXPECT_FALSE(after_clamp.wrapped);
  EXPECT_FALSE(clamp.saturated());

  // After a wrap, a reset drops the wrap count: the exported value restarts.
  state.Update(50, oob->behavior, oob->width_bits);
  EXPECT_EQ(state.resets(), 1u);
  EXPECT_DOUBLE_EQ(state.extended(), 50);
}

TEST(CounterStateTest, SixtyFourBitAndDataCounters) {
  const CounterInfo* xmit = Lookup(CounterGroup::kCounters, "port_xmit_data");
  ASSERT_NE(xmit, nullptr);
  EXPECT_DOUBLE_EQ(xmit->scale, 4);  // octets / 4
  CounterState data;
  data.Update(1000, xmit->behavior, xmit->width_bits);
  EXPECT_FALSE(data.saturated());
  data.Update(10000000000ull, xmit->behavior, xmit->width_bits);
  EXPECT_FALSE(data.saturated());
  // A legacy (non-extended) table clamps its 32-bit data counters.
  CounterState legacy;
  legacy.Update(4294967295u, xmit->behavior, xmit->width_bits);
  EXPECT_TRUE(legacy.saturated());

  const CounterInfo* cnp = Lookup(CounterGroup::kHwCounters, "rp_cnp_handled");
  CounterState congestion;
  congestion.Update(10, cnp->behavior, cnp->width_bits);
  auto update = congestion.Update(4, cnp->behavior, cnp->width_bits);
  EXPECT_TRUE(update.reset);
  EXPECT_DOUBLE_EQ(congestion.accumulated(), 4);
}

TEST(CounterStateTest, CatalogueIsConsistent) {
  const std::regex metric_name("^ncclscope_infiniband_[a-z0-9_]+$");
  std::set<std::string> metrics;
  std::set<std::pair<int, std::string>> files;
  for (const CounterInfo& info : Catalogue()) {
    const std::string metric(info.metric);
    EXPECT_TRUE(std::regex_match(metric, metric_name)) << metric;
    EXPECT_TRUE(metrics.insert(metric).second) << "duplicate metric " << metric;
    EXPECT_TRUE(files.insert({static_cast<int>(info.group), std::string(info.file)}).second)
        << "duplicate file " << info.file;
    const bool counter = info.behavior != Behavior::kGauge;
    EXPECT_EQ(metric.ends_with("_total"), counter) << metric;
    EXPECT_FALSE(info.help.empty()) << metric;
    if (info.behavior == Behavior::kSaturating) {
      EXPECT_LT(info.width_bits, 64) << metric;
    }
  }
  // The fabric.md 0.2 widths.
  const std::pair<const char*, int> widths[] = {
      {"symbol_error", 16},
      {"link_error_recovery", 8},
      {"link_downed", 8},
      {"port_rcv_errors", 16},
      {"port_xmit_discards", 16},
      {"local_link_integrity_errors", 4},
      {"excessive_buffer_overrun_errors", 4},
      {"VL15_dropped", 16},
      {"port_xmit_wait", 32},
      {"port_xmit_constraint_errors", 8},
  };
  for (const auto& [file, bits] : widths) {
    const CounterInfo* info = Lookup(CounterGroup::kCounters, file);
    ASSERT_NE(info, nullptr) << file;
    EXPECT_EQ(info->width_bits, bits) << file;
    EXPECT_EQ(info->behavior, Behavior::kSaturating) << file;
  }
  EXPECT_EQ(Lookup(CounterGroup::kCounters, "no_such_file"), nullptr);
  EXPECT_EQ(Lookup(CounterGroup::kHwCounters, "port_xmit_data"), nullptr);
}

// Counters only some hardware has never reach the end-to-end scrape; the docs must list them too.
TEST(CounterStateTest, EveryCatalogueMetricIsDocumented) {
  const std::string doc =
      ncclscope::testing::ReadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/docs/metrics.md");
  for (const CounterInfo& info : Catalogue()) {
    EXPECT_NE(doc.find("`" + std::string(info.metric) + "`"), std::string::npos)
        << info.metric << " missing from docs/metrics.md";
  }
}

}  // namespace
}  // namespace ncclscope::rdma::counters
