#pragma once

// Validation rules attached to config fields. A check is a small value type with
//   std::optional<std::string> operator()(const T& value) const;  // the problem, or nothing
//   std::string Describe() const;                                  // for the reference docs
// so the same rule validates input and documents itself in docs/configuration.md.

#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ncclscope::config::checks {

template <typename T>
std::string Show(const T& value) {
  if constexpr (requires { value.ToString(); }) {
    return value.ToString();
  } else {
    std::ostringstream out;
    out << value;
    return out.str();
  }
}

// lo <= value <= hi.
template <typename T>
struct InRange {
  T lo;
  T hi;
  std::optional<std::string> operator()(const T& value) const {
    if (value < lo || value > hi) {
      return "value " + Show(value) + " is out of range (allowed " + Describe() + ")";
    }
    return std::nullopt;
  }
  std::string Describe() const { return Show(lo) + " to " + Show(hi); }
};
template <typename T>
InRange(T, T) -> InRange<T>;

// One of a fixed set of words.
struct OneOf {
  std::vector<std::string> allowed;
  OneOf(std::initializer_list<std::string> words) : allowed(words) {}
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const;
};

struct NonEmpty {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "non-empty"; }
};

struct AbsolutePath {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "absolute path"; }
};

// One of a fixed set of words, or an absolute path.
struct OneOfOrAbsolutePath {
  OneOf words;
  OneOfOrAbsolutePath(std::initializer_list<std::string> allowed) : words(allowed) {}
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return words.Describe() + ", or an absolute path"; }
};

// "HOST:PORT", ":PORT" (all interfaces) or "[IPv6]:PORT"; PORT 0 picks a free port.
struct ListenAddress {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "HOST:PORT, :PORT or [IPv6]:PORT"; }
};

// An HTTP path such as /metrics.
struct UrlPath {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "path starting with /"; }
};

// Empty, or an http:// or https:// URL.
struct HttpUrlOrEmpty {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "empty, or an http:// or https:// URL"; }
};

// A name usable as a label value: printable ASCII, no quotes or backslashes (empty allowed).
struct PlainName {
  std::optional<std::string> operator()(const std::string& value) const;
  std::string Describe() const { return "printable, without quotes or backslashes"; }
};

// Every list item is one of a fixed set of words (no duplicates needed, none checked).
struct SubsetOf {
  std::vector<std::string> allowed;
  // For the reference's Allowed column; lists whose default is not every word name them.
  std::string description = "any of the defaults";
  std::optional<std::string> operator()(const std::vector<std::string>& value) const;
  std::string Describe() const { return description; }
};

// Each list item is a valid ECMAScript regular expression.
struct RegexList {
  std::optional<std::string> operator()(const std::vector<std::string>& value) const;
  std::string Describe() const { return "regular expressions"; }
};

}  // namespace ncclscope::config::checks
