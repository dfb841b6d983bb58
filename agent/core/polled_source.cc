#include "agent/core/polled_source.h"

#include "agent/core/text_exposition.h"

namespace ncclscope {

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

void PolledSource::Collect(metrics::TextWriter& out) const {
  std::shared_ptr<const std::string> published;
  {
    std::lock_guard<std::mutex> lock(publish_mutex_);
    published = published_;
  }
  if (published) out.Rendered(*published);
}

void PolledSource::Publish(std::string text, SourceStatus status) {
  auto shared = std::make_shared<const std::string>(std::move(text));
  std::lock_guard<std::mutex> lock(publish_mutex_);
  published_ = std::move(shared);
  status_ = std::move(status);
}

}  // namespace ncclscope
