#include "agent/ebpf/ebpf_source.h"

#include "agent/core/log.h"
#include "agent/ebpf/runtime.h"

namespace ncclscope::ebpf {

EbpfSource::EbpfSource(RingWriters ring_writers, FeatureProbe features)
    : Source("ebpf"), ring_writers_(std::move(ring_writers)), features_(std::move(features)) {}

EbpfSource::~EbpfSource() { Stop(); }

SourceStatus EbpfSource::Start(const config::Config& config) {
  std::string error;
  std::shared_ptr<Runtime> runtime;
  try {
    // Coverage needs the rings: with the plugin source off nobody reads them, and every NCCL
    // process would look uncovered.
    Coverage coverage;
    if (config.plugin.enabled && ring_writers_) {
      coverage = {config.plugin.ring_dir, ring_writers_, &errors()};
    }
    runtime = Runtime::Start(config.ebpf, coverage, features_(), &error);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!runtime) {
    NCCLSCOPE_LOG(kWarn, "ebpf") << "eBPF source down: " << error
                                 << " (the other sources keep running)";
    return SourceStatus::Down(error);
  }
  NCCLSCOPE_LOG(kInfo, "ebpf") << "eBPF probes loaded; watching processes for libnccl ("
                               << config.ebpf.nccl.functions.size() << " functions) and "
                               << "libibverbs (" << config.ebpf.ibverbs.functions.size()
                               << " functions)";
  std::lock_guard<std::mutex> lock(mutex_);
  runtime_ = std::move(runtime);
  return SourceStatus::Up();
}

void EbpfSource::Stop() {
  std::shared_ptr<Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runtime = std::move(runtime_);
  }
  // Destroyed here (or by a scrape still holding it): joins the worker, detaches every probe.
}

SourceStatus EbpfSource::Status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime_ ? SourceStatus::Up() : SourceStatus::Down("not running");
}

void EbpfSource::Collect(metrics::TextWriter& out) const {
  std::shared_ptr<Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runtime = runtime_;
  }
  if (runtime) runtime->Render(out);
}

}  // namespace ncclscope::ebpf
