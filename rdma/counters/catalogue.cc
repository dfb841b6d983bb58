#include "rdma/counters/catalogue.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace ncclscope::rdma::counters {
namespace {

using sysfs::CounterGroup;
constexpr CounterGroup kPma = CounterGroup::kCounters;
constexpr CounterGroup kExt = CounterGroup::kCountersExt;
constexpr CounterGroup kHw = CounterGroup::kHwCounters;
constexpr Behavior kSat = Behavior::kSaturating;
constexpr Behavior kData = Behavior::kData;
constexpr Behavior kQ = Behavior::kWrapOrClamp32;
constexpr Behavior k64 = Behavior::kPlain64;

#define NCCLSCOPE_IB(name) "ncclscope_infiniband_" name

constexpr CounterInfo kCatalogue[] = {
    // ---- counters/: IBA PortCounters and PortCountersExtended (one PMA MAD per read) ----
    {kPma, "port_xmit_data", NCCLSCOPE_IB("port_data_transmitted_bytes_total"),
     "Data octets transmitted on all VLs (port_xmit_data counts 4-byte words; multiplied by 4).",
     kData, 64, 4},
    {kPma, "port_rcv_data", NCCLSCOPE_IB("port_data_received_bytes_total"),
     "Data octets received on all VLs (port_rcv_data counts 4-byte words; multiplied by 4).", kData,
     64, 4},
    {kPma, "port_xmit_packets", NCCLSCOPE_IB("port_packets_transmitted_total"),
     "Packets transmitted on all VLs, including errored ones.", kData, 64, 1},
    {kPma, "port_rcv_packets", NCCLSCOPE_IB("port_packets_received_total"),
     "Packets received on all VLs, including errored ones.", kData, 64, 1},
    {kPma, "unicast_xmit_packets", NCCLSCOPE_IB("unicast_packets_transmitted_total"),
     "Unicast packets transmitted.", kData, 64, 1},
    {kPma, "unicast_rcv_packets", NCCLSCOPE_IB("unicast_packets_received_total"),
     "Unicast packets received.", kData, 64, 1},
    {kPma, "multicast_xmit_packets", NCCLSCOPE_IB("multicast_packets_transmitted_total"),
     "Multicast packets transmitted.", kData, 64, 1},
    {kPma, "multicast_rcv_packets", NCCLSCOPE_IB("multicast_packets_received_total"),
     "Multicast packets received.", kData, 64, 1},
    {kPma, "symbol_error", NCCLSCOPE_IB("symbol_error_total"),
     "Minor link errors on one or more physical lanes (16-bit, saturates).", kSat, 16, 1},
    {kPma, "link_error_recovery", NCCLSCOPE_IB("link_error_recovery_total"),
     "Successful link error recoveries (retrains) (8-bit, saturates).", kSat, 8, 1},
    {kPma, "link_downed", NCCLSCOPE_IB("link_downed_total"),
     "Failed link error recoveries that took the link down (8-bit, saturates).", kSat, 8, 1},
    {kPma, "port_rcv_errors", NCCLSCOPE_IB("port_errors_received_total"),
     "Received packets with errors (16-bit, saturates).", kSat, 16, 1},
    {kPma, "port_rcv_remote_physical_errors",
     NCCLSCOPE_IB("port_receive_remote_physical_errors_total"),
     "Received packets marked bad by the sender side (EBP) (16-bit, saturates).", kSat, 16, 1},
    {kPma, "port_rcv_switch_relay_errors", NCCLSCOPE_IB("port_receive_switch_relay_errors_total"),
     "Received packets discarded because they could not be forwarded (16-bit, saturates).", kSat,
     16, 1},
    {kPma, "port_xmit_discards", NCCLSCOPE_IB("port_discards_transmitted_total"),
     "Outbound packets discarded because the port was down or congested (16-bit, saturates).", kSat,
     16, 1},
    {kPma, "port_rcv_discards", NCCLSCOPE_IB("port_discards_received_total"),
     "Inbound packets discarded by the port (driver-specific; 16-bit, saturates).", kSat, 16, 1},
    {kPma, "port_xmit_constraint_errors", NCCLSCOPE_IB("port_constraint_errors_transmitted_total"),
     "Packets not transmitted because of partition or raw filtering (8-bit, saturates).", kSat, 8,
     1},
    {kPma, "port_rcv_constraint_errors", NCCLSCOPE_IB("port_constraint_errors_received_total"),
     "Received packets discarded by partition or raw filtering (8-bit, saturates).", kSat, 8, 1},
    {kPma, "local_link_integrity_errors", NCCLSCOPE_IB("local_link_integrity_errors_total"),
     "Times local physical errors exceeded the LocalPhyErrors threshold (4-bit, saturates).", kSat,
     4, 1},
    {kPma, "excessive_buffer_overrun_errors", NCCLSCOPE_IB("excessive_buffer_overrun_errors_total"),
     "Times consecutive flow-control periods each had a buffer overrun (4-bit, saturates).", kSat,
     4, 1},
    {kPma, "VL15_dropped", NCCLSCOPE_IB("vl15_dropped_total"),
     "Incoming VL15 (subnet management) packets dropped (16-bit, saturates).", kSat, 16, 1},
    {kPma, "port_xmit_wait", NCCLSCOPE_IB("port_transmit_wait_total"),
     "Ticks in which the port had data to send but sent none: the IB congestion signal (32-bit, "
     "saturates; tick length is hardware-specific).",
     kSat, 32, 1},

    // ---- counters_ext/: kernels before 4.5 ----
    {kExt, "port_xmit_data_64", NCCLSCOPE_IB("legacy_data_transmitted_bytes_total"),
     "Data octets transmitted (counters_ext, pre-4.5 kernels; 4-byte words multiplied by 4).",
     kData, 64, 4},
    {kExt, "port_rcv_data_64", NCCLSCOPE_IB("legacy_data_received_bytes_total"),
     "Data octets received (counters_ext, pre-4.5 kernels; 4-byte words multiplied by 4).", kData,
     64, 4},
    {kExt, "port_xmit_packets_64", NCCLSCOPE_IB("legacy_packets_transmitted_total"),
     "Packets transmitted (counters_ext).", kData, 64, 1},
    {kExt, "port_rcv_packets_64", NCCLSCOPE_IB("legacy_packets_received_total"),
     "Packets received (counters_ext).", kData, 64, 1},
    {kExt, "port_unicast_xmit_packets", NCCLSCOPE_IB("legacy_unicast_packets_transmitted_total"),
     "Unicast packets transmitted (counters_ext).", kData, 64, 1},
    {kExt, "port_unicast_rcv_packets", NCCLSCOPE_IB("legacy_unicast_packets_received_total"),
     "Unicast packets received (counters_ext).", kData, 64, 1},
    {kExt, "port_multicast_xmit_packets",
     NCCLSCOPE_IB("legacy_multicast_packets_transmitted_total"),
     "Multicast packets transmitted (counters_ext).", kData, 64, 1},
    {kExt, "port_multicast_rcv_packets", NCCLSCOPE_IB("legacy_multicast_packets_received_total"),
     "Multicast packets received (counters_ext).", kData, 64, 1},

    // ---- hw_counters/: mlx5 Q counters (32-bit) ----
    {kHw, "duplicate_request", NCCLSCOPE_IB("duplicate_requests_packets_total"),
     "Received duplicate (already executed) requests: retransmissions seen by the responder.", kQ,
     32, 1},
    {kHw, "implied_nak_seq_err", NCCLSCOPE_IB("implied_nak_seq_errors_total"),
     "ACKs with a PSN larger than expected for an RDMA read or response (loss).", kQ, 32, 1},
    {kHw, "local_ack_timeout_err", NCCLSCOPE_IB("local_ack_timeout_errors_total"),
     "Times the QP ACK timer expired on the sender; retry limit not exceeded.", kQ, 32, 1},
    {kHw, "out_of_buffer", NCCLSCOPE_IB("out_of_buffer_drops_total"),
     "Packets dropped because the receive queue had no posted buffer.", kQ, 32, 1},
    {kHw, "out_of_sequence", NCCLSCOPE_IB("out_of_sequence_packets_received_total"),
     "Out-of-sequence packets received (loss or reordering).", kQ, 32, 1},
    {kHw, "packet_seq_err", NCCLSCOPE_IB("packet_sequence_errors_total"),
     "Received NAK sequence-error packets; retry limit not exceeded.", kQ, 32, 1},
    {kHw, "req_cqe_error", NCCLSCOPE_IB("req_cqes_errors_total"),
     "Requester completions with error.", kQ, 32, 1},
    {kHw, "req_cqe_flush_error", NCCLSCOPE_IB("req_cqes_flush_errors_total"),
     "Requester completions flushed with error (follow any QP error).", kQ, 32, 1},
    {kHw, "req_remote_access_errors", NCCLSCOPE_IB("req_remote_access_errors_total"),
     "Requester saw remote access errors.", kQ, 32, 1},
    {kHw, "req_remote_invalid_request", NCCLSCOPE_IB("req_remote_invalid_request_errors_total"),
     "Requester saw remote invalid request errors.", kQ, 32, 1},
    {kHw, "resp_cqe_error", NCCLSCOPE_IB("resp_cqes_errors_total"),
     "Responder completions with error.", kQ, 32, 1},
    {kHw, "resp_cqe_flush_error", NCCLSCOPE_IB("resp_cqes_flush_errors_total"),
     "Responder completions flushed with error.", kQ, 32, 1},
    {kHw, "resp_local_length_error", NCCLSCOPE_IB("resp_local_length_errors_total"),
     "Responder detected local length errors.", kQ, 32, 1},
    {kHw, "resp_remote_access_errors", NCCLSCOPE_IB("resp_remote_access_errors_total"),
     "Responder detected remote access errors.", kQ, 32, 1},
    {kHw, "rnr_nak_retry_err", NCCLSCOPE_IB("rnr_nak_retry_packets_received_total"),
     "Received RNR NAK packets; the QP retry limit was NOT exceeded.", kQ, 32, 1},
    {kHw, "req_transport_retries_exceeded", NCCLSCOPE_IB("req_transport_retries_exceeded_total"),
     "Transport retries exhausted: the QP went to error (fatal for the job).", kQ, 32, 1},
    {kHw, "req_rnr_retries_exceeded", NCCLSCOPE_IB("req_rnr_retries_exceeded_total"),
     "RNR retries exhausted: the QP went to error (fatal for the job).", kQ, 32, 1},
    {kHw, "roce_adp_retrans", NCCLSCOPE_IB("roce_adp_retransmits_total"),
     "RoCE adaptive retransmissions.", kQ, 32, 1},
    {kHw, "roce_adp_retrans_to", NCCLSCOPE_IB("roce_adp_retransmits_timeout_total"),
     "RoCE adaptive retransmission timeouts.", kQ, 32, 1},
    {kHw, "roce_slow_restart", NCCLSCOPE_IB("roce_slow_restart_used_total"),
     "Times RoCE slow restart was used.", kQ, 32, 1},
    {kHw, "roce_slow_restart_cnps", NCCLSCOPE_IB("roce_slow_restart_cnps_total"),
     "CNPs generated by RoCE slow restart.", kQ, 32, 1},
    {kHw, "roce_slow_restart_trans", NCCLSCOPE_IB("roce_slow_restart_total"),
     "Times RoCE slow restart changed state to slow restart.", kQ, 32, 1},
    {kHw, "rx_atomic_requests", NCCLSCOPE_IB("rx_atomic_requests_total"),
     "Atomic requests received by the responder.", kQ, 32, 1},
    {kHw, "rx_dct_connect", NCCLSCOPE_IB("rx_dct_connect_requests_total"),
     "DCT connect requests received.", kQ, 32, 1},
    {kHw, "rx_read_requests", NCCLSCOPE_IB("rx_read_requests_total"),
     "RDMA read requests received by the responder.", kQ, 32, 1},
    {kHw, "rx_write_requests", NCCLSCOPE_IB("rx_write_requests_total"),
     "RDMA write requests received by the responder.", kQ, 32, 1},

    // ---- hw_counters/: mlx5 congestion and optional counters (64-bit) ----
    {kHw, "rp_cnp_handled", NCCLSCOPE_IB("rp_cnp_packets_handled_total"),
     "CNPs handled by the reaction point: the sender was throttled by DCQCN.", k64, 64, 1},
    {kHw, "rp_cnp_ignored", NCCLSCOPE_IB("rp_cnp_ignored_packets_received_total"),
     "CNPs received and ignored: should not rise when RoCE congestion control is enabled.", k64, 64,
     1},
    {kHw, "np_cnp_sent", NCCLSCOPE_IB("np_cnp_packets_sent_total"),
     "CNPs sent by the notification point in response to ECN marks.", k64, 64, 1},
    {kHw, "np_ecn_marked_roce_packets", NCCLSCOPE_IB("np_ecn_marked_roce_packets_received_total"),
     "RoCEv2 packets received with ECN congestion-experienced marks.", k64, 64, 1},
    {kHw, "rx_icrc_encapsulated", NCCLSCOPE_IB("rx_icrc_encapsulated_errors_total"),
     "RoCE packets received with ICRC errors.", k64, 64, 1},
    {kHw, "cc_rx_ce_pkts", NCCLSCOPE_IB("cc_ce_packets_received_total"),
     "Packets received with congestion-experienced marks (optional counter).", k64, 64, 1},
    {kHw, "cc_rx_cnp_pkts", NCCLSCOPE_IB("cc_cnp_packets_received_total"),
     "CNPs received (optional counter).", k64, 64, 1},
    {kHw, "cc_tx_cnp_pkts", NCCLSCOPE_IB("cc_cnp_packets_transmitted_total"),
     "CNPs transmitted (optional counter).", k64, 64, 1},
    {kHw, "rdma_tx_packets", NCCLSCOPE_IB("rdma_packets_transmitted_total"),
     "RDMA packets transmitted (optional counter).", k64, 64, 1},
    {kHw, "rdma_tx_bytes", NCCLSCOPE_IB("rdma_transmitted_bytes_total"),
     "RDMA bytes transmitted (optional counter).", k64, 64, 1},
    {kHw, "rdma_rx_packets", NCCLSCOPE_IB("rdma_packets_received_total"),
     "RDMA packets received (optional counter).", k64, 64, 1},
    {kHw, "rdma_rx_bytes", NCCLSCOPE_IB("rdma_received_bytes_total"),
     "RDMA bytes received (optional counter).", k64, 64, 1},
    {kHw, "lifespan", NCCLSCOPE_IB("lifespan_seconds"),
     "Seconds between hardware refreshes of the port's hw_counters.", Behavior::kGauge, 64, 0.001},
};

#undef NCCLSCOPE_IB

}  // namespace

