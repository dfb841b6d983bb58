#pragma once

// Every metric family the agent can expose, gathered from the sources' `*_metrics.h` lists
// (agent/core/metric_def.h), for the docs test (tests/unit/agent/metric_catalog_test.cc), which
// checks each against docs/metrics.md. A new family is declared in its source's list and appears
// here by itself; a new source's list is added here once.

#include <vector>

#include "agent/core/metric_def.h"

namespace ncclscope {

// In a stable order: the agent's own, then each source's; tables (rdma counters, NVLink fields)
// in their own order.
std::vector<metrics::MetricDef> MetricCatalog();

}  // namespace ncclscope
