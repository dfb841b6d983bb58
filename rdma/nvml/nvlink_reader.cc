#include "rdma/nvml/nvlink_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace ncclscope::rdma::nvml {
namespace {

std::string CString(const char* buffer, std::size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

int FieldSlot(unsigned field_id) {
  const auto* it = std::find(kLinkFields.begin(), kLinkFields.end(), field_id);
  return it == kLinkFields.end() ? -1 : static_cast<int>(it - kLinkFields.begin());
}

int GpuSlot(unsigned field_id) {
  const auto* it = std::find(kGpuFields.begin(), kGpuFields.end(), field_id);
  return it == kGpuFields.end() ? -1 : static_cast<int>(it - kGpuFields.begin());
}

std::optional<std::uint64_t> AsUnsigned(const FieldValue& value) {
  switch (value.valueType) {
    case ValueType::kUnsignedLongLong:
      return value.value.ullVal;
    case ValueType::kUnsignedLong:
      return value.value.ulVal;
    case ValueType::kUnsignedInt:
      return value.value.uiVal;
    case ValueType::kUnsignedShort:
      return value.value.usVal;
    case ValueType::kSignedLongLong:
      return value.value.sllVal < 0 ? std::nullopt
                                    : std::optional<std::uint64_t>(value.value.sllVal);
    case ValueType::kSignedInt:
      return value.value.siVal < 0 ? std::nullopt : std::optional<std::uint64_t>(value.value.siVal);
    case ValueType::kDouble:
      return value.value.dVal < 0
                 ? std::nullopt
                 : std::optional<std::uint64_t>(static_cast<std::uint64_t>(value.value.dVal));
  }
  return std::nullopt;
}

}  // namespace

std::string LinuxBusId(const std::string& nvml_bus_id) {
  std::string id = nvml_bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id.erase(0, colon - 4);  // 8-digit domain -> 4
  return id;
}

void NvlinkReader::Note(NvlinkSnapshot* snapshot, const char* what, Return code) {
  ++snapshot->errors;
  snapshot->last_error = std::string(what) + ": " + library_->ErrorString(code);
}

bool NvlinkReader::Discover(NvlinkSnapshot* snapshot) {
  gpus_.clear();
  unsigned count = 0;
  if (const Return r = library_->device_get_count(&count); r != kSuccess) {
    Note(snapshot, "nvmlDeviceGetCount_v2", r);
    return false;
  }
  count = std::min(count, 64u);
  for (unsigned i = 0; i < count; ++i) {
    Gpu gpu;
    gpu.index = i;
    if (const Return r = library_->device_get_handle_by_index(i, &gpu.handle); r != kSuccess) {
      // A lost GPU is reported as such (without a handle); others are skipped.
      if (r != kErrorGpuIsLost) {
        Note(snapshot, "nvmlDeviceGetHandleByIndex_v2", r);
        continue;
      }
      gpu.handle = nullptr;
      gpus_.push_back(std::move(gpu));
      continue;
    }
    char uuid[kDeviceUuidBufferSize] = {};
    if (library_->device_get_uuid(gpu.handle, uuid, sizeof(uuid)) == kSuccess) {
      gpu.uuid = CString(uuid, sizeof(uuid));
    }
    char name[kDeviceNameBufferSize] = {};
    if (library_->device_get_name(gpu.handle, name, sizeof(name)) == kSuccess) {
      gpu.name = CString(name, sizeof(name));
    }
    PciInfo pci{};
    if (library_->device_get_pci_info(gpu.handle, &pci) == kSuccess) {
      gpu.pci_bus_id = CString(pci.busId, sizeof(pci.busId));
      gpu.bus_id = LinuxBusId(gpu.pci_bus_id);
    }
    // Link count: the field if the driver has it, else probe until the first unsupported link.
    FieldValue link_count{};
    link_count.fieldId = field::kNvLinkLinkCount;
    if (library_->device_get_field_values(gpu.handle, 1, &link_count) == kSuccess &&
        link_count.nvmlReturn == kSuccess) {
      gpu.link_count = static_cast<unsigned>(
          std::min<std::uint64_t>(AsUnsigned(link_count).value_or(0), kNvLinkMaxLinks));
    } else {
      for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
        EnableState state = 0;
        if (library_->device_get_nvlink_state(gpu.handle, link, &state) != kSuccess) break;
        gpu.link_count = link + 1;
      }
    }
    gpu.error_supported.assign(gpu.link_count, {true, true, true, true, true});
    for (unsigned link = 0; link < gpu.link_count; ++link) {
      for (unsigned field_id : kLinkFields) {
        FieldValue request{};
        request.fieldId = field_id;
        request.scopeId = link;
        gpu.requests.push_back(request);
      }
    }
    if (gpu.link_count > 0) {
      for (unsigned field_id : kGpuFields) {
        FieldValue request{};
        request.fieldId = field_id;
        request.scopeId = kScopeAllLinks;
        gpu.requests.push_back(request);
      }
    }
    gpus_.push_back(std::move(gpu));
  }
  discovered_ = true;
  return true;
}

