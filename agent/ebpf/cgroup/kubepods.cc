#include "agent/ebpf/cgroup/kubepods.h"

#include <algorithm>
#include <vector>

namespace ncclscope::ebpf::cgroup {
namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

void StripSuffix(std::string_view& s, std::string_view suffix) {
  if (s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
    s.remove_suffix(suffix.size());
  }
}

// "<uid>" in the systemd (underscores) or cgroupfs (dashes) spelling -> dashed, or nullopt.
std::optional<std::string> PodUid(std::string_view s) {
  if (s.size() != 36) return std::nullopt;
  std::string uid(s);
  for (std::size_t i = 0; i < uid.size(); ++i) {
    char& c = uid[i];
    const bool dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_position) {
      if (c != '-' && c != '_') return std::nullopt;
      c = '-';
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return std::nullopt;
    }
  }
  return uid;
}

// A pod segment: "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid>.slice" (systemd).
std::optional<std::string> PodFromSegment(std::string_view segment) {
  StripSuffix(segment, ".slice");
  const auto at = segment.rfind("pod");
  if (at == std::string_view::npos) return std::nullopt;
  if (at != 0 && segment[at - 1] != '-') return std::nullopt;
  return PodUid(segment.substr(at + 3));
}

// A container segment: "cri-containerd-<id>.scope", "crio-<id>.scope", "docker-<id>.scope",
// "<id>" (cgroupfs) or containerd's "...:cri-containerd:<id>".
void ContainerFromSegment(std::string_view segment, PodRef& ref) {
  StripSuffix(segment, ".scope");
  std::string_view id = segment;
  std::string_view prefix;
  if (const auto colon = segment.rfind(':'); colon != std::string_view::npos) {
    id = segment.substr(colon + 1);
    prefix = segment.substr(0, colon);
  } else if (const auto dash = segment.rfind('-'); dash != std::string_view::npos) {
    id = segment.substr(dash + 1);
    prefix = segment.substr(0, dash);
  }
  if (!IsHex(id) || id.size() < 12 || id.size() > 64) return;
  if (prefix.find("conmon") != std::string_view::npos) return;  // CRI-O's monitor, not a container
  ref.container_id = std::string(id);
  if (prefix.find("containerd") != std::string_view::npos) {
    ref.runtime = "containerd";
  } else if (prefix.find("crio") != std::string_view::npos) {
    ref.runtime = "crio";
  } else if (prefix.find("docker") != std::string_view::npos) {
    ref.runtime = "docker";
  }
}

}  // namespace

std::optional<PodRef> ParseKubepodsPath(std::string_view path) {
  if (path.find("kubepods") == std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> segments;
  while (!path.empty()) {
    const auto slash = path.find('/');
    const std::string_view segment = path.substr(0, slash);
    if (!segment.empty()) segments.push_back(segment);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
  }
  for (std::size_t i = 0; i < segments.size(); ++i) {
    std::string_view segment = segments[i];
    // containerd's systemd spelling puts pod and container in one segment.
    const auto colon = segment.find(':');
    if (auto uid = PodFromSegment(segment.substr(0, colon))) {
      PodRef ref;
      ref.pod_uid = std::move(*uid);
      if (colon != std::string_view::npos) {
        ContainerFromSegment(segment, ref);
      } else if (i + 1 < segments.size()) {
        ContainerFromSegment(segments[i + 1], ref);
      }
      return ref;
    }
  }
  return std::nullopt;
}

std::optional<std::string> UnifiedPath(std::string_view text) {
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (line.substr(0, 3) == "0::") return std::string(line.substr(3));
  }
  return std::nullopt;
}

std::optional<PodRef> ParseProcCgroup(std::string_view text) {
  if (const auto unified = UnifiedPath(text)) {
    if (auto ref = ParseKubepodsPath(*unified)) return ref;
  }
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    // "<id>:<controllers>:<path>"; the path may itself contain ':'.
    const auto first = line.find(':');
    if (first == std::string_view::npos) continue;
    const auto second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (auto ref = ParseKubepodsPath(line.substr(second + 1))) return ref;
  }
  return std::nullopt;
}

}  // namespace ncclscope::ebpf::cgroup
