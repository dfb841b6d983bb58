// Our text serializer against prometheus-cpp's: the same series with the same values, escaping
// and number spelling as the format wants, and histograms with cumulative buckets.

#include "agent/core/text_exposition.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "agent/core/metric_family.h"

namespace ncclscope::metrics {
namespace {

// Series (name plus labels as written) -> value, and the set of comment lines.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    const std::string value = line.substr(space + 1);
    samples[line.substr(0, space)] = value == "+Inf"  ? HUGE_VAL
                                     : value == "NaN" ? std::numeric_limits<double>::quiet_NaN()
                                                      : std::stod(value);
  }
  return samples;
}

std::vector<prometheus::MetricFamily> Families() {
  auto counter = Counter("test_bytes_total", "Bytes, with a \\ backslash.");
  Add(counter, {{"a", "x"}, {"b", "quote \" and \\ and \n"}}, 1234567);
  Add(counter, {{"a", "y"}, {"b", ""}}, 0.25);
  auto gauge = Gauge("test_value", "A gauge.");
  Add(gauge, {}, -3.5e-7);
  Add(gauge, {{"k", "big"}}, 1.5e20);
  auto histogram = Histogram("test_seconds", "A histogram.");
  AddHistogram(histogram, {{"k", "v"}}, {1e-6, 1e-3, 1}, {1, 2, 3, 4}, 12.5);
  return {counter, gauge, histogram};
}

TEST(TextExpositionTest, SameSeriesAndValuesAsPrometheusCpp) {
  std::string ours;
  AppendFamilies(ours, Families());
  const std::string theirs = prometheus::TextSerializer().Serialize(Families());
  EXPECT_EQ(Samples(ours), Samples(theirs)) << ours << "\n---\n" << theirs;
  EXPECT_NE(ours.find("# HELP test_bytes_total Bytes, with a \\\\ backslash.\n"), std::string::npos)
      << ours;
  EXPECT_NE(ours.find("# TYPE test_seconds histogram\n"), std::string::npos);
  EXPECT_NE(ours.find("test_bytes_total{a=\"x\",b=\"quote \\\" and \\\\ and \\n\"} 1234567\n"),
            std::string::npos)
      << ours;
  EXPECT_NE(ours.find("test_seconds_bucket{k=\"v\",le=\"0.001\"} 3\n"), std::string::npos);
  EXPECT_NE(ours.find("test_seconds_bucket{k=\"v\",le=\"+Inf\"} 10\n"), std::string::npos);
  EXPECT_NE(ours.find("test_seconds_count{k=\"v\"} 10\n"), std::string::npos);
}

TEST(TextExpositionTest, WriterHistogramIsCumulativeWithPrecomputedBounds) {
  const HistogramBounds bounds({1e-6, 4e-6});
  EXPECT_EQ(bounds.le(0), "le=\"1e-06\"");
  EXPECT_EQ(bounds.le(2), "le=\"+Inf\"");
  std::string text;
  TextWriter writer(text);
  writer.Header("h_seconds", "H.", "histogram");
  const std::uint64_t counts[] = {2, 0, 5};
  writer.Histogram("h_seconds", "r=\"1\"", bounds, counts, 0.5);
  writer.Sample("c_total", "", std::uint64_t{18446744073709551615ull});
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
  TextWriter(text).Header("x_total", "One.\nTwo.", "counter");
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
