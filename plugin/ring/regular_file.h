#pragma once

// Opening a file that another process (a pod) may have planted, without letting it choose what we
// open: the name is first opened O_PATH | O_NOFOLLOW (no open() of a FIFO, which would block, or of
// a device node, whose driver would run; no symlink followed), checked with fstat to be a regular
// file, and only then reopened for reading or writing through /proc/self/fd, which reaches exactly
// that inode whatever the name points to by then. Shared by the agent (rings, the controls file)
// and the plugin (the controls file); header-only so the plugin's .so needs nothing more.

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "platform/file_status.h"

namespace ncclscope::ring {

// Opens `name` (relative to the directory `dirfd`, or a path with AT_FDCWD) with `flags`
// (O_RDONLY, O_RDWR, ...; O_NONBLOCK, O_NOCTTY and O_CLOEXEC are always added) only
// when it is a regular file. Returns the descriptor and fills *st, or -1 with errno: ELOOP for a
// symlink, EINVAL for anything but a regular file, or the open's own error.
inline int OpenRegularFile(int dirfd, const char* name, int flags, struct stat* st) {
  const int path_fd = ::openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return -1;
  struct stat path_st {};
  if (platform::FileStatus(path_fd, &path_st) != 0) {
    const int saved = errno;
    ::close(path_fd);
    errno = saved;
    return -1;
  }
  if (S_ISLNK(path_st.st_mode) || !S_ISREG(path_st.st_mode)) {
    ::close(path_fd);
    errno = S_ISLNK(path_st.st_mode) ? ELOOP : EINVAL;
    return -1;
  }
  const int open_flags = flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  char self[48];
  std::snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
  // The magic link leads to the O_PATH descriptor's own inode (it is followed, so no O_NOFOLLOW).
  int fd = ::open(self, open_flags);
  if (fd < 0 && errno == ENOENT) {
    // No /proc in this mount namespace: open the name itself, not following a symlink, and make
    // sure below that it is the inode we checked.
    fd = ::openat(dirfd, name, open_flags | O_NOFOLLOW);
  }
  const int saved = errno;
  ::close(path_fd);
  if (fd < 0) {
    errno = saved;
    return -1;
  }
  if (platform::FileStatus(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_ino != path_st.st_ino ||
      st->st_dev != path_st.st_dev) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

}  // namespace ncclscope::ring
