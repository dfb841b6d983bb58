#include "agent/core/log.h"

#include <gtest/gtest.h>

namespace ncclscope::log {
namespace {

TEST(LogTest, FormatsLogfmtWithQuotedMessage) {
  EXPECT_EQ(
      FormatLine("2026-11-30T12:00:00.000Z", Level::kWarn, "config", "bad \"value\"\nnext line"),
      "ts=2026-11-30T12:00:00.000Z level=warn component=config "
      "msg=\"bad \\\"value\\\"\\nnext line\"\n");
}

TEST(LogTest, LevelsFilterAndParse) {
  const Level saved = GetLevel();
  SetLevel(Level::kWarn);
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kError));
  SetLevel(saved);
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_FALSE(ParseLevel("verbose"));
  EXPECT_EQ(LevelName(Level::kError), "error");
}

}  // namespace
}  // namespace ncclscope::log
