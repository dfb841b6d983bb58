#include "agent/config/config.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::config {

std::vector<std::string> EventGroupNames() {
  std::vector<std::string> names;
  for (unsigned group = 0; group < NCCLSCOPE_EVENT_GROUP_COUNT; ++group) {
    names.emplace_back(ncclscope_event_group_name(group));
  }
  return names;
}

LoadResult LoadString(const std::string& yaml, const std::string& name) {
  LoadResult result;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    ConfigError error;
    error.file = name;
    error.line = e.mark.line + 1;
    error.column = e.mark.column + 1;
    error.message = "YAML syntax error: " + e.msg;
    result.errors.push_back(std::move(error));
    return result;
  }
  Decoder decoder(name, &result.errors);
  decoder.DecodeDocument(root, result.config);
  return result;
}

LoadResult LoadFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, "", "cannot read: is a directory"});
    return result;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int saved = errno;
    LoadResult result;
    result.errors.push_back(
        {path, 0, 0, "", "cannot read: " + std::generic_category().message(saved)});
    return result;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, "", "read failed"});
    return result;
  }
  return LoadString(text.str(), path);
}

std::string ToYaml(Config config) {
  Encoder encoder;
  config.Visit(encoder);
  YAML::Emitter out;
  out << encoder.node();
  return std::string(out.c_str()) + "\n";
}

std::string ReferenceMarkdown() {
  Config defaults;
  ReferenceWriter writer;
  defaults.Visit(writer);
  return writer.Markdown();
}

}  // namespace ncclscope::config
