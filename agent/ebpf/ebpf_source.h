#pragma once

// The `ebpf` source: uprobes on libnccl and libibverbs in every process of the node. See
// agent/ebpf/README.md for the moving parts and docs/metrics.md for what it exports.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/config/config.h"
#include "agent/core/source.h"
#include "agent/ebpf/bpf_objects.h"
#include "agent/ebpf/coverage.h"

namespace ncclscope::ebpf {

class Runtime;

class EbpfSource : public Source {
 public:
  // `ring_writers`: who holds a profiler ring and through which ABI, for
  // ncclscope_ebpf_uncovered_processes and ncclscope_ebpf_nccl_process_info (empty: coverage not
  // exported). `features`: what the kernel allows (tests inject kernels this
  // machine is not).
  explicit EbpfSource(RingWriters ring_writers = {}, FeatureProbe features = ProbeKernelFeatures);
  ~EbpfSource() override;

  bool Enabled(const config::Config& config) const override { return config.ebpf.enabled; }
  SourceStatus Start(const config::Config& config) override;
  void Stop() override;
  SourceStatus Status() const override;
  void Collect(metrics::TextWriter& out) const override;

 private:
  RingWriters ring_writers_;
  FeatureProbe features_;
  mutable std::mutex mutex_;  // guards runtime_ (start/stop against collect)
  std::shared_ptr<Runtime> runtime_;
};

}  // namespace ncclscope::ebpf
