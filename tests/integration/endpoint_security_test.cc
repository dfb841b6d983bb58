// The endpoint as a secured cluster runs it: the real agent with a web-config file in
// exporter-toolkit's format (TLS with client certificates, basic auth), checked with curl and
// scraped by a real Prometheus configured as for any exporter (scheme https, tls_config,
// basic_auth). Certificates come from the openssl command line, made fresh per run.

#include <crypt.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/agent_process.h"
#include "tests/support/prometheus_server.h"

namespace ncclscope::testing {
namespace {

using std::chrono::seconds;

// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA.
struct Pki {
  std::string ca, server_cert, server_key, client_cert, client_key;
};

bool Run(const std::string& command) {
  return std::system((command + " 2>/dev/null").c_str()) == 0;
}

bool MakePki(const TempDir& dir, Pki* pki) {
  const std::string d = dir.path() + "/";
  pki->ca = d + "ca.crt";
  pki->server_cert = d + "server.crt";
  pki->server_key = d + "server.key";
  pki->client_cert = d + "client.crt";
  pki->client_key = d + "client.key";
  const std::string ext = dir.WriteFile("san.ext", "subjectAltName=IP:127.0.0.1\n");
  return Run("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout " + d +
             "ca.key -out " + pki->ca) &&
         Run("openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " + pki->server_key +
             " -out " + d + "server.csr") &&
         Run("openssl x509 -req -in " + d + "server.csr -CA " + pki->ca + " -CAkey " + d +
             "ca.key -CAcreateserial -days 1 -extfile " + ext + " -out " + pki->server_cert) &&
         Run("openssl req -newkey rsa:2048 -nodes -subj /CN=prometheus -keyout " + pki->client_key +
             " -out " + d + "client.csr") &&
         Run("openssl x509 -req -in " + d + "client.csr -CA " + pki->ca + " -CAkey " + d +
             "ca.key -CAcreateserial -days 1 -out " + pki->client_cert);
}

std::string Bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 5, nullptr, 0, salt, sizeof(salt)) == nullptr) return "";
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  return hash != nullptr ? hash : "";
}

TEST(EndpointSecurityTest, TlsClientCertificatesAndBasicAuthAsExportersDoThem) {
  TempDir dir;
  Pki pki;
  if (!MakePki(dir, &pki))
    GTEST_SKIP() << "the openssl command line is needed to make certificates";
  const std::string hash = Bcrypt("scrape-secret");
  ASSERT_FALSE(hash.empty());
  const std::string web = dir.WriteFile(
      "web.yml",
      "tls_server_config:\n  cert_file: " + pki.server_cert + "\n  key_file: " + pki.server_key +
          "\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " + pki.ca +
          "\nbasic_auth_users:\n  prometheus: " + hash + "\n");
  AgentProcess agent("server:\n  web_config_file: " + web + "\n");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  ASSERT_EQ(agent.base_url().rfind("https://127.0.0.1:", 0), 0u) << agent.base_url();
  EXPECT_NE(agent.startup_log().find("(basic auth)"), std::string::npos);

  HttpRequest request;
  request.url = agent.base_url() + "/metrics";
  request.ca_file = pki.ca;
  // Plain HTTP on the TLS port gets nowhere.
  EXPECT_NE(HttpGet("http://" + agent.base_url().substr(8) + "/metrics").status, 200);
  // TLS without a client certificate: refused.
  EXPECT_EQ(Http(request).status, 403);
  request.client_cert_file = pki.client_cert;
  request.client_key_file = pki.client_key;
  // The certificate, no password: 401. Wrong password: 401.
  EXPECT_EQ(Http(request).status, 401);
  request.user = "prometheus";
  request.password = "guess";
  EXPECT_EQ(Http(request).status, 401);
  // Everything right, gzip as Prometheus asks for it.
  request.password = "scrape-secret";
  request.accept_encoding = "gzip";
  const HttpResponse ok = Http(request);
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_EQ(ok.content_encoding, "gzip");
  EXPECT_NE(ok.body.find("ncclscope_build_info{"), std::string::npos);
  // /healthz needs the certificate (it is TLS) but no password: kubelet probes carry none.
  HttpRequest health = request;
  health.url = agent.base_url() + "/healthz";
  health.user.clear();
  EXPECT_EQ(Http(health).status, 200);

  // A real Prometheus, configured as for node_exporter behind the same web config.
  const std::string target = agent.base_url().substr(std::string("https://").size());
  PrometheusServer prometheus(
      NCCLSCOPE_PROMETHEUS, dir,
      PrometheusServer::OneJobConfig(
          target,
          "    scheme: https\n    tls_config:\n      ca_file: " + pki.ca +
              "\n      cert_file: " + pki.client_cert + "\n      key_file: " + pki.client_key +
              "\n    basic_auth:\n      username: prometheus\n      password: scrape-secret\n"));
  ASSERT_TRUE(prometheus.WaitForTargetUp(seconds(60)));
  const HttpResponse build = prometheus.Query("ncclscope_build_info");
  EXPECT_NE(build.body.find("\"version\":\"0."), std::string::npos) << build.body;
}

// A web config the agent cannot honour stops it at start, naming the file, line and key.
TEST(EndpointSecurityTest, AWebConfigItCannotHonourStopsTheAgent) {
  TempDir dir;
  const std::string web = dir.WriteFile(
      "web.yml",
      "tls_server_config:\n  cert: a\n  key: b\n  client_auth_type: RequestClientCert\n");
  AgentProcess agent("server:\n  web_config_file: " + web + "\n");
  EXPECT_FALSE(agent.ok());
  const auto code = agent.process().Wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(agent.startup_log().find(web + ":4: tls_server_config.client_auth_type"),
            std::string::npos)
      << agent.startup_log();
}

}  // namespace
}  // namespace ncclscope::testing
