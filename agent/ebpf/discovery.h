#pragma once

// Finds the processes that map libnccl / libibverbs and keeps the attach registry in step:
//  - a scan of one process reads /proc/<pid>/maps, picks executable mappings whose file name
//    matches a library pattern, names each by its real file (task_vma iterator; the inode in maps
//    as a fallback) and acquires it in the registry (attaching on first sight);
//  - exec events schedule scans at growing delays (NCCL is dlopen'ed late, e.g. by
//    `import torch`); a periodic sweep scans every process as a safety net;
//  - exit events (and the sweep, for missed ones) release everything a process held.
// Driven from one thread (the source's worker); the registry's stats are read concurrently.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "agent/ebpf/attach/registry.h"
#include "ncclscope/bpf_intf.h"

namespace ncclscope::ebpf {

class Discovery {
 public:
  using Clock = std::chrono::steady_clock;
  // Real files behind the executable mappings of a pid, or nullopt (then maps' inode is used).
  using RealFiles = std::function<std::optional<std::vector<ncclscope_vma_record>>(pid_t)>;

  struct Options {
    std::string proc_root = "/proc";
    std::map<Library, std::vector<std::string>> library_patterns;  // regexes on the file name
    std::chrono::milliseconds first_rescan{500};
    int rescans = 4;  // after an exec: first_rescan, x4, x16, ... (500ms, 2s, 8s, 32s)
    std::size_t max_pending = 16384;
    // The agent itself (0: none): never probed. Its own libibverbs use (the fabric source) is
    // not a job's, and probing it would only slow the agent's start and stop.
    pid_t self_pid = 0;
  };

  Discovery(Options options, AttachRegistry* registry, RealFiles real_files);

  // A process exec'd: scan it now and at the rescan delays.
  void OnExec(pid_t pid, std::uint64_t start_ticks, Clock::time_point now);
  // A process exited: release what it held.
  void OnExit(pid_t pid, std::uint64_t start_ticks);
  // Runs the scans that are due.
  void RunDue(Clock::time_point now);
  // Scans every process in proc_root, and forgets tracked processes that are gone.
  void Sweep();
  // Scans one process now. Returns false when it is gone.
  bool Scan(pid_t pid);

  // Processes currently holding at least one library file (attached or not).
  std::set<ProcessKey> tracked() const;
  std::uint64_t scans() const { return scans_; }
  std::uint64_t queue_overflows() const { return queue_overflows_; }

 private:
  struct Held {
    Library library = Library::kNccl;
    FileIdentity id;
  };
  struct Due {
    Clock::time_point when;
    pid_t pid = 0;
    std::uint64_t start_ticks = 0;
    friend bool operator>(const Due& a, const Due& b) { return a.when > b.when; }
  };

  std::optional<Library> Match(const std::string& path) const;
  void Forget(const ProcessKey& process);
  // Scan()'s steps: forget the pid's exited processes; find the library files it maps; acquire
  // each in the registry (by its real file when the kernel says which); keep what it holds now.
  struct Candidate;  // discovery.cc
  void ForgetExited(pid_t pid, const std::optional<std::uint64_t>& start);
  std::vector<Candidate> Candidates(const std::string& maps) const;
  Held Acquire(const ProcessKey& process, const Candidate& candidate,
               const std::optional<std::vector<ncclscope_vma_record>>& real);
  void Hold(const ProcessKey& process, std::vector<Held> now_held);

  Options options_;
  AttachRegistry* registry_;
  RealFiles real_files_;
  std::vector<std::pair<Library, std::regex>> patterns_;
  std::map<ProcessKey, std::vector<Held>> processes_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  std::uint64_t scans_ = 0;
  std::uint64_t queue_overflows_ = 0;
};

}  // namespace ncclscope::ebpf
