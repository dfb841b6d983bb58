#include "agent/core/metric_family.h"

#include "agent/core/text_exposition.h"

namespace ncclscope::metrics {
namespace {

std::string LabelText(const Labels& labels) {
  std::string text;
  for (const Label& label : labels) {
    if (!text.empty()) text += ',';
    AppendLabel(text, label.name, label.value);
  }
  return text;
}

}  // namespace

Family::Family(const MetricDef& def) : name_(def.name), help_(def.help), type_(def.type) {}

void Family::Add(const Labels& labels, double value) {
  TextWriter(samples_).Sample(Def(), LabelText(labels), value);
  ++series_;
}

void Family::WriteTo(TextWriter& out) const {
  if (series_ == 0) return;
  out.Header(Def());
  out.Rendered(samples_);
}

Family& FamilySet::Get(const MetricDef& def) {
  const auto [it, added] = index_.try_emplace(std::string(def.name), families_.size());
  if (added) families_.emplace_back(def);
  return families_[it->second];
}

void FamilySet::WriteTo(TextWriter& out) const {
  for (const Family& family : families_) family.WriteTo(out);
}

std::string FamilySet::Text() const {
  std::string text;
  TextWriter writer(text);
  WriteTo(writer);
  return text;
}

}  // namespace ncclscope::metrics
