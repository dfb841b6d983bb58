#include "agent/config/config.h"

#include <gtest/gtest.h>

#include <functional>

#include "tests/support/temp_dir.h"

namespace ncclscope::config {
namespace {

// The single error of loading `yaml`, as printed.
std::string OnlyError(const std::string& yaml) {
  LoadResult result = LoadString(yaml, "test.yaml");
  EXPECT_EQ(result.errors.size(), 1u) << yaml;
  return result.errors.empty() ? "" : result.errors.front().ToString();
}

TEST(ConfigTest, EmptyDocumentMeansDefaults) {
  LoadResult result = LoadString("", "empty.yaml");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config.server.listen_address, ":9824");
  EXPECT_EQ(result.config.rdma.interval, Seconds(10));
  EXPECT_TRUE(LoadString("# only a comment\n", "c.yaml").ok());
}

TEST(ConfigTest, ReadsEveryKindOfValue) {
  LoadResult result = LoadString(
      "server:\n  listen_address: 127.0.0.1:9000\n"
      "log: {level: debug}\n"
      "plugin:\n  enabled: false\n  ring_dir: /tmp/rings\n"
      "rdma:\n  interval: 1m30s\n"
      "nvlink:\n",  // a section with no value keeps its defaults
      "ok.yaml");
  ASSERT_TRUE(result.ok()) << result.errors.front().ToString();
  EXPECT_EQ(result.config.server.listen_address, "127.0.0.1:9000");
  EXPECT_EQ(result.config.log.level, "debug");
  EXPECT_FALSE(result.config.plugin.enabled);
  EXPECT_EQ(result.config.plugin.ring_dir, "/tmp/rings");
  EXPECT_EQ(result.config.rdma.interval, Seconds(90));
  EXPECT_TRUE(result.config.nvlink.enabled);
}

TEST(ConfigTest, UnknownKeyNamesLineColumnAndPathWithSuggestion) {
  EXPECT_EQ(OnlyError("rdma:\n  enabled: true\n  intervall: 5s\n"),
            "test.yaml:3:3: rdma.intervall: unknown key (did you mean \"interval\"?)");
  EXPECT_EQ(OnlyError("bogus: 1\n"), "test.yaml:1:1: bogus: unknown key");
}

TEST(ConfigTest, WrongTypesAreErrors) {
  EXPECT_EQ(OnlyError("plugin:\n  enabled: yes\n"),
            "test.yaml:2:12: plugin.enabled: expected true or false, got \"yes\"");
  EXPECT_EQ(OnlyError("server:\n  listen_address: [a, b]\n"),
            "test.yaml:2:19: server.listen_address: expected a string, got a list");
  EXPECT_EQ(OnlyError("log: debug\n"), "test.yaml:1:6: log: expected a mapping of keys");
  EXPECT_EQ(OnlyError("- a\n- b\n"), "test.yaml:1:1: expected a mapping of keys at the top level");
}

TEST(ConfigTest, OutOfRangeAndMalformedDurations) {
  EXPECT_EQ(OnlyError("rdma:\n  interval: 10ms\n"),
            "test.yaml:2:13: rdma.interval: value 10ms is out of range (allowed 100ms to 1h)");
  const std::string malformed = OnlyError("rdma:\n  interval: 10\n");
  EXPECT_EQ(malformed.rfind("test.yaml:2:13: rdma.interval: duration \"10\" has no unit", 0), 0u)
      << malformed;
  EXPECT_NE(OnlyError("detection:\n  hang_timeout: 1x\n").find("unknown unit"), std::string::npos);
}

TEST(ConfigTest, ValidatorsRejectBadStrings) {
  EXPECT_EQ(OnlyError("log:\n  level: verbose\n"),
            "test.yaml:2:10: log.level: \"verbose\" is not one of debug, info, warn, error");
  EXPECT_EQ(OnlyError("plugin:\n  ring_dir: relative/dir\n"),
            "test.yaml:2:13: plugin.ring_dir: \"relative/dir\" is not an absolute path");
  EXPECT_NE(OnlyError("server:\n  listen_address: 9824\n").find("not a listen address"),
            std::string::npos);
  EXPECT_NE(OnlyError("server:\n  listen_address: ':70000'\n").find("no valid port"),
            std::string::npos);
  EXPECT_EQ(OnlyError("node_page:\n  prometheus_url: prometheus:9090\n"),
            "test.yaml:2:19: node_page.prometheus_url: \"prometheus:9090\" is not an http:// or "
            "https:// URL");
  EXPECT_NE(OnlyError("node_page:\n  prometheus_url: 'https://'\n").find("not an http"),
            std::string::npos);
  EXPECT_NE(OnlyError("node_page:\n  node: 'a\"b'\n").find("quote"), std::string::npos);
  EXPECT_TRUE(LoadString("node_page:\n  prometheus_url: http://p:9090\n", "t").ok());
}

// server.healthz_requires takes source names only; a typo names file, line, key and the names.
TEST(ConfigTest, HealthzRequiresTakesSourceNames) {
  LoadResult result = LoadString("server:\n  healthz_requires: [ebpf, rdma]\n", "test.yaml");
  ASSERT_TRUE(result.ok()) << result.errors.front().ToString();
  EXPECT_EQ(result.config.server.healthz_requires, (std::vector<std::string>{"ebpf", "rdma"}));
  EXPECT_TRUE(Config{}.server.healthz_requires.empty());
  EXPECT_EQ(OnlyError("server:\n  healthz_requires: [plugin]\n"),
            "test.yaml:2:21: server.healthz_requires: \"plugin\" is not one of the known names "
            "(profiler, ebpf, rdma, nvlink)");
}

TEST(ConfigTest, DuplicateKeysAreErrors) {
  EXPECT_EQ(OnlyError("log:\n  level: info\n  level: debug\n"),
            "test.yaml:3:3: log.level: duplicate key");
}

TEST(ConfigTest, ValueMissingPointsAtTheKey) {
  EXPECT_EQ(OnlyError("log:\n  level:\n"),
            "test.yaml:2:3: log.level: expected a string, got no value");
}

TEST(ConfigTest, AllErrorsAreReportedAtOnce) {
  LoadResult result = LoadString("log:\n  level: loud\nrdma:\n  interval: x\nfoo: 1\n", "m.yaml");
  ASSERT_EQ(result.errors.size(), 3u);
  EXPECT_EQ(result.errors[0].key, "log.level");
  EXPECT_EQ(result.errors[1].key, "rdma.interval");
  EXPECT_EQ(result.errors[2].key, "foo");
}

TEST(ConfigTest, SyntaxErrorsCarryAPosition) {
  const std::string error = OnlyError("log:\n  level: [info\n");
  EXPECT_EQ(error.rfind("test.yaml:", 0), 0u);
  EXPECT_NE(error.find("YAML syntax error"), std::string::npos) << error;
}

TEST(ConfigTest, MissingFileAndDirectoryAreErrors) {
  LoadResult missing = LoadFile("/nonexistent/ncclscope.yaml");
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0].ToString(),
            "/nonexistent/ncclscope.yaml: cannot read: No such file or directory");
  testing::TempDir dir;
  LoadResult directory = LoadFile(dir.path());
  ASSERT_EQ(directory.errors.size(), 1u);
  EXPECT_NE(directory.errors[0].message.find("is a directory"), std::string::npos);
}

