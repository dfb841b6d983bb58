#pragma once

// What the agent can find out about an NCCL process's use of the profiler plugin without trusting
// the pod (coverage.h turns it into a reason): which libnccl it maps and the version that file
// carries (elf/nccl_version.h), whether the ncclscope plugin is mapped, and what the process's
// NCCL_PROFILER_PLUGIN asks for. Read by the eBPF source's worker, never at scrape time:
//  - the environment once per process (/proc/<pid>/environ is fixed at exec);
//  - the maps at first sight, and again while the process holds no ring, at growing intervals
//    (2 s doubling to 64 s): NCCL loads the plugin at its first communicator init, after the
//    process started and possibly after it was first seen calling NCCL (ncclGetUniqueId);
//  - the version once per library file (dev, inode): every rank of a pod maps the same file.
// Every read is bounded; a process that vanished is forgotten, other failures are counted.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "agent/core/source.h"
#include "agent/ebpf/attach/registry.h"
#include "agent/ebpf/elf/nccl_version.h"
#include "agent/ebpf/proc/maps.h"

namespace ncclscope::ebpf {

// What NCCL_PROFILER_PLUGIN in the process's initial environment asks NCCL to load. Blind to what
// the process sets later (os.environ in Python before NCCL's init) and to nccl.conf files, which
// NCCL copies into its own environment at init (src/misc/param.cc:27-69 at v2.28.9-1).
enum class PluginRequest {
  kUnknown,       // environ unreadable (or cut by the read limit before the variable)
  kNotRequested,  // unset, empty or "none" (NCCL's way to turn profiling off)
  kNcclscope,     // contains "ncclscope": a name or a path of this project's plugin
  kOther,         // another profiler plugin
};

// NCCL_PROFILER_PLUGIN's value (nullopt: unset) as a request. "none" is compared without case, as
// NCCL does (src/plugin/profiler.cc:56 at v2.28.9-1).
PluginRequest RequestFromValue(const std::optional<std::string_view>& value);

struct ProcessFacts {
  std::optional<elf::NcclVersion> nccl_version;  // nullopt: not read (no file, no string)
  std::string nccl_library;                      // the first libnccl mapped, as the process sees it
  bool plugin_mapped = false;                    // a libnccl-profiler-ncclscope* file is mapped
  PluginRequest request = PluginRequest::kUnknown;
};

class ProcessFactsReader {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::string proc_root = "/proc";
    std::vector<std::string> nccl_libraries = {R"(^libnccl\.so)"};  // as ebpf.nccl.libraries
    std::size_t max_maps_bytes = std::size_t{16} << 20;
    // Environments are a few KiB; the kernel allows up to a quarter of the stack limit (2 MiB
    // with the usual 8 MiB). A variable beyond this is unknown, not unset.
    std::size_t max_environ_bytes = std::size_t{1} << 20;
    std::size_t max_library_files = 1024;  // versions cached, one per distinct file
    elf::VersionLimits version_limits;
  };

  // `errors` (may be null): failed reads by kind (environ_read, maps_read, nccl_version_read).
  ProcessFactsReader(Options options, ErrorCounters* errors);

  // The facts of `process`, read as the header says; `covered`: it holds a ring now (its maps
  // are then not read again). nullopt when the process is gone (or its pid was reused).
  std::optional<ProcessFacts> Get(const ProcessKey& process, bool covered, Clock::time_point now);

  // Forgets processes not in `live`, and the versions of files none of the rest maps.
  void Retain(const std::set<ProcessKey>& live);

  std::size_t cached_processes() const { return processes_.size(); }
  std::size_t cached_files() const { return versions_.size(); }

 private:
  struct Entry {
    ProcessFacts facts;
    bool environ_read = false;
    std::optional<FileIdentity> nccl_file;
    Clock::time_point next_maps_read{};
    Clock::duration maps_interval{};
  };
  bool ReadEnviron(const ProcessKey& process, Entry& entry);
  bool ReadMaps(const ProcessKey& process, Entry& entry);
  // Reads the version of the file behind `mapping` into versions_ (left out when the file could
  // not be opened, so that a later read of the maps tries again).
  void ReadVersion(pid_t pid, const proc::Mapping& mapping, const FileIdentity& id);
  bool Alive(const ProcessKey& process) const;
  void Count(const char* kind);

  Options options_;
  ErrorCounters* errors_;
  std::vector<std::regex> nccl_patterns_;
  std::map<ProcessKey, Entry> processes_;
  // nullopt: the file was read and carries no version (logged once, not read again).
  std::map<FileIdentity, std::optional<elf::NcclVersion>> versions_;
};

}  // namespace ncclscope::ebpf
