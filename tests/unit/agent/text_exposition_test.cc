// The text exposition format as the agent writes it: families whose samples arrive in any order
// (metric_family.h), escaping and number spelling as the format wants, histograms with cumulative
// buckets (TextWriter::Histogram). The expected text is what prometheus-cpp's TextSerializer wrote
// for the same families when the agent still used it (same lines, same order).

#include "agent/core/text_exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "agent/core/metric_family.h"

namespace ncclscope::metrics {
namespace {

TEST(TextExpositionTest, FamiliesAreWrittenWholeInCreationOrder) {
  constexpr MetricDef kBytes = Counter("test_bytes_total", "bytes", "Bytes, with a \\ backslash.");
  FamilySet families;
  Family& counter = families.Get(kBytes);
  Family& gauge = families.Get(Gauge("test_value", "", "A gauge."));
  families.Get(Gauge("test_unused", "", "Never gets a sample: not written."));
  counter.Add({{"a", "x"}, {"b", "quote \" and \\ and \n"}}, 1234567);
  gauge.Add({}, -3.5e-7);
  counter.Add({{"a", "y"}, {"b", ""}}, 0.25);
  gauge.Add({{"k", "big"}}, 1.5e20);
  EXPECT_EQ(&families.Get(Counter("test_bytes_total", "", "ignored")), &counter)
      << "one family per name";
  EXPECT_EQ(counter.size(), 2u);

  EXPECT_EQ(families.Text(),
            "# HELP test_bytes_total Bytes, with a \\\\ backslash.\n"
            "# TYPE test_bytes_total counter\n"
            "test_bytes_total{a=\"x\",b=\"quote \\\" and \\\\ and \\n\"} 1234567\n"
            "test_bytes_total{a=\"y\",b=\"\"} 0.25\n"
            "# HELP test_value A gauge.\n"
            "# TYPE test_value gauge\n"
            "test_value -3.5e-07\n"
            "test_value{k=\"big\"} 1.5e+20\n");
}

TEST(TextExpositionTest, WriterHistogramIsCumulativeWithPrecomputedBounds) {
  const HistogramBounds bounds({1e-6, 4e-6});
  EXPECT_EQ(bounds.le(0), "le=\"1e-06\"");
  EXPECT_EQ(bounds.le(2), "le=\"+Inf\"");
  std::string text;
  TextWriter writer(text);
  constexpr MetricDef kH = Histogram("h_seconds", "seconds", "H.");
  writer.Header(kH);
  const std::uint64_t counts[] = {2, 0, 5};
  writer.Histogram(kH, "r=\"1\"", bounds, counts, 0.5);
  writer.Sample(Counter("c_total", "", "C."), "", std::uint64_t{18446744073709551615ull});
  EXPECT_EQ(text,
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{r=\"1\",le=\"1e-06\"} 2\n"
            "h_seconds_bucket{r=\"1\",le=\"4e-06\"} 2\n"
            "h_seconds_bucket{r=\"1\",le=\"+Inf\"} 7\n"
            "h_seconds_sum{r=\"1\"} 0.5\n"
            "h_seconds_count{r=\"1\"} 7\n"
            "c_total 18446744073709551615\n");
}

TEST(TextExpositionTest, HelpTextNewlinesAreEscaped) {
  // (prometheus-cpp 1.0.1 writes them raw, which breaks the exposition.)
  std::string text;
  TextWriter(text).Header(Counter("x_total", "", "One.\nTwo."));
  EXPECT_EQ(text, "# HELP x_total One.\\nTwo.\n# TYPE x_total counter\n");
}

TEST(TextExpositionTest, NumbersAsTheFormatSpellsThem) {
  std::string text;
  AppendNumber(text, HUGE_VAL);
  text += ' ';
  AppendNumber(text, -HUGE_VAL);
  text += ' ';
  AppendNumber(text, std::numeric_limits<double>::quiet_NaN());
  text += ' ';
  AppendNumber(text, 0.1);
  text += ' ';
  AppendNumber(text, 42.0);
  EXPECT_EQ(text, "+Inf -Inf NaN 0.1 42");
}

}  // namespace
}  // namespace ncclscope::metrics

namespace ncclscope::metrics {
namespace {

TEST(TextExpositionTest, LabelValuesAreAlwaysValidUtf8) {
  // One invalid byte in a job id (any environment variable of the job) made Prometheus reject the
  // node's whole scrape. Invalid bytes become U+FFFD; valid UTF-8 is kept as it is.
  auto label = [](std::string_view value) {
    std::string out;
    AppendLabel(out, "job_id", value);
    return out;
  };
  EXPECT_EQ(label("train-\xff"), "job_id=\"train-\xEF\xBF\xBD\"");
  EXPECT_EQ(label("gr\xC3\xBC\xC3\x9F"
                  "e \xE2\x9C\x93 \xF0\x9F\x9A\x80"),
            "job_id=\"gr\xC3\xBC\xC3\x9F"
            "e \xE2\x9C\x93 \xF0\x9F\x9A\x80\"");
  EXPECT_EQ(label("\xC0\xAF"), "job_id=\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong '/'
  EXPECT_EQ(label("\xED\xA0\x80"), "job_id=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
  EXPECT_EQ(label("\xF4\x90\x80\x80"),
            "job_id=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");     // past U+10FFFF
  EXPECT_EQ(label("cut \xE2\x9C"), "job_id=\"cut \xEF\xBF\xBD\xEF\xBF\xBD\"");  // truncated
  EXPECT_EQ(label("a\"b\\c\nd"), "job_id=\"a\\\"b\\\\c\\nd\"");
}

}  // namespace
}  // namespace ncclscope::metrics
