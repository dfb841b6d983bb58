#pragma once

// Which library files are attached and which processes map each one. A file is attached once,
// system-wide (pid = -1: the kernel also arms processes that map it later), keyed by its real
// identity, and detached when the last process mapping it is gone. Files that could not be
// attached are remembered the same way, so sweeps do not retry them over and over.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/ebpf/attach/attacher.h"

namespace ncclscope::ebpf {

// A process by pid and start time (clock ticks since boot), so a reused pid is a new process.
struct ProcessKey {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend auto operator<=>(const ProcessKey&, const ProcessKey&) = default;
};

class AttachRegistry {
 public:
  enum class Outcome { kAttached, kAlreadyAttached, kFailed, kAlreadyFailed };
  using Opener = std::function<proc::OpenedFile(std::string* error)>;

  struct Stats {
    std::size_t files[kLibraryCount] = {};
    std::size_t probes[kLibraryCount] = {};
    std::size_t processes[kLibraryCount] = {};
    std::uint64_t failures[kLibraryCount] = {};
  };

  AttachRegistry(Attacher* attacher, std::map<Library, std::vector<const ProbedFunction*>> wanted);
  ~AttachRegistry();

  // Records that `process` maps file `id` of `library`; attaches it first if needed, opening it
  // with `open`. *error says why when the result is kFailed.
  // `path` names the file in logs.
  Outcome Acquire(const FileIdentity& id, Library library, const std::string& path,
                  const ProcessKey& process, const Opener& open, std::string* error);
  // `process` no longer maps `id` (or is gone): the file is detached when nobody maps it.
  void Release(const FileIdentity& id, const ProcessKey& process);

  Stats stats() const;

 private:
  struct Entry {
    Library library;
    std::string path;
    std::unique_ptr<AttachedFile> attached;  // null: attaching failed
    std::set<ProcessKey> users;
  };

  Attacher* attacher_;
  const std::map<Library, std::vector<const ProbedFunction*>> wanted_;
  mutable std::mutex mutex_;
  std::map<FileIdentity, Entry> entries_;
  std::uint64_t failures_[kLibraryCount] = {};
};

}  // namespace ncclscope::ebpf
