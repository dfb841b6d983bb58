#pragma once

// /proc/<pid>/maps and /proc/<pid>/stat, parsed defensively: both are written by the kernel, but
// the paths in maps are chosen by the process (any bytes but newline, possibly " (deleted)").

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclscope::ebpf::proc {

struct Mapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  bool executable = false;
  std::uint64_t offset = 0;  // file offset of `start`
  std::uint32_t dev_major = 0;
  std::uint32_t dev_minor = 0;
  std::uint64_t inode = 0;
  std::string path;      // as the process sees it, " (deleted)" removed
  bool deleted = false;  // the file was unlinked or replaced since it was mapped
};

// Parses maps text; malformed lines are skipped (and counted in *bad_lines when given). At most
// `max_lines` lines are read.
std::vector<Mapping> ParseMaps(std::string_view text, std::size_t* bad_lines = nullptr,
                               std::size_t max_lines = 1'000'000);

// Process start time in clock ticks since boot (field 22 of /proc/<pid>/stat), parsed after the
// last ')' so a command name with spaces or parentheses cannot shift the fields.
std::optional<std::uint64_t> ParseStartTicks(std::string_view stat_text);

// Reads a small /proc file (at most `limit` bytes). nullopt when it cannot be opened or read.
std::optional<std::string> ReadProcFile(const std::string& path, std::size_t limit = 64 << 20);

// The process's start time from <proc_root>/<pid>/stat, or nullopt when the process is gone.
std::optional<std::uint64_t> StartTicks(const std::string& proc_root, pid_t pid);

// This process's pid as <proc_root> numbers it (the target of <proc_root>/self), or nullopt
// when that procfs does not show this process (e.g. a fixture tree).
std::optional<pid_t> SelfPid(const std::string& proc_root);

// Numeric entries of <proc_root> (every process, not threads).
std::vector<pid_t> ListPids(const std::string& proc_root);

}  // namespace ncclscope::ebpf::proc
