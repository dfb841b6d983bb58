#pragma once

// Coverage: which NCCL processes on the node load the profiler plugin. The eBPF source sees every
// process that uses NCCL; the plugin holds a flock on its ring for its whole life
// (plugin/ring/ring_writer.h), so a process using NCCL that holds no ring's lock runs without the
// plugin: its ranks, channels and hangs are invisible, only the eBPF call counts cover it.
//
// "Uses NCCL" is a live process with a communicator or an NCCL API call counted by the probes, not
// one that merely maps libnccl: a PyTorch DataLoader worker is forked from the trainer with the
// library mapped but never calls it.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "agent/ebpf/attach/registry.h"
#include "agent/ebpf/attribution.h"

namespace ncclscope::ebpf {

// The host pids holding a ring's lock in `ring_dir`, read through `proc_root`; nullopt when that
// cannot be known (then coverage is not exported). Injected: the ring format is the profiler
// source's (agent/app/sources.cc wires profiler::RingWriterPids).
using RingWriters = std::function<std::optional<std::set<std::int32_t>>(
    const std::string& ring_dir, const std::string& proc_root)>;

// Per pod, how many of its NCCL processes hold no ring (0 for pods whose every NCCL process does:
// the series exists while the pod uses NCCL, so an alert can tell "covered" from "gone").
std::map<PodLabels, std::uint64_t> UncoveredByPod(
    const std::map<ProcessKey, PodLabels>& nccl_processes,
    const std::set<std::int32_t>& ring_writers);

}  // namespace ncclscope::ebpf
