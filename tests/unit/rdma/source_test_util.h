#pragma once

// Rendering a source's families as Prometheus text, to assert on exported samples exactly as a
// scrape would show them.

#include <prometheus/text_serializer.h>

#include <string>
#include <vector>

#include "agent/core/source.h"
#include "tests/support/exposition.h"

namespace ncclscope::rdma::testing {

inline std::string Exposition(const Source& source) {
  return prometheus::TextSerializer().Serialize(source.Collect());
}

// The sample `series` (name{labels} as rendered) in `text`, NaN when absent.
inline double Sample(const std::string& text, const std::string& series) {
  return ncclscope::testing::SampleValue(text, series);
}

}  // namespace ncclscope::rdma::testing
