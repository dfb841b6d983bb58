#pragma once

// What each known counter file means: its metric name (node_exporter's node_infiniband_* suffix
// vocabulary under ncclscope_infiniband_, fabric.md 4.1/4.3), unit scale, and how the hardware
// counts (width and what happens at the top), from the kernel's core/sysfs.c and mlx5
// counters.c (fabric.md 1.2, 1.3).

#include <cstdint>
#include <span>
#include <string_view>

#include "rdma/sysfs/layout.h"

namespace ncclscope::rdma::counters {

enum class Behavior : std::uint8_t {
  // IBA PMA error counters: narrow, they stop at all-ones (never wrap). Decrease = reset.
  kSaturating,
  // PMA data/packet counters: 64-bit (PortCountersExtended) or, on the legacy table, 32-bit that
  // clamp at 2^32-1. Decrease = reset.
  kData,
  // mlx5 Q counters: 32-bit; whether they wrap or clamp is unknown (fabric.md 0.3), so both are
  // handled: stuck at 2^32-1 is saturation, a drop from the top half to a small value is a wrap.
  kWrapOrClamp32,
  // 64-bit driver counters. Decrease = reset.
  kPlain64,
  // Not a counter (hw_counters/lifespan, milliseconds).
  kGauge,
};

struct CounterInfo {
  sysfs::CounterGroup group;
  std::string_view file;
  std::string_view metric;  // full metric name
  std::string_view help;
  Behavior behavior;
  std::uint8_t width_bits;  // for saturation; 64 for kData/kPlain64
  double scale;             // exported = raw x scale (port_*_data are 4-byte words)
};

// Every known counter, in export order.
std::span<const CounterInfo> Catalogue();

// Packet counts (all, unicast, multicast; both tables) and VL15 drops: exported only with
// rdma.packet_counters. node_exporter's infiniband collector exports the same files, and no
// shipped rule, dashboard or runbook reads them: 56 series on an 8-port node (docs/metrics.md,
// "Cost").
bool IsPacketCounter(const CounterInfo& info);

// The entry for a file, or null for a file the catalogue does not know.
const CounterInfo* Lookup(sysfs::CounterGroup group, std::string_view file);

// Family for hw_counters files the catalogue does not know (exported only on request).
inline constexpr std::string_view kUnknownHwCounterMetric =
    "ncclscope_infiniband_hw_counters_total";

// The largest value a counter of this kind can hold before it saturates.
std::uint64_t SaturationValue(Behavior behavior, unsigned width_bits);

}  // namespace ncclscope::rdma::counters
