#include "agent/app/options.h"

#include <gtest/gtest.h>

#include "agent/app/agent.h"

namespace ncclscope {
namespace {

std::optional<Options> Parse(std::vector<std::string> args, std::string* error) {
  args.insert(args.begin(), "ncclscope-agent");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ParseOptions(static_cast<int>(args.size()), argv.data(), error);
}

TEST(OptionsTest, ParsesBothFlagForms) {
  std::string error;
  auto options = Parse({"--config", "a.yaml", "--web.listen-address=127.0.0.1:1", "--log.level",
                        "debug", "--check-config"},
                       &error);
  ASSERT_TRUE(options) << error;
  EXPECT_EQ(*options->config_file, "a.yaml");
  EXPECT_EQ(*options->listen_address, "127.0.0.1:1");
  EXPECT_EQ(*options->log_level, "debug");
  EXPECT_TRUE(options->check_config);
}

TEST(OptionsTest, RejectsUnknownFlagsAndStrayArguments) {
  std::string error;
  EXPECT_FALSE(Parse({"--nope"}, &error));
  EXPECT_NE(error.find("--nope"), std::string::npos);
  EXPECT_FALSE(Parse({"stray"}, &error));
  EXPECT_NE(error.find("stray"), std::string::npos);
  EXPECT_FALSE(Parse({"--config"}, &error));
}

TEST(OptionsTest, OverridesAreValidatedLikeFileKeys) {
  Options options;
  options.listen_address = "nonsense";
  options.log_level = "loud";
  config::LoadResult result;
  ApplyOverrides(options, result);
  ASSERT_EQ(result.errors.size(), 2u);
  EXPECT_EQ(result.errors[0].file, "--web.listen-address");
  EXPECT_EQ(result.errors[1].file, "--log.level");

  options.listen_address = "127.0.0.1:0";
  options.log_level = "warn";
  config::LoadResult ok;
  ApplyOverrides(options, ok);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.config.server.listen_address, "127.0.0.1:0");
  EXPECT_EQ(ok.config.log.level, "warn");
}

}  // namespace
}  // namespace ncclscope
