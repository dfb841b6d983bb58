#include "agent/app/options.h"

#include <getopt.h>

namespace ncclscope {
namespace {

enum OptionId {
  kConfig = 1000,
  kCheckConfig,
  kListenAddress,
  kLogLevel,
  kPrintReference,
  kVersion,
  kHelp,
};

}  // namespace

std::optional<Options> ParseOptions(int argc, char** argv, std::string* error) {
  static const option kLongOptions[] = {
      {"config", required_argument, nullptr, kConfig},
      {"check-config", no_argument, nullptr, kCheckConfig},
      {"web.listen-address", required_argument, nullptr, kListenAddress},
      {"log.level", required_argument, nullptr, kLogLevel},
      {"print-config-reference", no_argument, nullptr, kPrintReference},
      {"version", no_argument, nullptr, kVersion},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0},
  };
  Options options;
  optind = 1;
  opterr = 0;
  int id = 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): runs once in main() before any thread starts
  while ((id = getopt_long(argc, argv, "h", kLongOptions, nullptr)) != -1) {
    switch (id) {
      case kConfig:
        options.config_file = optarg;
        break;
      case kCheckConfig:
        options.check_config = true;
        break;
      case kListenAddress:
        options.listen_address = optarg;
        break;
      case kLogLevel:
        options.log_level = optarg;
        break;
      case kPrintReference:
        options.print_config_reference = true;
        break;
      case kVersion:
        options.version = true;
        break;
      case 'h':
      case kHelp:
        options.help = true;
        break;
      default: {
        const char* arg = (optind > 0 && optind <= argc) ? argv[optind - 1] : "?";
        *error = std::string("unknown option or missing value: ") + arg;
        return std::nullopt;
      }
    }
  }
  if (optind < argc) {
    *error = std::string("unexpected argument: ") + argv[optind];
    return std::nullopt;
  }
  return options;
}

std::string UsageText(const char* program) {
  return std::string("Usage: ") + program +
         " [--config FILE] [--check-config] [--web.listen-address HOST:PORT]\n"
         "          [--log.level debug|info|warn|error] [--version]\n\n"
         "ncclscope node agent: NCCL profiler, eBPF and fabric telemetry for Prometheus.\n\n"
         "  --config FILE              YAML config (default: built-in defaults; see\n"
         "                             config/ncclscope.yaml). SIGHUP reloads it.\n"
         "  --check-config             Validate the config, print the effective config (exit 0)\n"
         "                             or every error as file:line:col: key: message (exit 1).\n"
         "  --web.listen-address ADDR  Overrides server.listen_address (default :9824).\n"
         "  --log.level LEVEL          Overrides log.level.\n"
         "  --print-config-reference   Print the Markdown reference of every config key.\n"
         "  --version                  Print the version and exit.\n";
}

}  // namespace ncclscope
