#pragma once

// Rendering a source's families as Prometheus text, to assert on exported samples exactly as a
// scrape would show them.

#include <string>
#include <vector>

#include "agent/core/source.h"
#include "agent/core/text_exposition.h"
#include "tests/support/exposition.h"

namespace ncclscope::rdma::testing {

inline std::string Exposition(const Source& source) {
  std::string text;
  metrics::TextWriter writer(text);
  source.Collect(writer);
  return text;
}

// The sample `series` (name{labels} as rendered) in `text`, NaN when absent.
inline double Sample(const std::string& text, const std::string& series) {
  return ncclscope::testing::SampleValue(text, series);
}

}  // namespace ncclscope::rdma::testing
