#include "tests/support/sim_job.h"

#include <sstream>

#include "tests/support/wait_for.h"

namespace ncclscope::testing {

std::string SimExpectation::OpLabels() const {
  std::string labels;
  for (const char* key : {"comm", "rank", "func", "algo", "proto", "size"}) {
    if (!labels.empty()) labels += ',';
    labels += std::string(key) + "=\"" + fields.at(key) + "\"";
  }
  return labels;
}

SimJob::SimJob(const std::string& ring_dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {NCCLSCOPE_SIM_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  process_ = std::make_unique<Subprocess>(
      argv, logs_.path(), std::vector<std::string>{"NCCLSCOPE_RING_DIR=" + ring_dir});
}

bool SimJob::WaitDone(int ranks, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        const std::string out = process_->Stdout();
        int done = 0;
        for (std::size_t at = out.find("done rank="); at != std::string::npos;
             at = out.find("done rank=", at + 1)) {
          ++done;
        }
        return done >= ranks;
      },
      timeout, std::chrono::milliseconds(20));
}

std::vector<SimExpectation> SimJob::Expectations() const {
  std::vector<SimExpectation> result;
  std::istringstream lines(process_->Stdout());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("expect ", 0) != 0) continue;
    SimExpectation e;
    std::istringstream fields(line.substr(7));
    for (std::string field; fields >> field;) {
      const std::size_t eq = field.find('=');
      const std::string key = field.substr(0, eq);
      const std::string value = field.substr(eq + 1);
      if (key == "ops") {
        e.ops = std::stoull(value);
      } else if (key == "bytes") {
        e.bytes = std::stoull(value);
      } else if (key == "bus_bytes") {
        e.bus_bytes = std::stod(value);
      } else if (key == "gpu_seconds") {
        e.gpu_seconds = std::stod(value);
      } else {
        e.fields[key] = value;
      }
    }
    result.push_back(e);
  }
  return result;
}

}  // namespace ncclscope::testing
