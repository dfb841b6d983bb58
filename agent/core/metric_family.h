#pragma once

// Metric families whose samples arrive in any order: one walk over a source's data (ports,
// processes, communicators) feeds several families, and the text format wants each family's
// samples together after its HELP and TYPE lines. A FamilySet creates each family (a MetricDef,
// agent/core/metric_def.h) on first use, each Family keeps its samples as text, and WriteTo
// writes them whole, in creation order, through the one exposition path
// (agent/core/text_exposition.h). A source that renders one family at a time writes to the
// TextWriter directly instead.

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent/core/metric_def.h"

namespace ncclscope::metrics {

class TextWriter;

struct Label {
  std::string name;
  std::string value;
};
using Labels = std::vector<Label>;

class Family {
 public:
  explicit Family(const MetricDef& def);

  // Series added so far.
  std::size_t size() const { return series_; }

  // One sample. (Histograms, all of them the analytics', are written with TextWriter::Histogram.)
  void Add(const Labels& labels, double value);

  // HELP, TYPE and the samples; nothing for a family without samples.
  void WriteTo(TextWriter& out) const;

 private:
  // Copies: a family's name can be built at run time (rdma's counter families come from the
  // catalogue in rdma/counters, a test's from its source's name).
  std::string name_;
  std::string help_;
  MetricType type_;
  MetricDef Def() const { return {name_, type_, {}, help_}; }  // what the writer needs
  std::string samples_;  // the sample lines, as the format spells them
  std::size_t series_ = 0;
};

class FamilySet {
 public:
  // The family of that name, created on first use. References stay valid for the set's life.
  Family& Get(const MetricDef& def);

  // Every family with samples, in creation order.
  void WriteTo(TextWriter& out) const;
  // The same as a string (a polled source renders once per poll, every scrape appends it).
  std::string Text() const;

 private:
  std::deque<Family> families_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace ncclscope::metrics
