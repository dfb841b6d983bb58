#pragma once

// Reads the plugin's rings in a directory with the agent's own reader (agent/profiler) and keeps
// every record, for tests that check what the plugin wrote.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/profiler/ring_directory.h"
#include "agent/profiler/ring_file.h"

namespace ncclscope::testing {

class RingRecords : public profiler::RecordSink {
 public:
  explicit RingRecords(std::string dir) : directory_(std::move(dir)) {}

  // One pass over the directory (drains, and reclaims rings of exited processes).
  void Poll();
  // Polls every 10 ms until `done` holds; false on timeout.
  bool PollUntil(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

  std::vector<profiler::OpView> OpsOf(std::uint64_t comm_id) const;
  std::vector<ncclscope_proxy_op_record> ProxyOpsOf(std::uint64_t comm_id) const;
  std::size_t CountOps(std::uint64_t comm_id) const;

  std::vector<profiler::OpView> ops;
  std::vector<ncclscope_proxy_op_record> proxy_ops;
  std::vector<profiler::OpCounts> counts;
  std::vector<ncclscope_comm_init_record> inits;
  std::vector<ncclscope_comm_finalize_record> finalizes;
  std::vector<profiler::RingOrigin> origins;

  profiler::RingDirectory& directory() { return directory_; }
  const profiler::DirectorySnapshot& snapshot() const { return directory_.snapshot(); }

  void OnCommInit(const profiler::RingOrigin& origin,
                  const ncclscope_comm_init_record& record) override;
  void OnCommFinalize(const profiler::RingOrigin& origin,
                      const ncclscope_comm_finalize_record& record) override;
  void OnOp(const profiler::RingOrigin& origin, const profiler::OpView& op) override;
  void OnProxyOp(const profiler::RingOrigin& origin,
                 const ncclscope_proxy_op_record& record) override;
  void OnOpCounts(const profiler::RingOrigin& origin, const profiler::OpCounts& counts) override;
  // Every op the plugin counted for the communicator rank (its latest counts, summed over keys).
  std::uint64_t CountedOps(std::uint64_t comm_id, std::int32_t rank) const;

 private:
  profiler::RingDirectory directory_;
};

// The path of the one ring file in `dir` ("" when there is none or several).
std::string OnlyRing(const std::string& dir);

// Waits until `dir` holds one ring file (or `stop` is set) and opens it, as the agent would to
// write controls; nullptr with `reason` when it cannot.
std::unique_ptr<profiler::RingFile> OpenOnlyRing(const std::string& dir,
                                                 const std::atomic<bool>& stop,
                                                 std::string* reason);

}  // namespace ncclscope::testing
