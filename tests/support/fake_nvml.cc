#include "tests/support/fake_nvml.h"

#include <cstdio>
#include <fstream>

namespace ncclscope::testing {

void WriteFakeNvmlState(const std::string& path, const std::string& content) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << content;
  }
  std::rename(temp.c_str(), path.c_str());
}

}  // namespace ncclscope::testing
