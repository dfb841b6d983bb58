#include "agent/exporter/web_config.h"

#include <crypt.h>
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace ncclscope {
namespace {

using testing::TempDir;

constexpr const char* kHash = "$2y$10$1oUfbBJ2lS7vF0qKgj6W7uFKChy8bSbk5nHNG/U5S1qsNUkV.0fNS";

TEST(WebConfigTest, ReadsExporterToolkitsFormat) {
  TempDir dir;
  const std::string cert = dir.WriteFile("tls.crt", "-----BEGIN CERTIFICATE-----\nx\n");
  const std::string key = dir.WriteFile("tls.key", "-----BEGIN PRIVATE KEY-----\ny\n");
  const std::string ca = dir.WriteFile("ca.crt", "-----BEGIN CERTIFICATE-----\nz\n");
  const std::string path = dir.WriteFile(
      "web.yml", "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key +
                     "\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " + ca +
                     "\n  min_version: TLS13\nhttp_server_config:\n  http2: true\n  headers:\n"
                     "    Strict-Transport-Security: max-age=31536000\nbasic_auth_users:\n"
                     "  prometheus: " +
                     std::string(kHash) + "\n");
  std::string error;
  const auto web = LoadWebConfig(path, &error);
  ASSERT_TRUE(web.has_value()) << error;
  EXPECT_TRUE(web->tls());
  EXPECT_TRUE(web->basic_auth());
  EXPECT_EQ(web->cert_pem, "-----BEGIN CERTIFICATE-----\nx\n");
  EXPECT_EQ(web->client_ca_pem, "-----BEGIN CERTIFICATE-----\nz\n");
  EXPECT_EQ(web->tls_priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.3");
  EXPECT_EQ(web->headers.at("Strict-Transport-Security"), "max-age=31536000");
  EXPECT_EQ(web->basic_auth_users.at("prometheus"), kHash);
}

TEST(WebConfigTest, AnEmptyFileIsPlainHttp) {
  TempDir dir;
  std::string error;
  const auto web = LoadWebConfig(dir.WriteFile("web.yml", ""), &error);
  ASSERT_TRUE(web.has_value()) << error;
  EXPECT_FALSE(web->tls());
  EXPECT_FALSE(web->basic_auth());
}

// Whatever is not implemented is refused, naming the file, the line and the key.
TEST(WebConfigTest, WhatIsNotImplementedIsAnErrorWithFileLineAndKey) {
  TempDir dir;
  struct Case {
    std::string text;
    std::string want;
  };
  const Case cases[] = {
      {"tls_server_config:\n  cert: a\n  key: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
       ":4: tls_server_config.cipher_suites: not supported"},
      {"tls_server_config:\n  cert: a\n  key: b\n  client_auth_type: RequestClientCert\n",
       ":4: tls_server_config.client_auth_type: 'RequestClientCert' is not supported"},
      {"tls_server_config:\n  cert: a\n  key: b\n  client_auth_type: RequireAndVerifyClientCert\n",
       "tls_server_config.client_ca_file: required"},
      {"tls_server_config:\n  cert_file: /nonexistent/tls.crt\n  key: b\n",
       ":2: tls_server_config.cert_file: cannot read /nonexistent/tls.crt"},
      {"tls_server_config:\n  cert: a\n", "needs both a certificate and a key"},
      {"tls_server_config:\n  cert: a\n  key: b\n  min_version: TLS14\n",
       ":4: tls_server_config.min_version: 'TLS14' is not one of"},
      {"basic_auth_users:\n  alice: plaintext\n",
       ":2: basic_auth_users.alice: must be a bcrypt hash"},
      {"basic_auth: {}\n", ":1: basic_auth: unknown key"},
      {"http_server_config:\n  headers:\n    \"Bad Header\": x\n",
       ":3: http_server_config.headers.Bad Header: not a valid header"},
      {"tls_server_config: [\n", ":"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.WriteFile("web.yml", c.text);
    std::string error;
    EXPECT_FALSE(LoadWebConfig(path, &error).has_value()) << c.text;
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(c.want), std::string::npos) << error << "\nwanted: " << c.want;
  }
  std::string error;
  EXPECT_FALSE(LoadWebConfig(dir.path() + "/missing.yml", &error).has_value());
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

TEST(WebConfigTest, BcryptHashesAreCheckedAsExportersDo) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof(salt)), nullptr);
  crypt_data data{};
  const std::string hash = crypt_r("correct horse", salt, &data);
  EXPECT_TRUE(BcryptMatches("correct horse", hash));
  EXPECT_FALSE(BcryptMatches("correct hors", hash));
  EXPECT_FALSE(BcryptMatches("", hash));
  EXPECT_FALSE(BcryptMatches("correct horse", "not a hash"));
  // $2y$ (htpasswd -B, what exporter-toolkit's docs generate) is the same algorithm.
  std::string y = hash;
  y[2] = 'y';
  EXPECT_TRUE(BcryptMatches("correct horse", y));
}

}  // namespace
}  // namespace ncclscope
