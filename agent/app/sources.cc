#include "agent/app/sources.h"

namespace ncclscope {

std::vector<std::shared_ptr<Source>> MakeSources() {
  std::vector<std::shared_ptr<Source>> sources;
  // Sources register here as they land: profiler plugin rings, eBPF probes, InfiniBand ports,
  // NVLink.
  return sources;
}

}  // namespace ncclscope
