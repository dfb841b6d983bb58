#pragma once

// Attaching the probes of one library file. The Attacher interface is the seam between discovery
// (which files, when) and BPF (how): the real one (bpf_attacher.h) resolves symbols with the ELF
// reader and creates uprobe links; tests substitute a recording fake.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/ebpf/functions.h"
#include "agent/ebpf/proc/root_path.h"

namespace ncclscope::ebpf {

// The kernel's identity of a file: device and inode of the *real* file (behind overlayfs), which
// is what uprobes attach to. Two containers sharing an image layer map the same real file.
struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend auto operator<=>(const FileIdentity&, const FileIdentity&) = default;
};

// Whatever keeps one file's probes attached; destroying it detaches them.
class AttachedFile {
 public:
  virtual ~AttachedFile() = default;
  virtual std::size_t probe_count() const = 0;  // links (entry + return per function)
};

class Attacher {
 public:
  virtual ~Attacher() = default;
  // Attaches the `functions` found in `file` (open, regular). Functions missing from the file
  // are skipped (listed in *missing); nullptr with *error when none could be attached.
  virtual std::unique_ptr<AttachedFile> Attach(const proc::OpenedFile& file, Library library,
                                               const std::vector<const ProbedFunction*>& functions,
                                               std::vector<std::string>* missing,
                                               std::string* error) = 0;
};

}  // namespace ncclscope::ebpf
