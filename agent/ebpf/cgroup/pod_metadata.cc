#include "agent/ebpf/cgroup/pod_metadata.h"

#include <nlohmann/json.hpp>

#include "agent/ebpf/proc/maps.h"

namespace ncclscope::ebpf::cgroup {
namespace {

constexpr std::size_t kMaxStateFile = 4 << 20;

std::string StringAt(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<PodNames> FromKeys(const nlohmann::json& object) {
  if (!object.is_object()) return std::nullopt;
  PodNames names;
  names.namespace_name = StringAt(object, "io.kubernetes.cri.sandbox-namespace");
  names.pod = StringAt(object, "io.kubernetes.cri.sandbox-name");
  names.container = StringAt(object, "io.kubernetes.cri.container-name");
  if (names.pod.empty()) {
    names.namespace_name = StringAt(object, "io.kubernetes.pod.namespace");
    names.pod = StringAt(object, "io.kubernetes.pod.name");
    names.container = StringAt(object, "io.kubernetes.container.name");
  }
  if (names.pod.empty()) return std::nullopt;
  return names;
}

}  // namespace

std::optional<PodNames> ParseRuntimeState(std::string_view json_text) {
  const nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  if (auto it = doc.find("annotations"); it != doc.end()) {  // OCI config.json
    if (auto names = FromKeys(*it)) return names;
  }
  if (auto config = doc.find("Config"); config != doc.end() && config->is_object()) {  // Docker
    if (auto labels = config->find("Labels"); labels != config->end()) {
      if (auto names = FromKeys(*labels)) return names;
    }
  }
  return std::nullopt;
}

PodMetadata::PodMetadata(std::vector<std::string> patterns, std::size_t max_cached)
    : patterns_(std::move(patterns)), max_cached_(max_cached) {}

std::optional<PodNames> PodMetadata::Lookup(const std::string& container_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = cache_.find(container_id); it != cache_.end()) return it->second;
  std::optional<PodNames> names;
  for (const std::string& pattern : patterns_) {
    std::string path = pattern;
    if (const auto at = path.find("{id}"); at != std::string::npos) {
      path.replace(at, 4, container_id);
    }
    if (auto text = proc::ReadProcFile(path, kMaxStateFile)) {
      names = ParseRuntimeState(*text);
      if (names) break;
    }
  }
  if (cache_.size() >= max_cached_) cache_.clear();
  cache_.emplace(container_id, names);
  return names;
}

}  // namespace ncclscope::ebpf::cgroup
