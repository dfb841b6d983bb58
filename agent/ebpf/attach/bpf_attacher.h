#pragma once

#include "agent/ebpf/attach/attacher.h"

struct bpf_program;

namespace ncclscope::ebpf {

// Attaches the shared entry/return programs to each function of a file: offsets from the bounded
// ELF reader (libbpf 1.1 cannot pick default symbol versions), pid = -1, the function's op as the
// bpf_cookie, through /proc/self/fd/<fd> so the kernel attaches to exactly the file that was
// parsed (even when it lives in another mount namespace).
class BpfAttacher : public Attacher {
 public:
  BpfAttacher(bpf_program* entry, bpf_program* ret) : entry_(entry), return_(ret) {}

  std::unique_ptr<AttachedFile> Attach(const proc::OpenedFile& file, Library library,
                                       const std::vector<const ProbedFunction*>& functions,
                                       std::vector<std::string>* missing,
                                       std::string* error) override;

 private:
  bpf_program* entry_;
  bpf_program* return_;
};

}  // namespace ncclscope::ebpf
