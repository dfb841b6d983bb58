#pragma once

// fstat() that any glibc since 2.17 can link: glibc exports a function named fstat only since 2.33
// (before, <sys/stat.h> turned it into a call of __fxstat), so a library that must load under an
// older glibc (the plugin: platform/README.md) asks the kernel directly. On the 64-bit Linux ABIs
// the plugin is built for (x86-64, aarch64), the kernel's struct stat is glibc's struct stat.

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ncclscope::platform {

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "FileStatus: check that the kernel's struct stat is glibc's on this architecture"
#endif

// As fstat(2): 0, or -1 with errno.
inline int FileStatus(int fd, struct stat* st) {
  return static_cast<int>(::syscall(SYS_fstat, fd, st));
}

}  // namespace ncclscope::platform
