// The metric catalog against docs/metrics.md and the Prometheus naming rules. Every family the
// agent can expose is a constant in its source's `*_metrics.h` list (agent/core/metric_def.h), so
// this checks all of them, including families only a fault renders (a finding, a corrupt ring),
// which a scrape of a healthy simulated node never shows.

#include "agent/app/metric_catalog.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace ncclscope {
namespace {

struct DocRow {
  std::string type;  // counter, gauge, histogram; empty where the table has no Type column
  int line = 0;
};

// `name` -> row of every "| Metric | ..." table of docs/metrics.md (the first ticked word of the
// first cell), as tests/deploy/metrics_doc.mjs reads them for the dashboards' PromQL.
std::map<std::string, DocRow> DocumentedFamilies() {
  const std::string doc = testing::ReadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/docs/metrics.md");
  std::map<std::string, DocRow> rows;
  std::istringstream lines(doc);
  const std::regex row(R"(^\|\s*`([a-z_][a-z0-9_]*)`[^|]*\|\s*([^|]*?)\s*\|)");
  bool in_table = false;
  bool typed = false;
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.rfind("| Metric |", 0) == 0) {
      in_table = true;
      typed = line.rfind("| Metric | Type |", 0) == 0;
      continue;
    }
    if (line.rfind('|', 0) != 0) {
      in_table = false;
      continue;
    }
    std::smatch m;
    if (!in_table || !std::regex_search(line, m, row)) continue;
    rows[m[1]] = {typed ? m[2].str() : "", number};
  }
  return rows;
}

TEST(MetricCatalogTest, NamesFollowThePrometheusConventions) {
  const std::regex name("^[a-z_][a-z0-9_]*$");
  std::set<std::string> seen;
  for (const metrics::MetricDef& def : MetricCatalog()) {
    const std::string n(def.name);
    SCOPED_TRACE(n);
    EXPECT_TRUE(seen.insert(n).second) << "declared twice";
    EXPECT_TRUE(std::regex_match(n, name));
    EXPECT_TRUE(n.rfind("ncclscope_", 0) == 0 || n.rfind("process_", 0) == 0)
        << "ours are ncclscope_*, the process collector's process_*";
    const bool total = n.size() > 6 && n.ends_with("_total");
    EXPECT_EQ(total, def.type == metrics::MetricType::kCounter)
        << "counters, and only they, end _total";
    const std::string base = total ? n.substr(0, n.size() - 6) : n;
    if (!def.unit.empty()) {
      EXPECT_TRUE(base.ends_with("_" + std::string(def.unit))) << "the unit ends the name";
    }
    for (const char* unit : {"_seconds", "_bytes", "_ratio", "_bytes_per_second"}) {
      if (base.ends_with(unit)) {
        EXPECT_EQ("_" + std::string(def.unit), unit) << "unit declared";
      }
    }
    EXPECT_FALSE(def.help.empty());
  }
  EXPECT_GT(seen.size(), 150u) << "every source's list is in the catalog";
}

TEST(MetricCatalogTest, EveryFamilyIsDocumentedWithItsType) {
  const std::map<std::string, DocRow> documented = DocumentedFamilies();
  ASSERT_GT(documented.size(), 150u) << "the tables of docs/metrics.md were read";
  for (const metrics::MetricDef& def : MetricCatalog()) {
    const std::string n(def.name);
    const auto it = documented.find(n);
    if (it == documented.end()) {
      ADD_FAILURE() << n << " is not in a Metric table of docs/metrics.md";
      continue;
    }
    if (!it->second.type.empty()) {
      EXPECT_EQ(it->second.type, metrics::TypeName(def.type))
          << n << ": docs/metrics.md:" << it->second.line;
    }
  }
}

TEST(MetricCatalogTest, EveryDocumentedFamilyIsDeclared) {
  std::set<std::string> declared;
  for (const metrics::MetricDef& def : MetricCatalog()) declared.emplace(def.name);
  for (const auto& [name, row] : DocumentedFamilies()) {
    if (name.rfind("ncclscope_", 0) != 0 && name.rfind("process_", 0) != 0) continue;
    EXPECT_TRUE(declared.count(name) == 1)
        << name << " (docs/metrics.md:" << row.line << ") is documented but no source declares it";
  }
}

}  // namespace
}  // namespace ncclscope
