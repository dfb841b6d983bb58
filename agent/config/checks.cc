#include "agent/config/checks.h"

#include <charconv>
#include <regex>

namespace ncclscope::config::checks {

std::optional<std::string> OneOf::operator()(const std::string& value) const {
  for (const std::string& word : allowed) {
    if (word == value) return std::nullopt;
  }
  return "\"" + value + "\" is not one of " + Describe();
}

std::string OneOf::Describe() const {
  std::string out;
  for (const std::string& word : allowed) {
    if (!out.empty()) out += ", ";
    out += word;
  }
  return out;
}

std::optional<std::string> SubsetOf::operator()(const std::vector<std::string>& value) const {
  for (const std::string& item : value) {
    bool known = false;
    for (const std::string& word : allowed) known |= word == item;
    if (known) continue;
    std::string message = "\"" + item + "\" is not one of the known names (";
    for (std::size_t i = 0; i < allowed.size(); ++i) {
      if (i > 0) message += ", ";
      message += allowed[i];
    }
    return message + ")";
  }
  return std::nullopt;
}

std::optional<std::string> NonEmpty::operator()(const std::string& value) const {
  if (value.empty()) return "must not be empty";
  return std::nullopt;
}

std::optional<std::string> AbsolutePath::operator()(const std::string& value) const {
  if (value.empty() || value[0] != '/') return "\"" + value + "\" is not an absolute path";
  return std::nullopt;
}

std::optional<std::string> OneOfOrAbsolutePath::operator()(const std::string& value) const {
  if (!value.empty() && value[0] == '/') return std::nullopt;
  if (!words(value)) return std::nullopt;
  return "\"" + value + "\" is not one of " + Describe();
}

std::optional<std::string> ListenAddress::operator()(const std::string& value) const {
  const std::size_t colon = value.rfind(':');
  if (colon == std::string::npos) {
    return "\"" + value + "\" is not a listen address (expected " + Describe() + ")";
  }
  const std::string host = value.substr(0, colon);
  const std::string port = value.substr(colon + 1);
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) {
    return "\"" + value + "\": IPv6 hosts must be written in brackets, e.g. [::1]:9824";
  }
  unsigned number = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || number > 65535) {
    return "\"" + value + "\" has no valid port (0-65535)";
  }
  return std::nullopt;
}

std::optional<std::string> UrlPath::operator()(const std::string& value) const {
  if (value.empty() || value[0] != '/') return "\"" + value + "\" must start with /";
  for (char c : value) {
    if (c == ' ' || c == '?' || c == '#') return "\"" + value + "\" is not a plain URL path";
  }
  return std::nullopt;
}

std::optional<std::string> HttpUrlOrEmpty::operator()(const std::string& value) const {
  if (value.empty()) return std::nullopt;
  const std::size_t scheme = value.rfind("http://", 0) == 0    ? 7
                             : value.rfind("https://", 0) == 0 ? 8
                                                               : 0;
  if (scheme == 0 || value.size() == scheme) {
    return "\"" + value + "\" is not an http:// or https:// URL";
  }
  for (char c : value) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '\\') {
      return "\"" + value + "\" has a space, a quote or a control character";
    }
  }
  return std::nullopt;
}

std::optional<std::string> PlainName::operator()(const std::string& value) const {
  for (char c : value) {
    if (static_cast<unsigned char>(c) < ' ' || static_cast<unsigned char>(c) > '~' || c == '"' ||
        c == '\\') {
      return "\"" + value +
             "\" has a quote, a backslash or a character that is not printable ASCII";
    }
  }
  return std::nullopt;
}

std::optional<std::string> RegexList::operator()(const std::vector<std::string>& value) const {
  for (const std::string& pattern : value) {
    try {
      std::regex compiled(pattern);
    } catch (const std::regex_error& e) {
      return "\"" + pattern + "\" is not a valid regular expression: " + e.what();
    }
  }
  return std::nullopt;
}

}  // namespace ncclscope::config::checks
