// libibverbs enumeration: the code -> name decoding, the inventory over a canned API, and the
// real library on this host (no HCA): it must find nothing, cleanly.

#include <gtest/gtest.h>

#include "rdma/verbs/verbs_inventory.h"

namespace ncclscope::rdma::verbs {
namespace {

class CannedVerbs : public VerbsApi {
 public:
  int ListDevices(std::vector<DeviceAttr>* devices) override {
    *devices = devices_;
    return error_;
  }
  std::vector<DeviceAttr> devices_;
  int error_ = 0;
};

TEST(VerbsTest, DecodesPortAttributes) {
  PortAttr ndr{1, 4, 5, 2, 128, 1};
  Port port = Decode(ndr);
  EXPECT_EQ(port.state, 4);
  EXPECT_EQ(port.phys_state, 5);
  EXPECT_EQ(port.width, "4X");
  EXPECT_EQ(port.speed, "NDR");
  EXPECT_DOUBLE_EQ(port.gbps, 400);
  EXPECT_EQ(port.link_layer, "InfiniBand");

  Port hdr100 = Decode({1, 4, 5, 16, 64, 1});
  EXPECT_EQ(hdr100.width, "2X");
  EXPECT_DOUBLE_EQ(hdr100.gbps, 100);
  Port roce = Decode({1, 4, 5, 2, 32, 2});
  EXPECT_EQ(roce.link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(roce.gbps, 100);  // 4X EDR
  Port fdr = Decode({1, 4, 5, 2, 16, 1});
  EXPECT_DOUBLE_EQ(fdr.gbps, 56);  // nominal, as the kernel prints it
  Port unknown = Decode({1, 1, 2, 0, 0, 0});
  EXPECT_EQ(unknown.width, "");
  EXPECT_EQ(unknown.link_layer, "Unknown");
}

TEST(VerbsTest, InventoryFindsPortsByDeviceAndNumber) {
  CannedVerbs api;
  api.devices_ = {{"mlx5_0", {{1, 4, 5, 2, 128, 1}, {2, 1, 2, 2, 128, 1}}}, {"mlx5_1", {}}};
  VerbsInventory inventory;
  inventory.Refresh(api);
  EXPECT_EQ(inventory.device_count(), 2u);
  ASSERT_NE(inventory.Find("mlx5_0", 2), nullptr);
  EXPECT_EQ(inventory.Find("mlx5_0", 2)->state, 1);
  EXPECT_EQ(inventory.Find("mlx5_0", 3), nullptr);
  EXPECT_EQ(inventory.Find("mlx5_9", 1), nullptr);
  api.error_ = 38;  // ENOSYS
  api.devices_.clear();
  inventory.Refresh(api);
  EXPECT_EQ(inventory.error(), 38);
  EXPECT_EQ(inventory.device_count(), 0u);
}

TEST(VerbsTest, RealLibibverbsWithoutDevicesDegradesCleanly) {
  LibibverbsApi api;
  VerbsInventory inventory;
  inventory.Refresh(api);  // must not crash, hang or throw on a host without HCAs
  if (inventory.device_count() > 0) {
    GTEST_SKIP() << "this host has RDMA devices; the no-device path is not exercised";
  }
  EXPECT_EQ(inventory.Find("mlx5_0", 1), nullptr);
}

}  // namespace
}  // namespace ncclscope::rdma::verbs
