#pragma once

// The `profiler` source: reads the NCCL profiler plugin's rings in plugin.ring_dir on a background
// thread (every plugin.poll_interval), feeds the records to its sinks (the metrics in
// op_metrics.h, plus any added with AddSink, e.g. the NCCL analytics), passes the plugin controls
// from the config to every job, and renders everything at scrape time.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/config.h"
#include "agent/core/source.h"
#include "agent/profiler/op_metrics.h"
#include "agent/profiler/ring_directory.h"

namespace ncclscope::profiler {

// The plugin controls a config asks for, as ring-header controls and as controls-file text.
ncclscope_controls ControlsFromConfig(const config::PluginConfig& plugin);
std::string ControlsFileText(const config::PluginConfig& plugin);

class ProfilerSource : public Source {
 public:
  ProfilerSource();
  ~ProfilerSource() override;

  // Adds a sink that sees every record after the built-in metrics. Call before Start().
  void AddSink(std::shared_ptr<RecordSink> sink);

  bool Enabled(const config::Config& config) const override;
  SourceStatus Start(const config::Config& config) override;
  SourceStatus Reconfigure(const config::Config& config) override;
  void Stop() override;
  SourceStatus Status() const override;
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  class Fanout;
  void Run();
  SourceStatus PrepareDirectory(const config::PluginConfig& plugin);

  std::shared_ptr<OpMetrics> metrics_;
  std::vector<std::shared_ptr<RecordSink>> extra_sinks_;
  std::unique_ptr<Fanout> fanout_;

  std::mutex mutex_;  // guards the fields below and wakes the reader thread
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
  std::unique_ptr<RingDirectory> directory_;  // reader thread only while running
  config::PluginConfig plugin_;
  bool controls_dirty_ = false;

  mutable std::mutex snapshot_mutex_;
  DirectorySnapshot snapshot_;
  std::string down_reason_;
};

}  // namespace ncclscope::profiler
