#include "agent/rdma/health_config.h"

namespace ncclscope::rdma {

health::Threshold ThresholdOf(const config::CounterThreshold& threshold) {
  return {threshold.increase, threshold.window.value(), threshold.severity};
}

std::vector<health::ThresholdSpec> ThresholdSpecs(const config::RdmaThresholdsConfig& t) {
  const std::string pma = "counters/";
  const std::string hw = "hw_counters/";
  const auto spec = [](std::string name, std::vector<std::string> keys, bool only_when_active,
                       const config::CounterThreshold& threshold) {
    return health::ThresholdSpec{std::move(name), std::move(keys), only_when_active,
                                 ThresholdOf(threshold)};
  };
  return {
      spec("symbol_error_burst", {pma + "symbol_error"}, false, t.symbol_error_burst),
      spec("symbol_error_ber", {pma + "symbol_error"}, false, t.symbol_error_ber),
      spec("link_error_recovery", {pma + "link_error_recovery"}, false, t.link_error_recovery),
      spec("link_downed", {pma + "link_downed"}, false, t.link_downed),
      spec("local_link_integrity", {pma + "local_link_integrity_errors"}, false,
           t.local_link_integrity),
      spec("excessive_buffer_overrun", {pma + "excessive_buffer_overrun_errors"}, false,
           t.excessive_buffer_overrun),
      spec("receive_errors", {pma + "port_rcv_errors"}, false, t.receive_errors),
      spec("discards", {pma + "port_xmit_discards", pma + "port_rcv_discards"}, true, t.discards),
      spec("transmit_wait", {pma + "port_xmit_wait"}, false, t.transmit_wait),
      spec("cnp_ignored", {hw + "rp_cnp_ignored"}, false, t.cnp_ignored),
      spec("ecn_marked", {hw + "np_ecn_marked_roce_packets"}, false, t.ecn_marked),
      spec("cnp_handled", {hw + "rp_cnp_handled"}, false, t.cnp_handled),
      spec("out_of_buffer", {hw + "out_of_buffer"}, false, t.out_of_buffer),
      spec("ack_timeouts", {hw + "local_ack_timeout_err"}, false, t.ack_timeouts),
      spec("retries_exceeded",
           {hw + "req_transport_retries_exceeded", hw + "req_rnr_retries_exceeded"}, false,
           t.retries_exceeded),
      spec("roce_slow_restart", {hw + "roce_slow_restart"}, false, t.roce_slow_restart),
  };
}

health::LinkHistoryParams LinkParams(const config::RdmaLinkConfig& link) {
  health::LinkHistoryParams params;
  params.down_after = link.down_after.value();
  params.down_hold = link.down_hold.value();
  params.flap_min_down = link.flap_min_down.value();
  params.flap_episodes = link.flap_episodes;
  params.flap_window = link.flap_window.value();
  return params;
}

}  // namespace ncclscope::rdma
