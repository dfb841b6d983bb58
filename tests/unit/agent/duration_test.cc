#include "agent/config/duration.h"

#include <gtest/gtest.h>

namespace ncclscope::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(DurationTest, ParsesSingleAndCompoundTerms) {
  EXPECT_EQ(Duration::Parse("250ms")->value(), milliseconds(250));
  EXPECT_EQ(Duration::Parse("10s")->value(), seconds(10));
  EXPECT_EQ(Duration::Parse("1m30s")->value(), seconds(90));
  EXPECT_EQ(Duration::Parse("2h")->value(), seconds(7200));
  EXPECT_EQ(Duration::Parse("1d")->value(), seconds(86400));
  EXPECT_EQ(Duration::Parse("15us")->value(), nanoseconds(15000));
  EXPECT_EQ(Duration::Parse("7ns")->value(), nanoseconds(7));
  EXPECT_EQ(Duration::Parse("0s")->value(), nanoseconds(0));
}

TEST(DurationTest, RejectsMalformedTextWithAReason) {
  struct Case {
    const char* text;
    const char* reason;
  };
  for (const Case& c :
       {Case{"10", "has no unit"}, Case{"", "empty"}, Case{"1x", "unknown unit"},
        Case{"ms", "malformed"}, Case{"-1s", "malformed"}, Case{"1.5s", "unknown unit"},
        Case{"10s1m", "largest first"}, Case{"1s1s", "largest first"},
        Case{"99999999999999999999s", "range"}, Case{"9999999999d", "range"}}) {
    std::string error;
    EXPECT_FALSE(Duration::Parse(c.text, &error).has_value()) << c.text;
    EXPECT_NE(error.find(c.reason), std::string::npos) << c.text << " -> " << error;
  }
}

TEST(DurationTest, ToStringRoundTrips) {
  for (const char* text : {"0s", "250ms", "10s", "1m30s", "1h", "1d2h3m4s5ms6us7ns"}) {
    const auto parsed = Duration::Parse(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(parsed->ToString(), text);
  }
  EXPECT_EQ(Duration(milliseconds(1500)).ToString(), "1s500ms");
}

}  // namespace
}  // namespace ncclscope::config
