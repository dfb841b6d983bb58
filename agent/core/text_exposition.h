#pragma once

// The Prometheus text exposition format (0.0.4), written straight into a string: no iostreams,
// numbers through std::to_chars, label sets that sources keep pre-formatted per series. This is
// the one way the agent exposes a metric: every source writes its families here at scrape time
// (Source::Collect), one family at a time, or through metrics::FamilySet (metric_family.h) when
// one walk over its data feeds several families. /metrics serves the result
// (agent/exporter/scrape_collector.h). Hand-rolled rather than prometheus-cpp's MetricFamily
// values and TextSerializer, which took 59 ms for the ~21 k series of a busy node against 0.61 ms
// here (docs/benchmarks.md, "NCCL analytics"), and wrote newlines in help texts raw.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/metric_def.h"

namespace ncclscope::metrics {

// Appends `name="value"` with the value escaped as the format requires (\\, \", \n).
void AppendLabel(std::string& out, std::string_view name, std::string_view value);

// Appends a number as the format spells it: shortest round-trip decimal, +Inf, -Inf, NaN.
void AppendNumber(std::string& out, double value);
void AppendNumber(std::string& out, std::uint64_t value);

// Histogram bucket bounds with their `le` label text computed once.
class HistogramBounds {
 public:
  explicit HistogramBounds(std::vector<double> bounds);
  const std::vector<double>& bounds() const { return bounds_; }
  std::size_t buckets() const { return bounds_.size() + 1; }  // with +Inf
  // `le="..."` for bucket i (i == bounds().size(): "+Inf").
  std::string_view le(std::size_t i) const { return le_[i]; }

 private:
  std::vector<double> bounds_;
  std::vector<std::string> le_;
};

class TextWriter {
 public:
  explicit TextWriter(std::string& out) : out_(out) {}

  // "# HELP name help" and "# TYPE name type" of a family (agent/core/metric_def.h).
  void Header(const MetricDef& family);

  // `name{labels} value`, where `labels` is the inside of the braces, already formatted with
  // AppendLabel and separated by commas (empty: no braces).
  void Sample(const MetricDef& family, std::string_view labels, double value);
  void Sample(const MetricDef& family, std::string_view labels, std::uint64_t value);
  // Same, with one more pre-formatted label (`state="send_wait"`) after `labels`.
  void Sample(const MetricDef& family, std::string_view labels, std::string_view extra,
              double value);

  // A family whose series are the rows of a table (anything with a pre-formatted `labels`
  // member): the header, then one sample per row, valued value_of(row).
  template <typename RowRange, typename ValueOf>
  void Rows(const MetricDef& family, const RowRange& rows, ValueOf value_of) {
    Header(family);
    for (const auto& row : rows) Sample(family, row.labels, value_of(row));
  }

  // One histogram: `counts` holds bounds.buckets() per-bucket (not cumulative) counts.
  void Histogram(const MetricDef& family, std::string_view labels, const HistogramBounds& bounds,
                 const std::uint64_t* counts, double sum);

  // Text an earlier TextWriter wrote (a Family's samples, a polled source's last poll, a cached
  // rendering), appended as it is: rendering once and serving many scrapes stays on this path.
  void Rendered(std::string_view text) { out_ += text; }

 private:
  void Start(std::string_view name, std::string_view suffix, std::string_view labels,
             std::string_view extra = {});
  std::string& out_;
};

}  // namespace ncclscope::metrics
