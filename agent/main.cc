// ncclscope-agent: the node agent. See README.md and docs/configuration.md.

#include <sys/resource.h>

#include <cstdio>
#include <iostream>

#include "agent/app/agent.h"
#include "agent/app/options.h"
#include "agent/app/sources.h"
#include "agent/config/config.h"
#include "agent/core/log.h"
#include "agent/core/signals.h"
#include "agent/exporter/build_info.h"

namespace {

int CheckConfig(const ncclscope::Options& options) {
  ncclscope::config::LoadResult result = options.config_file
                                             ? ncclscope::config::LoadFile(*options.config_file)
                                             : ncclscope::config::LoadResult{};
  ncclscope::ApplyOverrides(options, result);
  if (!result.ok()) {
    for (const auto& error : result.errors) std::cerr << error.ToString() << "\n";
    std::cerr << result.errors.size() << (result.errors.size() == 1 ? " error" : " errors")
              << " in the configuration\n";
    return 1;
  }
  std::cout << "# effective configuration (" << options.config_file.value_or("built-in defaults")
            << ")\n"
            << ncclscope::config::ToYaml(result.config);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the control signals before any thread exists (see SignalWaiter).
  ncclscope::SignalWaiter signals;
  // Every ring and HTTP connection is a descriptor, each bounded by its own limit
  // (docs/trust-model.md); the soft default of 1024 would be reached before those.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  std::string error;
  std::optional<ncclscope::Options> options = ncclscope::ParseOptions(argc, argv, &error);
  if (!options) {
    std::cerr << "ncclscope-agent: " << error << "\n\n" << ncclscope::UsageText(argv[0]);
    return 2;
  }
  if (options->help) {
    std::cout << ncclscope::UsageText(argv[0]);
    return 0;
  }
  if (options->version) {
    std::cout << "ncclscope-agent " << ncclscope::kVersion << " (revision " << ncclscope::kRevision
              << ")\n";
    return 0;
  }
  if (options->print_config_reference) {
    std::cout << ncclscope::config::ReferenceMarkdown();
    return 0;
  }
  if (options->check_config) return CheckConfig(*options);

  try {
    ncclscope::Agent agent(*options, ncclscope::MakeSources());
    return agent.Run(signals);
  } catch (const std::exception& e) {
    NCCLSCOPE_LOG(kError, "agent") << "fatal: " << e.what();
    return 1;
  }
}
