#include "agent/app/sources.h"

#include "agent/ebpf/ebpf_source.h"
#include "agent/nvlink/nvlink_source.h"
#include "agent/profiler/profiler_source.h"
#include "agent/profiler/ring_attribution.h"
#include "agent/rdma/rdma_source.h"

namespace ncclscope {

std::vector<std::shared_ptr<Source>> MakeSources() {
  std::vector<std::shared_ptr<Source>> sources;
  // Sources register here as they land: profiler plugin rings, eBPF probes, InfiniBand ports,
  // NVLink.
  sources.push_back(std::make_shared<profiler::ProfilerSource>());
  // The eBPF source's coverage (NCCL processes without a ring, and the ABI of those with one)
  // reads the profiler's ring files.
  sources.push_back(std::make_shared<ebpf::EbpfSource>(&profiler::RingWriterAbis));
  sources.push_back(std::make_shared<rdma::RdmaSource>());
  sources.push_back(std::make_shared<nvlink::NvlinkSource>());
  return sources;
}

}  // namespace ncclscope
