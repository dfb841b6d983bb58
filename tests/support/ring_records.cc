#include "tests/support/ring_records.h"

#include <dirent.h>

#include "tests/support/wait_for.h"

namespace ncclscope::testing {

void RingRecords::Poll() {
  while (directory_.Poll(*this)) {
  }
}

bool RingRecords::PollUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        Poll();
        return done();
      },
      timeout, std::chrono::milliseconds(10));
}

std::vector<profiler::OpView> RingRecords::OpsOf(std::uint64_t comm_id) const {
  std::vector<profiler::OpView> out;
  for (const auto& op : ops) {
    if (op.op.comm_id == comm_id) out.push_back(op);
  }
  return out;
}

std::vector<ncclscope_proxy_op_record> RingRecords::ProxyOpsOf(std::uint64_t comm_id) const {
  std::vector<ncclscope_proxy_op_record> out;
  for (const auto& p : proxy_ops) {
    if (p.comm_id == comm_id) out.push_back(p);
  }
  return out;
}

std::size_t RingRecords::CountOps(std::uint64_t comm_id) const {
  std::size_t n = 0;
  for (const auto& op : ops) n += op.op.comm_id == comm_id ? 1 : 0;
  return n;
}

void RingRecords::OnCommInit(const profiler::RingOrigin& origin,
                             const ncclscope_comm_init_record& record) {
  inits.push_back(record);
  origins.push_back(origin);
}
void RingRecords::OnCommFinalize(const profiler::RingOrigin& /*origin*/,
                                 const ncclscope_comm_finalize_record& record) {
  finalizes.push_back(record);
}
void RingRecords::OnOp(const profiler::RingOrigin& /*origin*/, const profiler::OpView& op) {
  ops.push_back(op);
}
void RingRecords::OnOpCounts(const profiler::RingOrigin& /*origin*/,
                             const profiler::OpCounts& latest) {
  counts.push_back(latest);
}

std::uint64_t RingRecords::CountedOps(std::uint64_t comm_id, std::int32_t rank) const {
  // Delivered every pass as running totals: the latest delivery's sum is the count.
  std::uint64_t total = 0;
  for (const profiler::OpCounts& c : counts) {
    if (c.comm_id != comm_id || c.rank != rank) continue;
    total = 0;
    for (const ncclscope_op_count& e : c.counts) total += e.ops;
  }
  return total;
}

void RingRecords::OnProxyOp(const profiler::RingOrigin& /*origin*/,
                            const ncclscope_proxy_op_record& record) {
  proxy_ops.push_back(record);
}

std::string OnlyRing(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string found;
  int count = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".ring") == 0) {
      found = dir;
      found += "/";
      found += name;
      ++count;
    }
  }
  closedir(d);
  return count == 1 ? found : "";
}

std::unique_ptr<profiler::RingFile> OpenOnlyRing(const std::string& dir,
                                                 const std::atomic<bool>& stop,
                                                 std::string* reason) {
  std::string ring;
  while (ring.empty() && !stop.load()) ring = OnlyRing(dir);
  return profiler::RingFile::Open(ring, reason);
}

}  // namespace ncclscope::testing
