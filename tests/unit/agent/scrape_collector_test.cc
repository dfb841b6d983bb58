#include "agent/exporter/scrape_collector.h"

#include <gtest/gtest.h>

#include "tests/unit/agent/fake_source.h"

namespace ncclscope {
namespace {

using testing::FakeSource;

std::string Render(const ScrapeCollector& collector) { return collector.RenderText(); }

TEST(ScrapeCollectorTest, RendersSourcesAndSelfMetrics) {
  auto good = std::make_shared<FakeSource>("good");
  auto down = std::make_shared<FakeSource>("down");
  down->start_ok = false;
  auto off = std::make_shared<FakeSource>("off", /*enabled=*/false);
  SourceSet sources({good, down, off});
  sources.Apply(config::Config{});
  ReloadStats reload;
  ScrapeCollector collector(&sources, &reload);

  const std::string text = Render(collector);
  EXPECT_NE(text.find("fake_good_value{k=\"v\"} 42"), std::string::npos) << text;
  EXPECT_NE(text.find("ncclscope_source_up{source=\"good\"} 1"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_source_up{source=\"down\"} 0"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_source_up{source=\"off\"} 0"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_source_enabled{source=\"off\"} 0"), std::string::npos);
  EXPECT_EQ(text.find("fake_off_value"), std::string::npos) << "disabled sources render nothing";
  EXPECT_NE(text.find("ncclscope_build_info{"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_config_last_reload_successful 1"), std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos);
  EXPECT_EQ(off->starts, 0);
}

TEST(ScrapeCollectorTest, ThrowingSourceIsCountedNotFatal) {
  auto bad = std::make_shared<FakeSource>("bad");
  auto good = std::make_shared<FakeSource>("good");
  bad->collect_throws = true;
  SourceSet sources({bad, good});
  sources.Apply(config::Config{});
  ReloadStats reload;
  ScrapeCollector collector(&sources, &reload);
  Render(collector);
  const std::string text = Render(collector);
  EXPECT_NE(text.find("fake_good_value"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_source_errors_total{source=\"bad\",kind=\"collect\"} 2"),
            std::string::npos)
      << text;
}

TEST(SourceSetTest, ApplyStartsReconfiguresAndStops) {
  auto source = std::make_shared<FakeSource>("s");
  auto thrower = std::make_shared<FakeSource>("t");
  thrower->start_throws = true;
  SourceSet sources({source, thrower});
  config::Config config;
  sources.Apply(config);
  EXPECT_EQ(source->starts, 1);
  EXPECT_FALSE(sources.StatusOf(*sources.entries()[1]).up);
  EXPECT_NE(sources.StatusOf(*sources.entries()[1]).reason.find("boom"), std::string::npos);
  sources.Apply(config);
  EXPECT_EQ(source->reconfigures, 1);
  source->enabled_ = false;
  sources.Apply(config);
  EXPECT_EQ(source->stops, 1);
  EXPECT_FALSE(sources.entries()[0]->running);
  sources.StopAll();
  EXPECT_EQ(source->stops, 1) << "a stopped source is not stopped twice";
}

TEST(ScrapeCollectorTest, ScrapeHasEveryFamilyAndCountsItself) {
  SourceSet sources({std::make_shared<FakeSource>("good")});
  sources.Apply(config::Config{});
  ReloadStats reload;
  ScrapeCollector collector(&sources, &reload);
  collector.RenderText();
  const std::string text = collector.RenderText();
  EXPECT_NE(text.find("fake_good_value{k=\"v\"} 42\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE fake_good_text_total counter\nfake_good_text_total{k=\"t\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("ncclscope_scrapes_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_scrape_bytes "), std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos);
}

TEST(ScrapeCollectorTest, ReloadFailureIsVisible) {
  SourceSet sources({});
  ReloadStats reload;
  reload.RecordSuccess(1234);
  reload.RecordFailure();
  ScrapeCollector collector(&sources, &reload);
  const std::string text = Render(collector);
  EXPECT_NE(text.find("ncclscope_config_last_reload_successful 0"), std::string::npos);
  EXPECT_NE(text.find("ncclscope_config_last_reload_success_timestamp_seconds 1234"),
            std::string::npos);
  EXPECT_NE(text.find("ncclscope_config_reloads_total{result=\"failure\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace ncclscope
