#pragma once

// Per-poll reading of one port: state, phys_state, rate and every counter file discovery listed.
//
// Failure policy (fabric.md 0.4, 0.5, 5.2):
//  - A file failing with ENOENT, EPERM, EACCES, EOPNOTSUPP, EINVAL or EISDIR is remembered and not
//    opened again (until the device is rediscovered after vanishing, or the config is reloaded):
//    on restricted PFs each read is a failing firmware command that writes to dmesg.
//  - Two EINVALs in a row from counters/ on a port that never gave a counters/ value mark the
//    whole group restricted, so a restricted PF costs two failed reads, not twenty.
//  - "N/A (no PMA)" is an absent value for this poll (not remembered: a PMA can come back).
//  - Other errnos (EIO, EAGAIN, ...) are transient: counted, retried next poll.
//  - ENOENT/ENODEV with the port directory gone means the device vanished: the read stops.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rdma/sysfs/attributes.h"
#include "rdma/sysfs/file_reader.h"
#include "rdma/sysfs/layout.h"

namespace ncclscope::rdma::sysfs {

struct PortReading {
  std::optional<IdName> state;
  std::optional<IdName> phys_state;
  std::optional<Rate> rate;
  // One entry per PortLayout::files; nullopt when the file gave no value this poll.
  std::vector<std::optional<std::uint64_t>> values;
  // Files not read this poll by reason: "EINVAL", "ENOENT", ..., "no_pma", "restricted".
  std::map<std::string, std::uint32_t> unreadable;
  bool restricted = false;  // counters/ found restricted (every PMA read fails)
};

// Problems worth a self-metric, by kind ("read": transient errno, "parse": malformed text).
struct ReadProblems {
  std::uint32_t read_errors = 0;
  std::uint32_t parse_errors = 0;
  std::uint32_t files_read = 0;
};

class PortReader {
 public:
  enum class Outcome { kRead, kVanished };

  // Reads the port described by `layout` (which must outlive the call).
  Outcome Read(FileReader& reader, const PortLayout& layout, PortReading* out,
               ReadProblems* problems);

  // Carries remembered failures over from the reader of the same port before a rediscovery.
  void InheritFrom(const PortReader& previous) {
    remembered_ = previous.remembered_;
    restricted_ = previous.restricted_;
    counters_ok_ = previous.counters_ok_;
  }

  bool restricted() const { return restricted_; }

 private:
  enum class FileResult { kValue, kAbsent, kVanished };
  // Reads one file (counter or attribute) applying the failure policy; text in *text.
  FileResult ReadOne(FileReader& reader, const PortLayout& layout, const std::string& key,
                     const std::string& path, std::string* text, PortReading* out,
                     ReadProblems* problems, int* error);

  // Remembered failures: "counters/symbol_error" or "state" -> errno.
  std::unordered_map<std::string, int> remembered_;
  bool restricted_ = false;
  bool counters_ok_ = false;    // some counters/ file gave a value once
  int consecutive_einval_ = 0;  // counters/ EINVALs in a row this poll
};

// Whether an errno is a lasting property of the file (remember it) rather than a transient one.
bool IsLastingError(int error);

}  // namespace ncclscope::rdma::sysfs
