#include "tests/support/metrics_doc.h"

#include <sstream>

#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

std::vector<std::string> UndocumentedMetrics(const std::string& exposition) {
  const std::string doc = ReadFile(std::string(NCCLSCOPE_SOURCE_DIR) + "/docs/metrics.md");
  std::vector<std::string> missing;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream fields(line.substr(7));
    std::string name;
    fields >> name;
    if (doc.find("`" + name + "`") == std::string::npos) missing.push_back(name);
  }
  return missing;
}

}  // namespace ncclscope::testing
