#pragma once

#include <string>
#include <vector>

namespace ncclscope::testing {

// Metric family names (from "# TYPE" lines) in Prometheus text `exposition` that docs/metrics.md
// does not mention as `name`. Empty means every exported family is documented.
std::vector<std::string> UndocumentedMetrics(const std::string& exposition);

}  // namespace ncclscope::testing
