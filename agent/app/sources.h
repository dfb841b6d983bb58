#pragma once

#include <memory>
#include <vector>

#include "agent/core/source.h"

namespace ncclscope {

// Every data source the agent knows, in the order their metrics are rendered. A new source is
// one line in sources.cc.
std::vector<std::shared_ptr<Source>> MakeSources();

}  // namespace ncclscope
