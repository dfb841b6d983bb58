#pragma once

// RAII over one libbpf link (bpftrace's AttachedProbe pattern): the probe is detached exactly
// when the object is destroyed, so an early return or exception can never leak a uprobe.

#include <utility>

struct bpf_link;

namespace ncclscope::ebpf {

class AttachedProbe {
 public:
  explicit AttachedProbe(bpf_link* link) : link_(link) {}
  ~AttachedProbe();
  AttachedProbe(AttachedProbe&& other) noexcept : link_(std::exchange(other.link_, nullptr)) {}
  AttachedProbe& operator=(AttachedProbe&& other) noexcept;
  AttachedProbe(const AttachedProbe&) = delete;
  AttachedProbe& operator=(const AttachedProbe&) = delete;

  bool valid() const { return link_ != nullptr; }
  bpf_link* get() const { return link_; }

 private:
  bpf_link* link_ = nullptr;
};

}  // namespace ncclscope::ebpf
