#include "agent/config/duration.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>

namespace ncclscope::config {
namespace {

struct Unit {
  std::string_view suffix;
  std::int64_t nanos;
};

// Largest first: ToString() walks this order, and Parse() requires it.
constexpr std::array<Unit, 7> kUnits = {{
    {"d", 86'400'000'000'000},
    {"h", 3'600'000'000'000},
    {"m", 60'000'000'000},
    {"s", 1'000'000'000},
    {"ms", 1'000'000},
    {"us", 1'000},
    {"ns", 1},
}};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

}  // namespace

std::optional<Duration> Duration::Parse(std::string_view text, std::string* error) {
  const std::string_view example =
      " (expected e.g. 250ms, 10s, 1m30s; units ns, us, ms, s, m, h, d)";
  if (text.empty()) {
    Fail(error, std::string("empty duration") + std::string(example));
    return std::nullopt;
  }
  std::int64_t total = 0;
  std::size_t previous_unit = 0;
  bool first = true;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t digits_begin = pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    if (pos == digits_begin) {
      Fail(error, "malformed duration \"" + std::string(text) + "\"" + std::string(example));
      return std::nullopt;
    }
    std::int64_t number = 0;
    auto [ptr, ec] = std::from_chars(text.data() + digits_begin, text.data() + pos, number);
    if (ec != std::errc() || ptr != text.data() + pos) {
      Fail(error, "duration \"" + std::string(text) + "\" is out of range");
      return std::nullopt;
    }
    const std::size_t unit_begin = pos;
    while (pos < text.size() && !IsDigit(text[pos])) ++pos;
    const std::string_view suffix = text.substr(unit_begin, pos - unit_begin);
    if (suffix.empty()) {
      Fail(error, "duration \"" + std::string(text) + "\" has no unit" + std::string(example));
      return std::nullopt;
    }
    std::size_t unit_index = kUnits.size();
    for (std::size_t i = 0; i < kUnits.size(); ++i) {
      if (kUnits[i].suffix == suffix) unit_index = i;
    }
    if (unit_index == kUnits.size()) {
      Fail(error, "duration \"" + std::string(text) + "\" has unknown unit \"" +
                      std::string(suffix) + "\"" + std::string(example));
      return std::nullopt;
    }
    if (!first && unit_index <= previous_unit) {
      Fail(error,
           "duration \"" + std::string(text) + "\" must list units largest first, once each");
      return std::nullopt;
    }
    const std::int64_t scale = kUnits[unit_index].nanos;
    if (number > (std::numeric_limits<std::int64_t>::max() - total) / scale) {
      Fail(error, "duration \"" + std::string(text) + "\" is out of range");
      return std::nullopt;
    }
    total += number * scale;
    previous_unit = unit_index;
    first = false;
  }
  return Duration(std::chrono::nanoseconds(total));
}

std::string Duration::ToString() const {
  std::int64_t rest = value_.count();
  if (rest == 0) return "0s";
  std::string out;
  for (const Unit& unit : kUnits) {
    if (rest >= unit.nanos) {
      out += std::to_string(rest / unit.nanos);
      out += unit.suffix;
      rest %= unit.nanos;
    }
  }
  return out;
}

}  // namespace ncclscope::config
