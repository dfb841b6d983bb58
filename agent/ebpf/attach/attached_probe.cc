#include "agent/ebpf/attach/attached_probe.h"

#include <bpf/libbpf.h>

namespace ncclscope::ebpf {

AttachedProbe::~AttachedProbe() {
  if (link_ != nullptr) bpf_link__destroy(link_);
}

AttachedProbe& AttachedProbe::operator=(AttachedProbe&& other) noexcept {
  if (this != &other) {
    if (link_ != nullptr) bpf_link__destroy(link_);
    link_ = std::exchange(other.link_, nullptr);
  }
  return *this;
}

}  // namespace ncclscope::ebpf
