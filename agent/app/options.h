#pragma once

#include <optional>
#include <string>

namespace ncclscope {

// Command-line options. Flags override the config file and survive reloads.
struct Options {
  std::optional<std::string> config_file;     // --config; absent: built-in defaults
  std::optional<std::string> listen_address;  // --web.listen-address
  std::optional<std::string> log_level;       // --log.level
  bool check_config = false;                  // --check-config
  bool print_config_reference = false;        // --print-config-reference
  bool version = false;                       // --version
  bool help = false;                          // --help
};

// Parses argv; returns nullopt and sets *error on a usage error.
std::optional<Options> ParseOptions(int argc, char** argv, std::string* error);

std::string UsageText(const char* program);

}  // namespace ncclscope
