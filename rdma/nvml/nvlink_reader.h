#pragma once

// One poll of every GPU's NVLinks through NVML: per-link state, cumulative throughput
// (nvmlDeviceGetFieldValues fields 138-141, per link and summed), the DL error counters
// (nvmlDeviceGetNvLinkErrorCounter: replay, recovery, CRC flit/data, ECC) and, on Blackwell where
// those are unsupported, the NVLink5 counter fields 201-222. Whatever a GPU answers NOT_SUPPORTED
// is remembered and not asked again; a GPU that is lost (GPU_IS_LOST) is reported and the GPUs are
// enumerated again at the next poll.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rdma/nvml/nvml_abi.h"
#include "rdma/nvml/nvml_library.h"

namespace ncclscope::rdma::nvml {

// The field-value counters read per link, in this order.
inline constexpr std::array<unsigned, 22> kLinkFields = {
    field::kThroughputDataTx,
    field::kThroughputDataRx,
    field::kThroughputRawTx,
    field::kThroughputRawRx,
    field::kCountXmitPackets,
    field::kCountXmitBytes,
    field::kCountRcvPackets,
    field::kCountRcvBytes,
    field::kCountMalformedPacketErrors,
    field::kCountBufferOverrunErrors,
    field::kCountRcvErrors,
    field::kCountRcvRemoteErrors,
    field::kCountRcvGeneralErrors,
    field::kCountLocalLinkIntegrityErrors,
    field::kCountXmitDiscards,
    field::kCountLinkRecoverySuccessfulEvents,
    field::kCountLinkRecoveryFailedEvents,
    field::kCountLinkRecoveryEvents,
    field::kCountEffectiveErrors,
    field::kCountEffectiveBer,
    field::kCountSymbolErrors,
    field::kCountSymbolBer,
};
// Fields also read with scopeId UINT_MAX (the GPU's sum over links).
inline constexpr std::array<unsigned, 4> kGpuFields = {
    field::kThroughputDataTx, field::kThroughputDataRx, field::kThroughputRawTx,
    field::kThroughputRawRx};
inline constexpr std::size_t kErrorCounters = 5;  // NvLinkErrorCounter kReplay..kEccData

struct LinkReading {
  unsigned link = 0;
  std::optional<bool> active;
  std::array<std::optional<std::uint64_t>, kErrorCounters> errors{};  // by NvLinkErrorCounter
  std::array<std::optional<std::uint64_t>, kLinkFields.size()> fields{};
};

struct GpuReading {
  unsigned index = 0;
  std::string uuid;
  std::string bus_id;      // Linux form, "0000:18:00.0"
  std::string pci_bus_id;  // NVML's own form, "00000000:18:00.0": dcgm-exporter's pci_bus_id
  std::string name;
  bool lost = false;
  std::vector<LinkReading> links;
  std::array<std::optional<std::uint64_t>, kGpuFields.size()> totals{};
};

struct NvlinkSnapshot {
  std::vector<GpuReading> gpus;
  std::uint32_t errors = 0;  // unexpected NVML errors this poll
  std::string last_error;
};

// "00000000:18:00.0" (NVML) -> "0000:18:00.0" (Linux sysfs, lower case).
std::string LinuxBusId(const std::string& nvml_bus_id);

class NvlinkReader {
 public:
  explicit NvlinkReader(Library* library) : library_(library) {}
  NvlinkSnapshot Poll();

 private:
  struct Gpu {
    Device handle = nullptr;
    unsigned index = 0;
    std::string uuid, bus_id, pci_bus_id, name;
    unsigned link_count = 0;
    // Per link and counter: false once NVML said NOT_SUPPORTED.
    std::vector<std::array<bool, kErrorCounters>> error_supported;
    // The field requests still worth making (unsupported ones dropped after the first answer).
    std::vector<FieldValue> requests;
  };
  bool Discover(NvlinkSnapshot* snapshot);
  void Note(NvlinkSnapshot* snapshot, const char* what, Return code);
  // Poll()'s steps for one GPU: its links' state and error counters one link at a time, then its
  // field values (throughput, NVLink5 errors) in one call. A lost GPU stops the reading.
  GpuReading ReadGpu(Gpu& gpu, NvlinkSnapshot* snapshot);
  void ReadLink(Gpu& gpu, unsigned link, GpuReading* reading, NvlinkSnapshot* snapshot);
  void ReadFields(Gpu& gpu, GpuReading* reading, NvlinkSnapshot* snapshot);

  Library* library_;
  std::vector<Gpu> gpus_;
  bool discovered_ = false;
};

}  // namespace ncclscope::rdma::nvml
