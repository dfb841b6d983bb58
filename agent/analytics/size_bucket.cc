#include "agent/analytics/size_bucket.h"

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::analytics {
namespace {

constexpr std::string_view kLabels[kSizeBuckets] = {
    "0-1KiB",    "1KiB-4KiB",  "4KiB-16KiB",  "16KiB-64KiB",  "64KiB-256KiB", "256KiB-1MiB",
    "1MiB-4MiB", "4MiB-16MiB", "16MiB-64MiB", "64MiB-256MiB", "256MiB-1GiB",  "1GiB+"};

}  // namespace

// One definition with the plugin's exact counts (their keys carry it): ncclscope_ring.h.
std::uint8_t SizeBucketIndex(std::uint64_t bytes) {
  static_assert(kSizeBuckets == 12, "ncclscope_size_class() has 12 classes");
  return static_cast<std::uint8_t>(ncclscope_size_class(bytes));
}

std::string_view SizeBucketLabel(std::uint8_t index) {
  // A function's overflow count key (its communicator rank ran out of count keys).
  if (index == NCCLSCOPE_SIZE_CLASS_OVERFLOW) return "other";
  return kLabels[index < kSizeBuckets ? index : kSizeBuckets - 1];
}

}  // namespace ncclscope::analytics