NvlinkSnapshot NvlinkReader::Poll() {
  NvlinkSnapshot snapshot;
  if (!discovered_ && !Discover(&snapshot)) return snapshot;
  bool rediscover = false;
  for (Gpu& gpu : gpus_) {
    GpuReading reading = ReadGpu(gpu, &snapshot);
    if (reading.lost) rediscover = true;
    snapshot.gpus.push_back(std::move(reading));
  }
  if (rediscover) discovered_ = false;
  return snapshot;
}

GpuReading NvlinkReader::ReadGpu(Gpu& gpu, NvlinkSnapshot* snapshot) {
  GpuReading reading;
  reading.index = gpu.index;
  reading.uuid = gpu.uuid;
  reading.bus_id = gpu.bus_id;
  reading.pci_bus_id = gpu.pci_bus_id;
  reading.name = gpu.name;
  reading.lost = gpu.handle == nullptr;
  reading.links.resize(gpu.link_count);
  for (unsigned link = 0; link < gpu.link_count && !reading.lost; ++link) {
    ReadLink(gpu, link, &reading, snapshot);
  }
  if (!reading.lost && !gpu.requests.empty()) ReadFields(gpu, &reading, snapshot);
  return reading;
}

void NvlinkReader::ReadLink(Gpu& gpu, unsigned link, GpuReading* reading,
                            NvlinkSnapshot* snapshot) {
  LinkReading& out = reading->links[link];
  out.link = link;
  EnableState state = 0;
  const Return r = library_->device_get_nvlink_state(gpu.handle, link, &state);
  if (r == kSuccess) {
    out.active = state == 1;
  } else if (r == kErrorGpuIsLost) {
    reading->lost = true;
    return;
  } else if (r != kErrorNotSupported) {
    Note(snapshot, "nvmlDeviceGetNvLinkState", r);
  }
  for (std::size_t c = 0; c < kErrorCounters; ++c) {
    if (!gpu.error_supported[link][c]) continue;
    unsigned long long value = 0;  // NOLINT(google-runtime-int): ABI type
    const Return e = library_->device_get_nvlink_error_counter(
        gpu.handle, link, static_cast<NvLinkErrorCounter>(c), &value);
    if (e == kSuccess) {
      out.errors[c] = value;
    } else if (e == kErrorNotSupported) {
      gpu.error_supported[link][c] = false;  // Blackwell: use the NVLink5 fields instead
    } else if (e == kErrorGpuIsLost) {
      reading->lost = true;
      return;
    } else {
      Note(snapshot, "nvmlDeviceGetNvLinkErrorCounter", e);
    }
  }
}

void NvlinkReader::ReadFields(Gpu& gpu, GpuReading* reading, NvlinkSnapshot* snapshot) {
  std::vector<FieldValue> values = gpu.requests;
  const Return r =
      library_->device_get_field_values(gpu.handle, static_cast<int>(values.size()), values.data());
  if (r == kErrorGpuIsLost) {
    reading->lost = true;
    return;
  }
  if (r != kSuccess) {
    Note(snapshot, "nvmlDeviceGetFieldValues", r);
    return;
  }
  // SUCCESS means at least one value was filled: check each entry.
  std::vector<FieldValue> keep;
  keep.reserve(gpu.requests.size());
  for (const FieldValue& value : values) {
    if (value.nvmlReturn == kErrorNotSupported) continue;  // never ask again
    FieldValue request{};
    request.fieldId = value.fieldId;
    request.scopeId = value.scopeId;
    keep.push_back(request);
    if (value.nvmlReturn != kSuccess) continue;
    const std::optional<std::uint64_t> number = AsUnsigned(value);
    if (!number) continue;
    if (value.scopeId == kScopeAllLinks) {
      if (const int slot = GpuSlot(value.fieldId); slot >= 0) reading->totals[slot] = number;
    } else if (value.scopeId < gpu.link_count) {
      if (const int slot = FieldSlot(value.fieldId); slot >= 0) {
        reading->links[value.scopeId].fields[slot] = number;
      }
    }
  }
  gpu.requests = std::move(keep);
}

}  // namespace ncclscope::rdma::nvml
