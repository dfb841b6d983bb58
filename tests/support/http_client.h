#pragma once

#include <string>

namespace ncclscope::testing {

struct HttpResponse {
  long status = 0;  // 0 when the request failed
  std::string body;
  std::string content_type;
  std::string error;
};

// A plain GET with libcurl (timeout in milliseconds).
HttpResponse HttpGet(const std::string& url, long timeout_ms = 5000);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& text);

}  // namespace ncclscope::testing
