#include "agent/analytics/bus_bandwidth.h"

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::analytics {

BandwidthModel ModelFor(std::uint8_t func, std::uint64_t bytes, std::int32_t nranks) {
  BandwidthModel m;
  if (nranks <= 0) return m;
  const double n = nranks;
  const double b = static_cast<double>(bytes);
  switch (func) {
    case NCCLSCOPE_FUNC_ALL_REDUCE:
      m.algo_bytes = b;
      m.bus_factor = 2 * (n - 1) / n;
      break;
    case NCCLSCOPE_FUNC_ALL_GATHER:
    case NCCLSCOPE_FUNC_ALL_GATHER_V:
    case NCCLSCOPE_FUNC_REDUCE_SCATTER:
    case NCCLSCOPE_FUNC_ALL_TO_ALL:
    case NCCLSCOPE_FUNC_GATHER:
    case NCCLSCOPE_FUNC_SCATTER:
      m.algo_bytes = b * n;
      m.bus_factor = (n - 1) / n;
      break;
    case NCCLSCOPE_FUNC_BROADCAST:
    case NCCLSCOPE_FUNC_REDUCE:
    case NCCLSCOPE_FUNC_SEND:
    case NCCLSCOPE_FUNC_RECV:
    case NCCLSCOPE_FUNC_SEND_RECV:
      m.algo_bytes = b;
      m.bus_factor = 1;
      break;
    default:
      break;
  }
  return m;
}

}  // namespace ncclscope::analytics
