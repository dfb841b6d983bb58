#include "rdma/sysfs/file_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "platform/fd_io.h"

namespace ncclscope::rdma::sysfs {
namespace {

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

constexpr std::size_t kMaxCachedDirectories = 4096;
constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

// Reads up to a page from `fd` at offset 0 (pread), or with read() for non-seekable files.
ssize_t ReadPage(int fd, char* buffer, std::size_t size, bool seekable) {
  return seekable ? platform::PreadRetrying(fd, buffer, size, 0)
                  : platform::ReadRetrying(fd, buffer, size);
}

std::size_t SoftOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  return limit.rlim_cur == RLIM_INFINITY ? 1u << 20 : static_cast<std::size_t>(limit.rlim_cur);
}

}  // namespace

std::size_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, 65536);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    limit.rlim_cur = wanted;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  return SoftOpenFileLimit();
}

PosixFileReader::~PosixFileReader() { Forget(); }

void PosixFileReader::Forget() {
  for (const auto& [path, fd] : files_) close(fd);
  files_.clear();
  for (const auto& [dir, fd] : directories_) close(fd);
  directories_.clear();
}

void PosixFileReader::Drop(std::string_view dir) {
  auto it = directories_.find(dir);
  if (it == directories_.end()) return;
  close(it->second);
  directories_.erase(it);
}

int PosixFileReader::DirectoryFd(std::string_view dir) {
  if (auto it = directories_.find(dir); it != directories_.end()) return it->second;
  if (directories_.size() >= kMaxCachedDirectories) Forget();
  std::string key(dir);
  const int fd = open(key.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  directories_.emplace(std::move(key), fd);
  return fd;
}

int PosixFileReader::OpenFresh(const std::string& path) {
  // O_NONBLOCK: a FIFO planted in the tree must not hang the poller; sysfs ignores the flag.
  const std::size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string_view dir(path.data(), slash);
    const int dir_fd = DirectoryFd(dir);
    if (dir_fd >= 0) {
      const int fd = openat(dir_fd, path.c_str() + slash + 1, kOpenFlags);
      if (fd >= 0) return fd;
      // The directory may be gone or re-created: forget it and let the full path decide.
      Drop(dir);
    }
  }
  return open(path.c_str(), kOpenFlags);
}

int PosixFileReader::Read(const std::string& path, std::string* out) {
  std::array<char, kMaxAttributeBytes> buffer{};
  if (auto it = files_.find(path); it != files_.end()) {
    const ssize_t n = ReadPage(it->second, buffer.data(), buffer.size(), true);
    if (n >= 0) {
      out->assign(buffer.data(), static_cast<std::size_t>(n));
      return 0;
    }
    const int error = errno;
    close(it->second);
    files_.erase(it);
    // A failing attribute (EINVAL, EIO) fails as it is; a removed one is looked up again.
    if (error != ENODEV && error != ENOENT && error != ESTALE) return error;
  }
  const int fd = OpenFresh(path);
  if (fd < 0) return errno;
  if (file_budget_ == 0) file_budget_ = std::min(kMaxOpenFiles, SoftOpenFileLimit() / 2);
  // Only regular files are kept (and read with pread); past the budget, plain read() and close.
  struct stat st {};
  const bool keep = files_.size() < file_budget_ && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const ssize_t n = ReadPage(fd, buffer.data(), buffer.size(), keep);
  const int saved = n < 0 ? errno : 0;
  if (n >= 0 && keep) {
    files_.emplace(path, fd);
  } else {
    close(fd);
  }
  if (n < 0) return saved;
  out->assign(buffer.data(), static_cast<std::size_t>(n));
  return 0;
}

int PosixFileReader::List(const std::string& path, std::vector<std::string>* names) {
  names->clear();
  std::unique_ptr<DIR, DirCloser> dir(opendir(path.c_str()));
  if (!dir) return errno;
  errno = 0;
  while (const dirent* entry = readdir(dir.get())) {  // NOLINT(concurrency-mt-unsafe): own DIR*
    const char* name = entry->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    names->emplace_back(name);
  }
  if (errno != 0) return errno;
  std::sort(names->begin(), names->end());
  return 0;
}

int PosixFileReader::ReadLink(const std::string& path, std::string* target) {
  std::array<char, 4096> buffer{};
  const ssize_t n = readlink(path.c_str(), buffer.data(), buffer.size());
  if (n < 0) return errno;
  if (static_cast<std::size_t>(n) >= buffer.size()) return ENAMETOOLONG;
  target->assign(buffer.data(), static_cast<std::size_t>(n));
  return 0;
}

bool PosixFileReader::Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace ncclscope::rdma::sysfs
