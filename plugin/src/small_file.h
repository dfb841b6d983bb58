#pragma once

// Reading a small file whole into a caller's buffer, for the plugin's few cold-path reads
// (/proc/cpuinfo's first processor, the governor's test spin file): no allocation, reads retried
// on EINTR, at most `capacity` bytes (the rest is not read).

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>

#include "platform/fd_io.h"

namespace ncclscope::plugin {

// The bytes read into `text` (0 at end of file or on a read error), or -1 when `path` cannot be
// opened. `open_flags` are added to O_RDONLY | O_CLOEXEC.
inline long ReadSmallFile(const char* path, char* text, std::size_t capacity, int open_flags = 0) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | open_flags);
  if (fd < 0) return -1;
  const std::size_t got = platform::ReadUpTo(fd, text, capacity);
  ::close(fd);
  return static_cast<long>(got);
}

}  // namespace ncclscope::plugin
