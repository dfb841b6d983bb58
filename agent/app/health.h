#pragma once

#include <string>
#include <vector>

#include "agent/core/source_set.h"
#include "agent/exporter/http_server.h"

namespace ncclscope {

// /healthz from the sources' states: one line per source, as before; unhealthy while a source
// named in `required` (server.healthz_requires) is enabled and down, with a first line per such
// source saying why. A required source that the config disables is not missing: the operator
// turned it off on purpose.
HealthReport SourcesHealth(const SourceSet& sources, const std::vector<std::string>& required);

}  // namespace ncclscope
