#include "rdma/source/polled_source.h"

namespace ncclscope::rdma {

PolledSource::~PolledSource() { poller_.Stop(); }

SourceStatus PolledSource::Start(const config::Config& config) {
  ApplyConfig(config);
  poller_.Start(PollInterval(config), [this] {
    PollOnce();
    return std::chrono::nanoseconds(0);
  });
  return SourceStatus::Up();
}

SourceStatus PolledSource::Reconfigure(const config::Config& config) {
  poller_.Stop();
  return Start(config);
}

void PolledSource::Stop() { poller_.Stop(); }

SourceStatus PolledSource::Status() const {
  std::lock_guard<std::mutex> lock(publish_mutex_);
  return status_;
}

std::vector<prometheus::MetricFamily> PolledSource::Collect() const {
  std::shared_ptr<const std::vector<prometheus::MetricFamily>> published;
  {
    std::lock_guard<std::mutex> lock(publish_mutex_);
    published = published_;
  }
  return published ? *published : std::vector<prometheus::MetricFamily>{};
}

void PolledSource::Publish(std::vector<prometheus::MetricFamily> families, SourceStatus status) {
  auto shared = std::make_shared<const std::vector<prometheus::MetricFamily>>(std::move(families));
  std::lock_guard<std::mutex> lock(publish_mutex_);
  published_ = std::move(shared);
  status_ = std::move(status);
}

}  // namespace ncclscope::rdma
