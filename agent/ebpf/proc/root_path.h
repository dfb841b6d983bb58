#pragma once

// Opening a file that another process maps, as that process sees it, without letting the path
// (chosen by that process) lead the agent anywhere else.

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "agent/ebpf/proc/maps.h"
#include "agent/ebpf/proc/unique_fd.h"

namespace ncclscope::ebpf::proc {

struct OpenedFile {
  UniqueFd fd;
  struct stat st {};
};

// Opens `path` (absolute, as seen in the mount namespace whose root is the directory `root`,
// e.g. /proc/<pid>/root) read-only with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): ".."
// and absolute symlinks resolve inside `root`, /proc magic links are refused. Only regular files
// are returned. On failure returns an invalid fd and sets *error.
OpenedFile OpenInRoot(const std::string& root, const std::string& path, std::string* error);

// Opens the exact file behind one mapping of process `pid` through
// <proc_root>/<pid>/map_files/<start>-<end>: right even when the file was deleted or replaced
// on disk since it was mapped (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
OpenedFile OpenMappedFile(const std::string& proc_root, pid_t pid, std::uint64_t start,
                          std::uint64_t end, std::string* error);

// Opens the file behind mapping `m` of process `pid`: its path as the process sees it, confined to
// <proc_root>/<pid>/root, when that is still the mapped file (device and inode match: the file may
// have been replaced on disk); else the mapping itself through map_files.
OpenedFile OpenMapping(const std::string& proc_root, pid_t pid, const Mapping& m,
                       std::string* error);

}  // namespace ncclscope::ebpf::proc
