#pragma once

// A fake /proc for the eBPF source's readers, written by tests: <root>/proc/<pid>/{stat, maps,
// environ, root -> <root>/fs}, the maps naming files under fs/ with their real device and inode
// (so opens confined to the process's root find them, as on a host). Everything lives in a
// TempDir.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

class FakeProc {
 public:
  FakeProc();
  std::string proc_root() const { return dir_.path() + "/proc"; }
  // Writes fs/<path> (path absolute, as the processes see it); returns the host path.
  std::string AddFile(const std::string& path, const std::string& content);
  // A process whose maps have one mapping with `perms` per file of `libs` (rewritten when called
  // again: a process that dlopen'ed more).
  void AddProcess(pid_t pid, std::uint64_t start, const std::vector<std::string>& libs,
                  const char* perms = "r-xp");
  // <pid>/environ: `entries` joined by NULs, each NUL-terminated as the kernel shows them.
  void SetEnviron(pid_t pid, const std::vector<std::string>& entries);
  void RemoveProcess(pid_t pid);

 private:
  TempDir dir_;
};

}  // namespace ncclscope::testing
