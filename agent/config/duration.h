#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ncclscope::config {

// A non-negative span of time written the way Prometheus writes them: one or more
// <integer><unit> terms, largest unit first ("250ms", "10s", "1m30s"). Units: ns, us, ms, s, m, h,
// d. A bare number is rejected: "10" could mean seconds or milliseconds, and guessing wrong is
// worse than an error.
class Duration {
 public:
  constexpr Duration() = default;
  constexpr explicit Duration(std::chrono::nanoseconds value) : value_(value) {}

  // Returns nullopt and sets *error (if given) to a human-readable reason when `text` is malformed.
  static std::optional<Duration> Parse(std::string_view text, std::string* error = nullptr);

  // The shortest exact rendering in the same syntax, e.g. "1m30s", "250ms", "0s".
  std::string ToString() const;

  constexpr std::chrono::nanoseconds value() const { return value_; }
  constexpr double seconds() const { return std::chrono::duration<double>(value_).count(); }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend constexpr auto operator<=>(Duration, Duration) = default;

 private:
  std::chrono::nanoseconds value_{0};
};

// Literal helpers for defaults: Seconds(10), Millis(250).
constexpr Duration Seconds(std::int64_t s) { return Duration(std::chrono::seconds(s)); }
constexpr Duration Millis(std::int64_t ms) { return Duration(std::chrono::milliseconds(ms)); }

}  // namespace ncclscope::config
