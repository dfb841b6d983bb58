#pragma once

// The `profiler` source: reads the NCCL profiler plugin's rings in plugin.ring_dir on a background
// thread (every plugin.poll_interval), feeds the records to the NCCL analytics
// (agent/analytics/nccl_analytics.h; plus any sink added with AddSink), passes the plugin controls
// from the config to every job, and renders everything at scrape time: the analytics' many series
// as text (CollectText), the data-path health (rings, records, drops) as families (Collect).

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "agent/config/config.h"
#include "agent/core/source.h"
#include "agent/profiler/ring_directory.h"
#include "rdma/netlink/qp_table.h"

namespace ncclscope::profiler {

// The plugin controls a config asks for, as ring-header controls and as controls-file text.
ncclscope_controls ControlsFromConfig(const config::PluginConfig& plugin);
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
  SourceStatus Status() const override;
  std::vector<prometheus::MetricFamily> Collect() const override;
  void CollectText(metrics::TextWriter& out) const override;

 private:
  class Fanout;
  void Run();
  SourceStatus PrepareDirectory(const config::PluginConfig& plugin);
  // Dumps the QP table when the analytics want it (channel -> NIC), outside the analytics lock.
  void RefreshQpTable();

  // The reader thread holds analytics_mutex_ for a whole pass; a scrape holds it to render.
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

  mutable std::mutex snapshot_mutex_;
  DirectorySnapshot snapshot_;
  std::string down_reason_;
};

}  // namespace ncclscope::profiler
