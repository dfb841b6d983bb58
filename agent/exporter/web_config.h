#pragma once

// The endpoint's TLS and basic-auth settings, read from a web-config file in the format of the
// Prometheus exporter-toolkit (https://github.com/prometheus/exporter-toolkit,
// docs/web-configuration.md), the file every Prometheus exporter takes with --web.config.file, so
// that one file and one Prometheus scrape config serve node_exporter, dcgm-exporter and ncclscope
// alike:
//
//   tls_server_config:
//     cert_file: /etc/ncclscope/tls/tls.crt
//     key_file: /etc/ncclscope/tls/tls.key
//     client_auth_type: RequireAndVerifyClientCert   # optional, with client_ca_file
//     client_ca_file: /etc/ncclscope/tls/ca.crt
//     min_version: TLS12                             # optional (TLS10..TLS13)
//   http_server_config:
//     headers: {X-Frame-Options: deny}               # optional response headers
//   basic_auth_users:
//     prometheus: $2y$10$...                         # bcrypt hashes only, as exporter-toolkit
//
// What ncclscope does not implement is refused with the file, line and key (cipher_suites,
// curve_preferences, client_allowed_sans, the other client_auth_type values), never ignored:
// a scrape that is less protected than its file says would be worse than an agent that does not
// start. http2 is accepted and has no effect (HTTP/1.1 only).

#include <map>
#include <optional>
#include <string>

namespace ncclscope {

struct WebConfig {
  // TLS when cert_pem is set (the files' contents, read at load).
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;   // client certificates required and verified against it when set
  std::string tls_priorities;  // GnuTLS priority string from min_version/max_version
  std::map<std::string, std::string> headers;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash

  bool tls() const { return !cert_pem.empty(); }
  bool basic_auth() const { return !basic_auth_users.empty(); }
};

// Reads and checks `path`. On error returns nullopt and "<path>:<line>: <key>: <why>".
std::optional<WebConfig> LoadWebConfig(const std::string& path, std::string* error);

// Whether `password` matches the bcrypt `hash` ($2a$/$2b$/$2y$, via libxcrypt's crypt_r).
bool BcryptMatches(const std::string& password, const std::string& hash);

}  // namespace ncclscope
