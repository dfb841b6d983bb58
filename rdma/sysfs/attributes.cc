#include "rdma/sysfs/attributes.h"

#include <charconv>
#include <cstdlib>

namespace ncclscope::rdma::sysfs {

std::string_view Trim(std::string_view text) {
  const auto is_space = [](char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\0';
  };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::optional<IdName> ParseIdName(std::string_view text) {
  text = Trim(text);
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  IdName result;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + colon, result.id);
  if (ec != std::errc() || ptr != text.data() + colon || result.id < 0) return std::nullopt;
  result.name = std::string(Trim(text.substr(colon + 1)));
  return result;
}

std::optional<Rate> ParseRate(std::string_view text) {
  text = Trim(text);
  // Leading number, possibly with a fraction ("2.5"). from_chars for double is in libstdc++ 11+.
  Rate rate;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, rate.gbps);
  if (ec != std::errc() || rate.gbps < 0) return std::nullopt;
  std::string_view rest = Trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  if (rest.substr(0, 6) != "Gb/sec") return std::nullopt;
  rest = Trim(rest.substr(6));
  if (rest.empty()) return rate;
  if (rest.front() != '(' || rest.back() != ')') return std::nullopt;
  rest = Trim(rest.substr(1, rest.size() - 2));
  const std::size_t x = rest.find('X');
  if (x == std::string_view::npos) return std::nullopt;
  rate.width = std::string(rest.substr(0, x + 1));
  rate.speed = std::string(Trim(rest.substr(x + 1)));
  return rate;
}

CounterText ParseCounter(std::string_view text) {
  text = Trim(text);
  CounterText result;
  if (text.substr(0, 3) == "N/A") {
    result.kind = CounterText::Kind::kNoPma;
    return result;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), result.value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return result;
  result.kind = CounterText::Kind::kValue;
  return result;
}

std::string StateLabel(int state_id) {
  switch (state_id) {
    case 0:
      return "nop";
    case 1:
      return "down";
    case 2:
      return "init";
    case 3:
      return "armed";
    case 4:
      return "active";
    case 5:
      return "active_defer";
    default:
      return "unknown";
  }
}

}  // namespace ncclscope::rdma::sysfs
