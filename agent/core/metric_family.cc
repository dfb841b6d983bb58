#include "agent/core/metric_family.h"

#include "agent/core/text_exposition.h"

namespace ncclscope::metrics {
namespace {

std::string_view TypeName(MetricType type) {
  return type == MetricType::kCounter ? "counter" : "gauge";
}

std::string LabelText(const Labels& labels) {
  std::string text;
  for (const Label& label : labels) {
    if (!text.empty()) text += ',';
    AppendLabel(text, label.name, label.value);
  }
  return text;
}

}  // namespace

Family::Family(std::string name, std::string help, MetricType type)
    : name_(std::move(name)), help_(std::move(help)), type_(type) {}

void Family::Add(const Labels& labels, double value) {
  TextWriter(samples_).Sample(name_, LabelText(labels), value);
  ++series_;
}

void Family::WriteTo(TextWriter& out) const {
  if (series_ == 0) return;
  out.Header(name_, help_, TypeName(type_));
  out.out() += samples_;
}

Family& FamilySet::Get(std::string_view name, std::string_view help, MetricType type) {
  const auto [it, added] = index_.try_emplace(std::string(name), families_.size());
  if (added) families_.emplace_back(std::string(name), std::string(help), type);
  return families_[it->second];
}

Family& FamilySet::Gauge(std::string_view name, std::string_view help) {
  return Get(name, help, MetricType::kGauge);
}

Family& FamilySet::Counter(std::string_view name, std::string_view help) {
  return Get(name, help, MetricType::kCounter);
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
