#pragma once

// A source whose data is read by a background Poller (rdma.interval, nvlink.interval) rather
// than at scrape time: each poll renders its families once, as text, and publishes them with the
// source's status, and Collect() writes the last published text, so a scrape never causes a
// firmware or driver read. Subclasses say how to apply a config and what one poll does; the
// thread, the published state and the Source lifecycle are here, once.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/core/poller.h"
#include "agent/core/source.h"

namespace ncclscope {

class PolledSource : public Source {
 public:
  // Applies the config (ApplyConfig) and starts polling at once, then every PollInterval.
  SourceStatus Start(const config::Config& config) final;
  SourceStatus Reconfigure(const config::Config& config) final;
  void Stop() final;
  SourceStatus Status() const final;
  void Collect(metrics::TextWriter& out) const final;

  // One poll, synchronously: the poller thread calls it; tests call it directly to step through
  // scenarios with a manual clock.
  virtual void PollOnce() = 0;

 protected:
  explicit PolledSource(std::string name) : Source(std::move(name)) {}
  // Subclasses call StopPolling() first in their destructor: the poll uses their members.
  ~PolledSource() override;
  void StopPolling() { poller_.Stop(); }

  virtual void ApplyConfig(const config::Config& config) = 0;
  virtual std::chrono::nanoseconds PollInterval(const config::Config& config) const = 0;

  // What scrapes see from now on.
  void Publish(std::string text, SourceStatus status);

 private:
  Poller poller_;
  mutable std::mutex publish_mutex_;
  std::shared_ptr<const std::string> published_;
  SourceStatus status_ = SourceStatus::Down("not polled yet");
};

}  // namespace ncclscope
