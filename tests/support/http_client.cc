#include "tests/support/http_client.h"

#include <curl/curl.h>

#include <memory>

namespace ncclscope::testing {
namespace {

size_t Append(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

HttpResponse HttpGet(const std::string& url, long timeout_ms) {
  static CurlGlobal global;
  HttpResponse response;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    response.error = "curl_easy_init failed";
    return response;
  }
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(curl.get());
  if (code != CURLE_OK) {
    response.error = curl_easy_strerror(code);
    return response;
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &response.status);
  char* type = nullptr;
  curl_easy_getinfo(curl.get(), CURLINFO_CONTENT_TYPE, &type);
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
