#pragma once

// The node's RDMA queue pairs as the kernel's rdma netlink interface lists them (client
// RDMA_NL_NLDEV, command RDMA_NLDEV_CMD_RES_QP_GET; `rdma resource show qp` from iproute2 is the
// reference consumer, iproute2 rdma/res-qp.c). Each QP comes with the device and port it lives on
// and the task that created it, which is what turns a (process, QP number) pair from NCCL's
// net-plugin events into a physical HCA port.
//
// What the kernel puts in one QP entry (drivers/infiniband/core/nldev.c, fill_res_qp_entry and
// fill_res_name_pid): RDMA_NLDEV_ATTR_PORT_INDEX only once the QP has a port (set when it moves to
// INIT: "In create_qp() port is not set yet"), RDMA_NLDEV_ATTR_RES_LQPN, RDMA_NLDEV_ATTR_RES_PID
// for user QPs as task_pid_vnr() of the creating task, i.e. a thread id in the dumping process's
// pid namespace, left out when that task has exited ("Task is dead and in zombie state"), or
// RDMA_NLDEV_ATTR_RES_KERN_NAME for kernel QPs; then type, state and PSNs. Every message of the
// dump names its device with RDMA_NLDEV_ATTR_DEV_INDEX and RDMA_NLDEV_ATTR_DEV_NAME, the name
// /sys/class/infiniband uses (node_exporter's `device` label).
//
// QpSource is the interface the agent reads QPs through, so the join is testable without an HCA
// (tests inject a table built from netlink messages); netlink_qp_source.h has the kernel's and a
// file replay.

#include <cstdint>
#include <string>
#include <vector>

namespace ncclscope::rdma::netlink {

// Most QP entries one dump keeps; the rest are counted (DumpStats::over_limit).
inline constexpr std::size_t kMaxQpEntries = 1u << 20;

struct QpEntry {
  std::string device;              // RDMA_NLDEV_ATTR_DEV_NAME, e.g. "mlx5_0"
  std::uint32_t device_index = 0;  // RDMA_NLDEV_ATTR_DEV_INDEX
  std::uint32_t port = 0;          // RDMA_NLDEV_ATTR_PORT_INDEX; 0: no port yet (before INIT)
  std::uint32_t lqpn = 0;          // RDMA_NLDEV_ATTR_RES_LQPN, the local QP number
  std::int32_t pid = 0;            // RDMA_NLDEV_ATTR_RES_PID (a task id); 0 when absent
  bool kernel = false;             // RDMA_NLDEV_ATTR_RES_KERN_NAME: a kernel-owned QP
  std::uint8_t type = 0xFF;        // RDMA_NLDEV_ATTR_RES_TYPE (enum ib_qp_type), 0xFF if absent
  std::uint8_t state = 0xFF;       // RDMA_NLDEV_ATTR_RES_STATE (enum ib_qp_state)
};

// What one dump skipped or met, each counted once.
struct DumpStats {
  std::uint64_t messages = 0;            // well-formed messages of the expected type
  std::uint64_t malformed_messages = 0;  // bad length, attributes failing the policy, no device
  std::uint64_t malformed_entries = 0;   // QP entries failing the policy or without LQPN
  std::uint64_t foreign_messages = 0;    // other sequence number, port, sender or type
  std::uint64_t over_limit = 0;          // QP entries beyond kMaxQpEntries
  std::uint64_t device_errors = 0;       // devices whose dump ended in an error (e.g. vanished)

  void Add(const DumpStats& other);
};

enum class DumpStatus {
  kOk,           // every device dumped (qps may be empty)
  kUnsupported,  // no rdma netlink here: NETLINK_RDMA unknown to the kernel (ib_core not loaded)
  kError,        // the exchange failed (socket error, timeout, kernel error for the device list)
};

struct QpDump {
  DumpStatus status = DumpStatus::kError;
  std::string error;  // why, when not kOk
  std::uint32_t devices = 0;
  std::vector<QpEntry> qps;
  DumpStats stats;
};

class QpSource {
 public:
  virtual ~QpSource() = default;
  // One full dump. Never throws; failures are in the status.
  virtual QpDump Dump() = 0;
};

}  // namespace ncclscope::rdma::netlink
