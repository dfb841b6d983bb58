#include "tests/support/http_client.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>

namespace ncclscope::testing {
namespace {

size_t Append(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Keeps the value of a Content-Encoding response header.
size_t Header(char* data, size_t size, size_t count, void* user) {
  const std::string line(data, size * count);
  const std::string name = "content-encoding:";
  if (line.size() > name.size()) {
    std::string head = line.substr(0, name.size());
    for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (head == name) {
      std::string value = line.substr(name.size());
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
      *static_cast<std::string*>(user) = value;
    }
  }
  return size * count;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

HttpResponse HttpGet(const std::string& url, long timeout_ms) {
  HttpRequest request;
  request.url = url;
  request.timeout_ms = timeout_ms;
  return Http(request);
}

HttpResponse Http(const HttpRequest& request) {
  static CurlGlobal global;
  HttpResponse response;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    response.error = "curl_easy_init failed";
    return response;
  }
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, request.timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &Header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response.content_encoding);
  if (!request.accept_encoding.empty()) {
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, request.accept_encoding.c_str());
  }
  if (!request.user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, request.user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, request.password.c_str());
  }
  if (!request.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
  if (!request.client_cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, request.client_cert_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, request.client_key_file.c_str());
  }
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    response.error = curl_easy_strerror(code);
    return response;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  char* type = nullptr;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
  if (type != nullptr) response.content_type = type;
  return response;
}

std::string UrlEncode(const std::string& text) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  char* encoded = curl_easy_escape(curl.get(), text.c_str(), static_cast<int>(text.size()));
  std::string out = encoded != nullptr ? encoded : "";
  curl_free(encoded);
  return out;
}

}  // namespace ncclscope::testing
