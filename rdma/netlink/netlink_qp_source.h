#pragma once

// Where a QP table comes from: the kernel (NETLINK_RDMA through libnl-3, as rdma-core does), or a
// file of recorded replies (tests, offline replay).
//
// The kernel's QP dump needs a device index (res_get_common_dumpit in
// drivers/infiniband/core/nldev.c rejects a request without RDMA_NLDEV_ATTR_DEV_INDEX), so one
// Dump() is the device list (RDMA_NLDEV_CMD_GET) and then one RDMA_NLDEV_CMD_RES_QP_GET dump per
// device, as iproute2's `rdma resource show qp` does. Cost: the kernel queries every QP it lists
// (fill_res_qp_entry_query calls ib_query_qp, a firmware command on mlx5), so a dump costs one
// command per QP on the node; callers dump only when they meet QPs they do not know, at a bounded
// rate. Devices are those of the agent's network namespace (rdma "exclusive" netns mode hides
// devices moved into pods); PIDs are in the agent's pid namespace.

#include <chrono>
#include <string>

#include "rdma/netlink/qp_table.h"

namespace ncclscope::rdma::netlink {

class NetlinkQpSource : public QpSource {
 public:
  // `timeout` bounds the whole exchange (device list and every device's QPs).
  explicit NetlinkQpSource(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  QpDump Dump() override;

 private:
  std::chrono::milliseconds timeout_;
};

// Replies recorded as raw netlink messages, back to back (what the kernel sends for one or more
// per-device QP dumps, each ended by NLMSG_DONE), read again at every Dump(). A missing or
// unreadable file is an error dump; a file over 64 MiB is cut there.
class FileQpSource : public QpSource {
 public:
  explicit FileQpSource(std::string path);
  QpDump Dump() override;

 private:
  std::string path_;
};

}  // namespace ncclscope::rdma::netlink
