#pragma once

// Validation of one raw ring record. A ring is untrusted input: every record is checked for its
// type and layout, its checksum, the lane position it claims (a stale record from an earlier lap,
// or one torn by a writer that ignored the protocol, fails this) and the range of every field the
// agent uses as an index or label. A record that fails is skipped and counted by reason.

#include <cstdint>
#include <string_view>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::profiler {

enum class CorruptReason {
  kNone = 0,
  kType,          // unknown record type
  kLayout,        // unknown layout version
  kChecksum,      // checksum mismatch
  kPosition,      // position field is not the slot's lane position
  kField,         // a field out of range (enum code, count, string without NUL, ...)
  kContinuation,  // channel records missing or not matching their op
  kCount
};

std::string_view CorruptReasonName(CorruptReason reason);

// A record's verdict and, when it is rejected, the test it failed ("op.algo", "header.checksum"):
// for the log line that names a ring's first rejection of each reason.
struct Rejection {
  CorruptReason reason = CorruptReason::kNone;
  std::string_view check;
};

// Checks `record` (NCCLSCOPE_RECORD_SIZE bytes, already copied out of the ring) read at lane
// position `position`.
Rejection InspectRecord(const unsigned char* record, std::uint64_t position);
CorruptReason ValidateRecord(const unsigned char* record, std::uint64_t position);

// Whether `key` is a count key the plugin can write (ncclscope_count_key(): every field in range).
bool ValidCountKey(std::uint32_t key);

}  // namespace ncclscope::profiler