TEST(ConfigTest, EffectiveConfigRoundTrips) {
  LoadResult first = LoadString("rdma:\n  interval: 2s\nlog:\n  level: warn\n", "a.yaml");
  ASSERT_TRUE(first.ok());
  const std::string text = ToYaml(first.config);
  LoadResult second = LoadString(text, "b.yaml");
  ASSERT_TRUE(second.ok()) << text;
  EXPECT_EQ(ToYaml(second.config), text);
  EXPECT_NE(text.find("interval: 2s"), std::string::npos) << text;
}

// config/ncclscope.yaml is the commented default config: it must load cleanly and spell out exactly
// the built-in defaults, so reading it tells an operator what the agent does with no file at all.
TEST(ConfigTest, ShippedDefaultConfigEqualsBuiltInDefaults) {
  LoadResult shipped = LoadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/config/ncclscope.yaml");
  ASSERT_TRUE(shipped.ok()) << shipped.errors.front().ToString();
  EXPECT_EQ(ToYaml(shipped.config), ToYaml(Config{}));
  // And it mentions every key, at every depth (rdma.thresholds.*), not only the ones whose
  // defaults happen to match.
  const std::string text =
      testing::ReadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/config/ncclscope.yaml");
  const YAML::Node full = YAML::Load(text);
  Encoder encoder;
  Config defaults;
  defaults.Visit(encoder);
  std::function<void(const YAML::Node&, const YAML::Node&, const std::string&)> check =
      [&](const YAML::Node& schema, const YAML::Node& file, const std::string& path) {
        for (auto it = schema.begin(); it != schema.end(); ++it) {
          const std::string key = it->first.Scalar();
          std::string name = path;
          if (!name.empty()) name += '.';
          name += key;
          const YAML::Node child = file[key];
          EXPECT_TRUE(child.IsDefined()) << name << " missing from config/ncclscope.yaml";
          if (child.IsDefined() && it->second.IsMap()) check(it->second, child, name);
        }
      };
  check(encoder.node(), full, "");
}

// docs/configuration.md embeds the generated reference between markers; regenerate with
// `ncclscope-agent --print-config-reference` (scripts/update-docs does it).
TEST(ConfigTest, DocsReferenceMatchesSchema) {
  const std::string doc =
      testing::ReadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/docs/configuration.md");
  const std::string begin = "<!-- BEGIN GENERATED REFERENCE -->\n";
  const std::string end = "<!-- END GENERATED REFERENCE -->";
  const std::size_t b = doc.find(begin);
  const std::size_t e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), ReferenceMarkdown())
      << "docs/configuration.md is stale: run scripts/update-docs";
}

}  // namespace
}  // namespace ncclscope::config
