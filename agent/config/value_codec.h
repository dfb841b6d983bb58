#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "agent/config/duration.h"

namespace ncclscope::config {

// How one C++ field type is read from and written to YAML, and what the docs call it.
// Decode() returns false with a message for the user (the caller adds file:line:col and key).
template <typename T, typename Enable = void>
struct ValueCodec;

namespace detail {
bool DecodeInt64(const YAML::Node& node, std::int64_t& out, std::string* error);
bool DecodeUint64(const YAML::Node& node, std::uint64_t& out, std::string* error);
}  // namespace detail

template <>
struct ValueCodec<bool> {
  static constexpr std::string_view kTypeName = "bool";
  static bool Decode(const YAML::Node& node, bool& out, std::string* error);
  static YAML::Node Encode(bool value) { return YAML::Node(value); }
};

template <typename T>
struct ValueCodec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr std::string_view kTypeName = "integer";
  static bool Decode(const YAML::Node& node, T& out, std::string* error) {
    if constexpr (std::is_signed_v<T>) {
      std::int64_t wide = 0;
      if (!detail::DecodeInt64(node, wide, error)) return false;
      if (wide < std::numeric_limits<T>::min() || wide > std::numeric_limits<T>::max()) {
        *error = "integer " + std::to_string(wide) + " does not fit (" +
                 std::to_string(std::numeric_limits<T>::min()) + ".." +
                 std::to_string(std::numeric_limits<T>::max()) + ")";
        return false;
      }
      out = static_cast<T>(wide);
    } else {
      std::uint64_t wide = 0;
      if (!detail::DecodeUint64(node, wide, error)) return false;
      if (wide > std::numeric_limits<T>::max()) {
        *error = "integer " + std::to_string(wide) + " does not fit (0.." +
                 std::to_string(std::numeric_limits<T>::max()) + ")";
        return false;
      }
      out = static_cast<T>(wide);
    }
    return true;
  }
  static YAML::Node Encode(T value) { return YAML::Node(value); }
};

template <>
struct ValueCodec<double> {
  static constexpr std::string_view kTypeName = "number";
  static bool Decode(const YAML::Node& node, double& out, std::string* error);
  // Shortest text that reads back as the same double ("0.1", not "0.10000000000000001").
  static YAML::Node Encode(double value);
};

template <>
struct ValueCodec<std::string> {
  static constexpr std::string_view kTypeName = "string";
  static bool Decode(const YAML::Node& node, std::string& out, std::string* error);
  static YAML::Node Encode(const std::string& value) { return YAML::Node(value); }
};

template <>
struct ValueCodec<Duration> {
  static constexpr std::string_view kTypeName = "duration";
  static bool Decode(const YAML::Node& node, Duration& out, std::string* error);
  static YAML::Node Encode(const Duration& value) { return YAML::Node(value.ToString()); }
};

template <>
struct ValueCodec<std::vector<std::string>> {
  static constexpr std::string_view kTypeName = "list of strings";
  static bool Decode(const YAML::Node& node, std::vector<std::string>& out, std::string* error);
  static YAML::Node Encode(const std::vector<std::string>& value);
};

}  // namespace ncclscope::config
