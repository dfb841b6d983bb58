#pragma once

// Bounded reads of small sysfs attribute files. Everything under /sys/class/infiniband belongs to
// the kernel and the HCA firmware: a read can fail with any errno (EINVAL on restricted ports,
// ENOENT when the device vanished), return "N/A (no PMA)", or (in a broken or hostile tree) be a
// FIFO or a huge file. A FileReader never blocks, never reads more than a page, and reports errno
// instead of throwing, so one bad file fails alone.
//
// It is an interface so tests can inject the errnos real sysfs produces and plain files cannot
// (EINVAL from a failed firmware command), and record which files were touched.

#include <cstddef>
#include <string>
#include <vector>

namespace ncclscope::rdma::sysfs {

// The most a sysfs attribute can hold (one page); longer content is cut here.
inline constexpr std::size_t kMaxAttributeBytes = 4096;

class FileReader {
 public:
  virtual ~FileReader() = default;

  // Reads up to kMaxAttributeBytes of `path` into *out. Returns 0 or the errno of the failure.
  virtual int Read(const std::string& path, std::string* out) = 0;

  // Names in directory `path` (no "." or ".."), sorted. Returns 0 or errno. Listing a directory
  // touches no attribute: it never reaches the HCA firmware.
  virtual int List(const std::string& path, std::vector<std::string>* names) = 0;

  // Target of symlink `path` (as written in the link). Returns 0 or errno.
  virtual int ReadLink(const std::string& path, std::string* target) = 0;

  // Whether `path` exists (used to tell "file failed" from "device vanished").
  virtual bool Exists(const std::string& path) = 0;
};

// The real thing: open(O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY) + one read() + close().
class PosixFileReader : public FileReader {
 public:
  int Read(const std::string& path, std::string* out) override;
  int List(const std::string& path, std::vector<std::string>* names) override;
  int ReadLink(const std::string& path, std::string* target) override;
  bool Exists(const std::string& path) override;
};

// Short name of an errno for labels and logs: "einval", "enoent", "eperm", ...
std::string ErrnoName(int error);

}  // namespace ncclscope::rdma::sysfs