std::span<const CounterInfo> Catalogue() { return kCatalogue; }

bool IsPacketCounter(const CounterInfo& info) {
  static constexpr std::string_view kFiles[] = {"port_xmit_packets",
                                                "port_rcv_packets",
                                                "unicast_xmit_packets",
                                                "unicast_rcv_packets",
                                                "multicast_xmit_packets",
                                                "multicast_rcv_packets",
                                                "VL15_dropped",
                                                "port_xmit_packets_64",
                                                "port_rcv_packets_64",
                                                "port_unicast_xmit_packets",
                                                "port_unicast_rcv_packets",
                                                "port_multicast_xmit_packets",
                                                "port_multicast_rcv_packets"};
  if (info.group == CounterGroup::kHwCounters) return false;
  return std::find(std::begin(kFiles), std::end(kFiles), info.file) != std::end(kFiles);
}

const CounterInfo* Lookup(sysfs::CounterGroup group, std::string_view file) {
  for (const CounterInfo& info : kCatalogue) {
    if (info.group == group && info.file == file) return &info;
  }
  return nullptr;
}

std::uint64_t SaturationValue(Behavior behavior, unsigned width_bits) {
  switch (behavior) {
    case Behavior::kSaturating:
      return width_bits >= 64 ? std::numeric_limits<std::uint64_t>::max()
                              : (std::uint64_t{1} << width_bits) - 1;
    case Behavior::kWrapOrClamp32:
      return 0xFFFFFFFFu;
    case Behavior::kData:
    case Behavior::kPlain64:
    case Behavior::kGauge:
      return std::numeric_limits<std::uint64_t>::max();
  }
  return std::numeric_limits<std::uint64_t>::max();
}

}  // namespace ncclscope::rdma::counters
