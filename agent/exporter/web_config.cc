#include "agent/exporter/web_config.h"

#include <crypt.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <fstream>

namespace ncclscope {
namespace {

constexpr std::size_t kMaxFileBytes = 1 << 20;  // certificates and keys are a few KiB

struct LoadError {
  std::string text;
};

[[noreturn]] void Fail(const std::string& path, const YAML::Node& node, const std::string& key,
                       const std::string& why) {
  const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  throw LoadError{path + ":" + std::to_string(line) + ": " + key + ": " + why};
}

std::string Scalar(const std::string& path, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) Fail(path, node, key, "must be a string");
  return node.as<std::string>();
}

std::string ReadFile(const std::string& config_path, const YAML::Node& node, const std::string& key,
                     const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) Fail(config_path, node, key, "cannot read " + file);
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) Fail(config_path, node, key, file + " is over 1 MiB");
  if (text.empty()) Fail(config_path, node, key, file + " is empty");
  return text;
}

// exporter-toolkit's version names, as GnuTLS protocol names.
std::string TlsVersion(const std::string& path, const YAML::Node& node, const std::string& key) {
  const std::string v = Scalar(path, node, key);
  if (v == "TLS10") return "VERS-TLS1.0";
  if (v == "TLS11") return "VERS-TLS1.1";
  if (v == "TLS12") return "VERS-TLS1.2";
  if (v == "TLS13") return "VERS-TLS1.3";
  Fail(path, node, key, "'" + v + "' is not one of TLS10, TLS11, TLS12, TLS13");
}

// "NORMAL" restricted to the versions from min to max (exporter-toolkit's default minimum is
// TLS 1.2).
std::string Priorities(const std::string& min, const std::string& max) {
  static const char* const kOrder[] = {"VERS-TLS1.0", "VERS-TLS1.1", "VERS-TLS1.2", "VERS-TLS1.3"};
  std::string out = "NORMAL:-VERS-ALL";
  bool in_range = false;
  for (const char* v : kOrder) {
    if (v == min) in_range = true;
    if (in_range) out += std::string(":+") + v;
    if (v == max) break;
  }
  return out;
}

void TlsSection(const std::string& path, const YAML::Node& tls, WebConfig& out) {
  if (!tls.IsMap()) Fail(path, tls, "tls_server_config", "must be a mapping");
  std::string cert_file, key_file, client_ca_file, client_auth = "NoClientCert";
  std::string min = "VERS-TLS1.2", max = "VERS-TLS1.3";
  YAML::Node cert_node, key_node, ca_node;
  for (const auto& entry : tls) {
    const std::string key = entry.first.as<std::string>();
    const std::string name = "tls_server_config." + key;
    const YAML::Node& value = entry.second;
    if (key == "cert_file") {
      cert_file = Scalar(path, value, name);
      cert_node = value;
    } else if (key == "key_file") {
      key_file = Scalar(path, value, name);
      key_node = value;
    } else if (key == "cert" || key == "key") {
      (key == "cert" ? out.cert_pem : out.key_pem) = Scalar(path, value, name);
      (key == "cert" ? cert_node : key_node) = value;
    } else if (key == "client_ca_file") {
      client_ca_file = Scalar(path, value, name);
      ca_node = value;
    } else if (key == "client_auth_type") {
      client_auth = Scalar(path, value, name);
      if (client_auth != "NoClientCert" && client_auth != "RequireAndVerifyClientCert") {
        Fail(path, value, name,
             "'" + client_auth + "' is not supported (NoClientCert or RequireAndVerifyClientCert)");
      }
    } else if (key == "min_version") {
      min = TlsVersion(path, value, name);
    } else if (key == "max_version") {
      max = TlsVersion(path, value, name);
    } else if (key == "prefer_server_cipher_suites") {
      // Go-only knob; GnuTLS's NORMAL priorities already prefer the server's order.
    } else {
      Fail(path, entry.first, name, "not supported by ncclscope (remove it or ask for it)");
    }
  }
  if (!cert_file.empty())
    out.cert_pem = ReadFile(path, cert_node, "tls_server_config.cert_file", cert_file);
  if (!key_file.empty())
    out.key_pem = ReadFile(path, key_node, "tls_server_config.key_file", key_file);
  if (out.cert_pem.empty() != out.key_pem.empty()) {
    Fail(path, tls, "tls_server_config", "needs both a certificate and a key");
  }
  if (client_auth == "RequireAndVerifyClientCert") {
    if (client_ca_file.empty()) {
      Fail(path, tls, "tls_server_config.client_ca_file",
           "required with client_auth_type RequireAndVerifyClientCert");
    }
    out.client_ca_pem = ReadFile(path, ca_node, "tls_server_config.client_ca_file", client_ca_file);
  } else if (!client_ca_file.empty()) {
    Fail(path, ca_node, "tls_server_config.client_ca_file",
         "only used with client_auth_type RequireAndVerifyClientCert");
  }
  out.tls_priorities = Priorities(min, max);
}

