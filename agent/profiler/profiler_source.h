#pragma once

// The `profiler` source: reads the NCCL profiler plugin's rings in plugin.ring_dir on a background
// thread (every plugin.poll_interval, up to plugin.poll_interval_max while the lanes are nearly
// empty: pass_pacer.h), feeds the records to the NCCL analytics (agent/analytics/nccl_analytics.h;
// plus any sink added with AddSink), passes the plugin controls from the config to every job, and
// renders everything at scrape time (Collect): the analytics' many series (rendered by the
// analytics, cached between passes), then the data-path health (rings, records, drops).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "agent/config/config.h"
#include "agent/core/source.h"
#include "agent/profiler/pass_pacer.h"
#include "agent/profiler/ring_directory.h"
#include "rdma/netlink/qp_table.h"

namespace ncclscope::profiler {

// The plugin controls a config asks for, as ring-header controls and as controls-file text.
ncclscope_controls ControlsFromConfig(const config::PluginConfig& plugin);
// The ring reader's bounds from the config (the rest are fixed, docs/trust-model.md).
DirectoryLimits LimitsFromConfig(const config::PluginConfig& plugin);
std::string ControlsFileText(const config::PluginConfig& plugin);
// The analytics' limits and settings from the config.
analytics::AnalyticsSettings AnalyticsFromConfig(const config::Config& config);
// Where the QP table comes from (plugin.qp_table); null for "off".
std::unique_ptr<rdma::netlink::QpSource> QpSourceFromConfig(const config::PluginConfig& plugin);

class ProfilerSource : public Source {
 public:
  ProfilerSource();
  ~ProfilerSource() override;

  // Adds a sink that sees every record after the analytics. Call before Start().
  void AddSink(std::shared_ptr<RecordSink> sink);

  bool Enabled(const config::Config& config) const override;
  SourceStatus Start(const config::Config& config) override;
  SourceStatus Reconfigure(const config::Config& config) override;
  void Stop() override;
  std::string Quiesce() override;
  SourceStatus Status() const override;
  void Collect(metrics::TextWriter& out) const override;

 private:
  // The analytics' text: live when the reader is between passes, else the newest cached.
  void CollectAnalytics(metrics::TextWriter& out) const;
  class Fanout;
  void Run();
  // Reader thread, analytics lock held; `wait`: the pacer's wait after this pass.
  void PublishSnapshot(const DirectorySnapshot& latest, PassPacer::Duration wait);
  void RenderSnapshot();  // reader thread
  // Renders the analytics into a new text for the cache (analytics lock held by the caller).
  std::shared_ptr<std::string> RenderAnalytics(std::size_t capacity) const;
  // Makes `text` the cached rendering unless a newer one is there already (see rendered_).
  void Publish(std::shared_ptr<const std::string> text, std::uint64_t generation,
               std::uint64_t records) const;
  SourceStatus PrepareDirectory(const config::PluginConfig& plugin);
  // Dumps the QP table when the analytics want it (channel -> NIC), outside the analytics lock.
  void RefreshQpTable();

  // How often the reader thread renders the analytics for scrapes (CollectAnalytics serves the
  // latest).
  static constexpr std::chrono::milliseconds kRenderInterval{1000};

  // The reader thread holds analytics_mutex_ for a whole pass and to render; Reconfigure() holds
  // it to apply settings; a scrape only try-locks it (CollectAnalytics).
  mutable std::mutex analytics_mutex_;
  std::shared_ptr<analytics::NcclAnalytics> analytics_;
  std::vector<std::shared_ptr<RecordSink>> extra_sinks_;
  std::unique_ptr<Fanout> fanout_;
  RecordSink* sink_ = nullptr;  // analytics_ alone, or fanout_ when there are extra sinks

  std::mutex mutex_;  // guards the fields below and wakes the reader thread
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
  std::unique_ptr<RingDirectory> directory_;            // reader thread only while running
  std::unique_ptr<rdma::netlink::QpSource> qp_source_;  // likewise; null when plugin.qp_table off
  rdma::netlink::DumpStatus last_dump_status_ = rdma::netlink::DumpStatus::kOk;  // for the log
  config::PluginConfig plugin_;
  bool controls_dirty_ = false;
  PassPacer pacer_;  // the reader's; bounds from the config in Start() and Run()

  std::chrono::steady_clock::time_point rendered_at_{};  // reader thread
  std::size_t rendered_capacity_ = 0;                    // reader thread

  // Each rendering of the analytics is numbered under analytics_mutex_.
  mutable std::uint64_t render_generation_ = 0;

  mutable std::mutex snapshot_mutex_;
  DirectoryTotals snapshot_;
  PassPacer::Duration published_wait_{};  // the reader's wait after its last pass
  // The analytics' text for scrapes that find a pass running (see kRenderInterval): the newest
  // rendering, whether the reader thread or a scrape made it. Never replaced by an older one, so
  // no scrape shows a counter below what an earlier scrape showed (Prometheus would read a reset).
  mutable std::shared_ptr<const std::string> rendered_;
  mutable std::uint64_t rendered_generation_ = 0;
  mutable std::uint64_t records_rendered_ = 0;  // records read when rendered_ was made
  mutable std::uint64_t records_served_ = 0;    // ... when the last scrape took it
  std::string down_reason_;
};

}  // namespace ncclscope::profiler
