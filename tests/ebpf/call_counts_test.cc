// The BPF programs' per-process call counts through their slots (bpf/probes.bpf.c, call_counts.h),
// in this process: the agent's programs attached to the fake NCCL that this test dlopens and calls.
// A key's slot freed by the agent (as after folding an exited process) must not be written through
// a thread's cached copy of it: the generation check sends the thread back to the slot map.

#include "agent/ebpf/call_counts.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/ebpf/attach/bpf_attacher.h"
#include "agent/ebpf/bpf_objects.h"
#include "agent/ebpf/functions.h"

namespace ncclscope::ebpf {
namespace {

using AllReduce = int (*)(const void*, void*, std::size_t, int, int, void*, void*);

class CallCountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (loads and attaches BPF programs)";
    std::string error;
    objects_ = BpfObjects::Load(&error);
    ASSERT_NE(objects_, nullptr) << error;
    lib_ = dlopen(NCCLSCOPE_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    all_reduce_ = reinterpret_cast<AllReduce>(dlsym(lib_, "ncclAllReduce"));
    ASSERT_NE(all_reduce_, nullptr);
    attacher_ =
        std::make_unique<BpfAttacher>(objects_->entry_program(), objects_->return_program());
    proc::OpenedFile file;
    file.fd = UniqueFd(open(NCCLSCOPE_FAKE_NCCL, O_RDONLY | O_CLOEXEC));
    std::vector<std::string> missing;
    attached_ =
        attacher_->Attach(file, Library::kNccl, {FindFunction("ncclAllReduce")}, &missing, &error);
    ASSERT_NE(attached_, nullptr) << error;
  }
  void TearDown() override {
    attached_.reset();
    if (lib_ != nullptr) dlclose(lib_);
  }

  void Call(int times) {
    char a[8], b[8];
    for (int i = 0; i < times; ++i) all_reduce_(a, b, 4, /*ncclFloat32=*/7, 0, nullptr, nullptr);
  }
  // This process's (key, counts) pairs.
  std::vector<std::pair<ncclscope_proc_key, ncclscope_call_counts>> Mine() const {
    std::vector<std::pair<ncclscope_proc_key, ncclscope_call_counts>> mine;
    objects_->calls().ForEach([&](const ncclscope_proc_key& key, const ncclscope_call_counts& c) {
      if (key.tgid == static_cast<std::uint32_t>(getpid())) mine.emplace_back(key, c);
    });
    return mine;
  }

  std::unique_ptr<BpfObjects> objects_;
  void* lib_ = nullptr;
  AllReduce all_reduce_ = nullptr;
  std::unique_ptr<BpfAttacher> attacher_;
  std::unique_ptr<AttachedFile> attached_;
};

TEST_F(CallCountsTest, CallsAndBytesAreCountedPerProcessAndOp) {
  Call(5);
  const auto mine = Mine();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].first.op, static_cast<std::uint32_t>(NCCLSCOPE_OP_ALL_REDUCE));
  EXPECT_EQ(mine[0].second.calls, 5u);
  EXPECT_EQ(mine[0].second.bytes, 5u * 4 * 4);  // 4 x float32 each
}

TEST_F(CallCountsTest, AFreedSlotIsNotWrittenThroughAThreadsCachedCopy) {
  Call(3);
  auto mine = Mine();
  ASSERT_EQ(mine.size(), 1u);
  ASSERT_EQ(mine[0].second.calls, 3u);
  // The agent folds and frees the key (here while this thread still caches its slot).
  objects_->calls().Delete(mine[0].first);
  EXPECT_TRUE(Mine().empty());
  // The next calls find the slot's generation changed and take a slot again: counted from zero
  // under the same key, not into the freed slot where no key would ever read them.
  Call(2);
  mine = Mine();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].second.calls, 2u);
  EXPECT_EQ(mine[0].second.bytes, 2u * 4 * 4);
}

}  // namespace
}  // namespace ncclscope::ebpf
