#pragma once

// Reading a small file whole into a caller's buffer, for the plugin's few cold-path reads
// (/proc/cpuinfo's first processor, the governor's test spin file): no allocation, reads retried
// on EINTR, at most `capacity` bytes (the rest is not read).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace ncclscope::plugin {

// The bytes read into `text` (0 at end of file or on a read error), or -1 when `path` cannot be
// opened. `open_flags` are added to O_RDONLY | O_CLOEXEC.
inline long ReadSmallFile(const char* path, char* text, std::size_t capacity, int open_flags = 0) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | open_flags);
  if (fd < 0) return -1;
  std::size_t got = 0;
  while (got < capacity) {
    const ssize_t n = ::read(fd, text + got, capacity - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return static_cast<long>(got);
}

}  // namespace ncclscope::plugin
