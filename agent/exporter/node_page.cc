#include "agent/exporter/node_page.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <string_view>

#include "agent/exporter/node_page_html.h"

namespace ncclscope {
namespace {

std::string AttributeEscaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Base64(const unsigned char* data, std::size_t size) {
  static const char* const kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < size; i += 3) {
    const unsigned n = (unsigned{data[i]} << 16) |
                       (i + 1 < size ? unsigned{data[i + 1]} << 8 : 0u) |
                       (i + 2 < size ? unsigned{data[i + 2]} : 0u);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// CSP source expression for the text between `open` and the next `close` (CSP hashes the element's
// text exactly as written).
std::string HashSource(std::string_view page, std::string_view open, std::string_view close) {
  const std::size_t begin = page.find(open);
  if (begin == std::string_view::npos) return "'none'";
  const std::size_t text = begin + open.size();
  const std::size_t end = page.find(close, text);
  if (end == std::string_view::npos) return "'none'";
  unsigned char digest[32];
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, page.data() + text, end - text, digest) != 0) {
    return "'none'";
  }
  return "'sha256-" + Base64(digest, sizeof(digest)) + "'";
}

}  // namespace

NodePage MakeNodePage(const std::string& metrics_path) {
  NodePage page;
  std::string_view html = kNodePageHtml;
  constexpr std::string_view kPlaceholder = "@METRICS_PATH@";
  const std::size_t at = html.find(kPlaceholder);
  page.html = std::string(html.substr(0, at));
  if (at != std::string_view::npos) {
    page.html += AttributeEscaped(metrics_path);
    page.html += html.substr(at + kPlaceholder.size());
  }
  page.content_security_policy = "default-src 'none'; script-src " +
                                 HashSource(page.html, "<script>", "</script>") + "; style-src " +
                                 HashSource(page.html, "<style>", "</style>") +
                                 "; connect-src 'self'; img-src 'none'; base-uri 'none'; "
                                 "form-action 'none'; frame-ancestors 'none'";
  return page;
}

}  // namespace ncclscope
