#include "agent/config/value_codec.h"

#include <charconv>
#include <cmath>
#include <type_traits>

namespace ncclscope::config {
namespace {

// Scalars only: a mapping or list where a single value belongs is the most common YAML slip.
bool RequireScalar(const YAML::Node& node, std::string_view expected, std::string* error) {
  if (node.IsScalar()) return true;
  const char* got = node.IsMap() ? "a mapping" : node.IsSequence() ? "a list" : "no value";
  *error = "expected " + std::string(expected) + ", got " + got;
  return false;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// A whole scalar as a T, `what` naming it in errors. A minus sign is refused for unsigned T
// (from_chars would too, but as "not a number" rather than "negative").
template <typename T>
bool DecodeInteger(const YAML::Node& node, std::string_view what, T& out, std::string* error) {
  if (!RequireScalar(node, what, error)) return false;
  const std::string& text = node.Scalar();
  const std::string expected = "expected " + std::string(what) + ", got " + Quote(text);
  if (std::is_unsigned_v<T> && !text.empty() && text[0] == '-') {
    *error = expected;
    return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) {
    *error = "integer " + Quote(text) + " is out of range";
    return false;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    *error = expected;
    return false;
  }
  return true;
}

}  // namespace

namespace detail {

bool DecodeInt64(const YAML::Node& node, std::int64_t& out, std::string* error) {
  return DecodeInteger(node, "an integer", out, error);
}

bool DecodeUint64(const YAML::Node& node, std::uint64_t& out, std::string* error) {
  return DecodeInteger(node, "a non-negative integer", out, error);
}

}  // namespace detail

bool ValueCodec<bool>::Decode(const YAML::Node& node, bool& out, std::string* error) {
  if (!RequireScalar(node, "true or false", error)) return false;
  const std::string& text = node.Scalar();
  if (text == "true") {
    out = true;
  } else if (text == "false") {
    out = false;
  } else {
    // YAML 1.1's yes/no/on/off are deliberately refused: they surprise people ("NO" for Norway).
    *error = "expected true or false, got " + Quote(text);
    return false;
  }
  return true;
}

YAML::Node ValueCodec<double>::Encode(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return YAML::Node(std::string(text, result.ptr));
}

bool ValueCodec<double>::Decode(const YAML::Node& node, double& out, std::string* error) {
  if (!RequireScalar(node, "a number", error)) return false;
  const std::string& text = node.Scalar();
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(out)) {
    *error = "expected a number, got " + Quote(text);
    return false;
  }
  return true;
}

bool ValueCodec<std::string>::Decode(const YAML::Node& node, std::string& out, std::string* error) {
  if (!RequireScalar(node, "a string", error)) return false;
  out = node.Scalar();
  return true;
}

bool ValueCodec<Duration>::Decode(const YAML::Node& node, Duration& out, std::string* error) {
  if (!RequireScalar(node, "a duration such as 10s", error)) return false;
  std::optional<Duration> parsed = Duration::Parse(node.Scalar(), error);
  if (!parsed) return false;
  out = *parsed;
  return true;
}

bool ValueCodec<std::vector<std::string>>::Decode(const YAML::Node& node,
                                                  std::vector<std::string>& out,
                                                  std::string* error) {
  if (!node.IsSequence()) {
    *error = node.IsMap() ? "expected a list, got a mapping" : "expected a list such as [a, b]";
    return false;
  }
  std::vector<std::string> values;
  for (std::size_t i = 0; i < node.size(); ++i) {
    std::string item;
    std::string item_error;
    if (!ValueCodec<std::string>::Decode(node[i], item, &item_error)) {
      *error = "item " + std::to_string(i) + ": " + item_error;
      return false;
    }
    values.push_back(std::move(item));
  }
  out = std::move(values);
  return true;
}

YAML::Node ValueCodec<std::vector<std::string>>::Encode(const std::vector<std::string>& value) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const std::string& item : value) node.push_back(item);
  return node;
}

}  // namespace ncclscope::config
