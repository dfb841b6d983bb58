#pragma once

// Algorithm and bus bandwidth of one operation, the way nccl-tests defines them
// (doc/PERFORMANCE.md; shared/reference/nccl-profiler-semantics.md §6):
//   algbw = S / t            S: the bytes the operation is about (below), t: its GPU time
//   busbw = algbw x factor   factor: what each rank's links carry relative to S, so that busbw is
//                            comparable with the hardware's link bandwidth whatever nranks is.
//
//   func                          S (from the record's per-rank bytes b)   factor
//   AllReduce                     b                                          2(n-1)/n
//   AllGather(V), ReduceScatter   b x n (NCCL's count is per rank)           (n-1)/n
//   Broadcast, Reduce             b                                          1
//   AlltoAll, Gather, Scatter     b x n (copy-engine path: count per peer)   (n-1)/n
//   Send, Recv (p2p)              b                                          1
// Anything else (signals, unknown functions) has no model: S = 0.

#include <cstdint>

namespace ncclscope::analytics {

struct BandwidthModel {
  double algo_bytes = 0;  // S
  double bus_factor = 0;  // busbw / algbw
  double bus_bytes() const { return algo_bytes * bus_factor; }
};

// `func` is an enum ncclscope_func code, `bytes` the record's bytes, `nranks` the communicator's
// size (<= 0: unknown, no model).
BandwidthModel ModelFor(std::uint8_t func, std::uint64_t bytes, std::int32_t nranks);

}  // namespace ncclscope::analytics
