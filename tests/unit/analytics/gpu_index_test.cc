// dcgm-exporter's `gpu` index: the rank of a GPU's PCI address among the nvidia driver's devices.

#include "agent/analytics/gpu_index.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/temp_dir.h"

namespace ncclscope::analytics {
namespace {

TEST(GpuIndexTest, ParsesCudaAndNvmlSpellings) {
  const auto a = ParsePciAddress("0000:3b:00.0");
  const auto b = ParsePciAddress("00000000:3B:00.0");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(std::get<1>(*a), 0x3bu);
  EXPECT_FALSE(ParsePciAddress("module"));
  EXPECT_FALSE(ParsePciAddress("0000:3g:00.0"));
  EXPECT_FALSE(ParsePciAddress("0000:3b"));
}

// dcgm-exporter's pci_bus_id is NVML's busId: what the CUDA driver spells "0000:3b:00.0" must be
// rendered "00000000:3B:00.0" for a join on it to match.
TEST(GpuIndexTest, DcgmPciBusIdIsNvmlsSpelling) {
  EXPECT_EQ(DcgmPciBusId("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(DcgmPciBusId("0000:3B:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(DcgmPciBusId("00000000:3B:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(DcgmPciBusId("0001:c1:1f.7"), "00000001:C1:1F.7");
  EXPECT_EQ(DcgmPciBusId(""), "");
  EXPECT_EQ(DcgmPciBusId("not-a-bus-id"), "not-a-bus-id");
}

TEST(GpuIndexTest, IndexIsThePositionInPciOrderOfTheDriversDevices) {
  testing::TempDir sysfs;
  const std::string dir = sysfs.path() + "/bus/pci/drivers/nvidia";
  ASSERT_EQ(::mkdir((sysfs.path() + "/bus").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((sysfs.path() + "/bus/pci").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((sysfs.path() + "/bus/pci/drivers").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // The driver directory also holds files that are not devices.
  for (const char* entry : {"0000:c1:00.0", "0000:1b:00.0", "0000:9a:00.0", "module", "bind"}) {
    ASSERT_EQ(::mkdir((dir + "/" + entry).c_str(), 0755), 0);
  }
  GpuIndex index(sysfs.path());
  EXPECT_EQ(index.Lookup("0000:1B:00.0"), 0);
  EXPECT_EQ(index.Lookup("00000000:9A:00.0"), 1);
  EXPECT_EQ(index.Lookup("0000:c1:00.0"), 2);
  EXPECT_EQ(index.Lookup("0000:42:00.0"), std::nullopt);
  EXPECT_EQ(index.Lookup(""), std::nullopt);
  GpuIndex none(sysfs.path() + "/missing");
  EXPECT_EQ(none.Lookup("0000:1b:00.0"), std::nullopt);
}

}  // namespace
}  // namespace ncclscope::analytics
