#pragma once

#include <string>

namespace ncclscope::testing {

struct HttpResponse {
  long status = 0;   // 0 when the request failed
  std::string body;  // decoded when the server compressed it
  std::string content_type;
  std::string content_encoding;  // as the server sent it ("gzip", or empty)
  std::string error;
};

// A plain GET with libcurl (timeout in milliseconds).
HttpResponse HttpGet(const std::string& url, long timeout_ms = 5000);

// A GET with what a scraper may add: compression, basic auth, TLS with a CA and client cert.
struct HttpRequest {
  std::string url;
  long timeout_ms = 5000;
  std::string accept_encoding;  // e.g. "gzip" (curl then decodes the body)
  std::string user;             // basic auth when set
  std::string password;
  std::string ca_file;  // verify the server against it (https)
  std::string client_cert_file;
  std::string client_key_file;
};
HttpResponse Http(const HttpRequest& request);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& text);

}  // namespace ncclscope::testing
