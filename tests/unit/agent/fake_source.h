#pragma once

#include <atomic>
#include <stdexcept>

#include "agent/config/config.h"
#include "agent/core/metric_family.h"
#include "agent/core/source.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::testing {

// A Source whose behaviour each test sets: it can refuse to start, throw from Collect, and counts
// its lifecycle calls.
class FakeSource : public Source {
 public:
  explicit FakeSource(std::string name, bool enabled = true)
      : Source(std::move(name)), enabled_(enabled) {}

  bool Enabled(const config::Config& /*config*/) const override { return enabled_; }
  SourceStatus Start(const config::Config& /*config*/) override {
    ++starts;
    if (start_throws) throw std::runtime_error("boom");
    return start_ok ? SourceStatus::Up() : SourceStatus::Down("no device");
  }
  SourceStatus Reconfigure(const config::Config& /*config*/) override {
    ++reconfigures;
    return SourceStatus::Up();
  }
  void Stop() override { ++stops; }
  // Two families: one written directly, one through a FamilySet.
  void Collect(metrics::TextWriter& out) const override {
    // Names built at run time (one per fake source), so the definitions are too.
    const std::string text_name = "fake_" + name() + "_text_total";
    const metrics::MetricDef text =
        metrics::Counter(text_name, "", "A fake counter rendered as text.");
    out.Header(text);
    out.Sample(text, "k=\"t\"", std::uint64_t{7});
    if (collect_throws) throw std::runtime_error("render failed");
    const std::string value_name = "fake_" + name() + "_value";
    metrics::FamilySet families;
    families.Get(metrics::Gauge(value_name, "", "A fake value.")).Add({{"k", "v"}}, 42);
    families.WriteTo(out);
  }

  bool enabled_;
  bool start_ok = true;
  bool start_throws = false;
  std::atomic<bool> collect_throws{false};
  std::atomic<int> starts{0};
  std::atomic<int> reconfigures{0};
  std::atomic<int> stops{0};
};

}  // namespace ncclscope::testing