void HttpSection(const std::string& path, const YAML::Node& http, WebConfig& out) {
  if (!http.IsMap()) Fail(path, http, "http_server_config", "must be a mapping");
  for (const auto& entry : http) {
    const std::string key = entry.first.as<std::string>();
    const std::string name = "http_server_config." + key;
    if (key == "http2") {
      continue;  // HTTP/1.1 only
    }
    if (key != "headers") {
      Fail(path, entry.first, name, "not supported by ncclscope (remove it or ask for it)");
    }
    if (!entry.second.IsMap()) Fail(path, entry.second, name, "must be a mapping");
    for (const auto& header : entry.second) {
      const std::string field = header.first.as<std::string>();
      std::string key_name = name;
      key_name += '.';
      key_name += field;
      const std::string value = Scalar(path, header.second, key_name);
      if (field.empty() || field.find_first_of(" :\r\n") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos) {
        Fail(path, header.first, key_name, "not a valid header");
      }
      out.headers[field] = value;
    }
  }
}

void UsersSection(const std::string& path, const YAML::Node& users, WebConfig& out) {
  if (!users.IsMap()) Fail(path, users, "basic_auth_users", "must be a mapping");
  for (const auto& entry : users) {
    const std::string user = entry.first.as<std::string>();
    const std::string name = "basic_auth_users." + user;
    const std::string hash = Scalar(path, entry.second, name);
    if (user.empty() || user.find(':') != std::string::npos) {
      Fail(path, entry.first, name, "a user name cannot be empty or contain ':'");
    }
    if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' ||
        (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') || hash[3] != '$') {
      Fail(path, entry.second, name,
           "must be a bcrypt hash ($2a$, $2b$ or $2y$), as exporters use");
    }
    out.basic_auth_users[user] = hash;
  }
}

}  // namespace

std::optional<WebConfig> LoadWebConfig(const std::string& path, std::string* error) {
  try {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::BadFile&) {
      *error = path + ": cannot read";
      return std::nullopt;
    } catch (const YAML::Exception& e) {
      *error = path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg;
      return std::nullopt;
    }
    WebConfig out;
    if (root.IsNull()) return out;
    if (!root.IsMap()) Fail(path, root, "(top level)", "must be a mapping");
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (key == "tls_server_config") {
        TlsSection(path, entry.second, out);
      } else if (key == "http_server_config") {
        HttpSection(path, entry.second, out);
      } else if (key == "basic_auth_users") {
        UsersSection(path, entry.second, out);
      } else {
        Fail(path, entry.first, key, "unknown key");
      }
    }
    return out;
  } catch (const LoadError& e) {
    *error = e.text;
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    *error = path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg;
    return std::nullopt;
  }
}

bool BcryptMatches(const std::string& password, const std::string& hash) {
  crypt_data data{};
  const char* result = crypt_r(password.c_str(), hash.c_str(), &data);
  if (result == nullptr || result[0] == '*') return false;  // libxcrypt's failure tokens
  const std::size_t n = std::strlen(result);
  if (n != hash.size()) return false;
  unsigned char diff = 0;  // the same time whatever the first differing byte
  for (std::size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(result[i] ^ hash[i]);
  }
  return diff == 0;
}

}  // namespace ncclscope
