#include "agent/analytics/size_bucket.h"

namespace ncclscope::analytics {
namespace {

constexpr std::string_view kLabels[kSizeBuckets] = {
    "0-1KiB",    "1KiB-4KiB",  "4KiB-16KiB",  "16KiB-64KiB",  "64KiB-256KiB", "256KiB-1MiB",
    "1MiB-4MiB", "4MiB-16MiB", "16MiB-64MiB", "64MiB-256MiB", "256MiB-1GiB",  "1GiB+"};

}  // namespace

std::uint8_t SizeBucketIndex(std::uint64_t bytes) {
  if (bytes < 1024) return 0;
  // Bucket i >= 1 holds [1 KiB * 4^(i-1), 1 KiB * 4^i): two bits per bucket above bit 10.
  const auto bits = static_cast<unsigned>(63 - __builtin_clzll(bytes));  // floor(log2(bytes))
  const unsigned index = (bits - 10) / 2 + 1;
  return static_cast<std::uint8_t>(index < kSizeBuckets ? index : kSizeBuckets - 1);
}

std::string_view SizeBucketLabel(std::uint8_t index) {
  return kLabels[index < kSizeBuckets ? index : kSizeBuckets - 1];
}

}  // namespace ncclscope::analytics
