#pragma once

#include <string>

namespace ncclscope::testing {

// Value of the sample line starting with `series ` in Prometheus text `exposition`, or NaN.
double SampleValue(const std::string& exposition, const std::string& series);

}  // namespace ncclscope::testing
