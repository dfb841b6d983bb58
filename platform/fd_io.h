#pragma once

// read/pread/write that survive signals. A signal handler installed without SA_RESTART (the
// agent's SIGHUP/SIGTERM handling, a job's own handlers around the plugin) makes a blocking
// call fail with EINTR having done nothing: retry it, as every caller would. Calls that move
// fewer bytes than asked return that count; the *Exactly / *All forms loop until done.

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace ncclscope::platform {

// One read(2), retried on EINTR: bytes read, 0 at end of file, -1 with errno.
inline ssize_t ReadRetrying(int fd, void* out, std::size_t size) {
  ssize_t n = 0;
  do {
    n = ::read(fd, out, size);
  } while (n < 0 && errno == EINTR);
  return n;
}

// One pread(2), retried on EINTR.
inline ssize_t PreadRetrying(int fd, void* out, std::size_t size, std::uint64_t offset) {
  ssize_t n = 0;
  do {
    n = ::pread(fd, out, size, static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  return n;
}

// Reads until `size` bytes, end of file or an error: the bytes read (for the small files read
// whole, where a failed read means "as far as it could be read").
inline std::size_t ReadUpTo(int fd, void* out, std::size_t size) {
  auto* bytes = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ReadRetrying(fd, bytes + done, size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// Exactly `size` bytes at `offset`; false on an error or end of file first (the file shrank).
inline bool PreadExactly(int fd, void* out, std::size_t size, std::uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = PreadRetrying(fd, bytes + done, size - done, offset + done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Writes all `size` bytes; false with errno on an error (a zero-byte write counts as one: ENOSPC).
inline bool WriteAll(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace ncclscope::platform
