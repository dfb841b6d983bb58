// NVML through dlopen, against the fake libnvidia-ml.so.1 built from C with NVML's ABI: loading
// and its failures, per-link state, throughput, DL error counters, the NVLink5 field set on a
// Blackwell GPU, unsupported requests not repeated, a lost GPU.

#include <gtest/gtest.h>

#include <cmath>

#include "rdma/nvml/nvlink_reader.h"
#include "rdma/nvml/nvml_library.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/rdma/fake_nvml_control.h"

namespace ncclscope::rdma::nvml {
namespace {

using ncclscope::testing::TempDir;
using rdma::testing::FakeNvmlControl;

std::size_t Slot(unsigned field_id) {
  for (std::size_t i = 0; i < kLinkFields.size(); ++i) {
    if (kLinkFields[i] == field_id) return i;
  }
  ADD_FAILURE() << "no slot for field " << field_id;
  return 0;
}

TEST(NvmlLibraryTest, LoadFailuresSayWhy) {
  std::string error;
  EXPECT_EQ(Library::Open("/nonexistent/libnvidia-ml.so.1", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << error;
  EXPECT_EQ(Library::Open(NCCLSCOPE_FAKE_NVML_INCOMPLETE, &error), nullptr);
  EXPECT_NE(error.find("missing symbol nvmlDeviceGetFieldValues"), std::string::npos) << error;

  TempDir dir;
  FakeNvmlControl fake(dir);
  fake.Write("init 9\n");  // NVML_ERROR_DRIVER_NOT_LOADED
  EXPECT_EQ(Library::Open(NCCLSCOPE_FAKE_NVML, &error), nullptr);
  EXPECT_EQ(error, "nvmlInit_v2: Driver Not Loaded");
  fake.Write("");
  auto library = Library::Open(NCCLSCOPE_FAKE_NVML, &error);
  ASSERT_NE(library, nullptr) << error;
  EXPECT_EQ(library->ErrorString(kErrorGpuIsLost), "GPU is lost");
  const auto shutdowns = fake.Calls("nvmlShutdown");
  library.reset();
  EXPECT_EQ(fake.Calls("nvmlShutdown"), shutdowns + 1);
}

TEST(NvmlLibraryTest, BerDecoding) {
  EXPECT_DOUBLE_EQ(DecodeBer((3u << 8) | 15u), 3e-15);
  EXPECT_DOUBLE_EQ(DecodeBer(0), 0);
  EXPECT_EQ(LinuxBusId("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(LinuxBusId("0000:1b:00.0"), "0000:1b:00.0");
}

TEST(NvlinkReaderTest, HopperLinksThroughputAndErrors) {
  TempDir dir;
  FakeNvmlControl fake(dir);
  fake.Write(
      "gpu 0 GPU-11111111-2222-3333-4444-555555555555 00000000:18:00.0 NVIDIA_H100_80GB_HBM3 4\n"
      "gpu 1 GPU-aaaaaaaa-2222-3333-4444-555555555555 00000000:2A:00.0 NVIDIA_H100_80GB_HBM3 4\n"
      "state 0 2 0\n"
      "error 0 1 0 17\n"  // replay
      "error 0 1 2 3\n"   // CRC flit
      "field 0 0 138 1000\nfield 0 0 139 2000\nfield 0 0 140 1100\nfield 0 0 141 2200\n"
      "field 0 all 138 4000\n");
  std::string error;
  auto library = Library::Open(NCCLSCOPE_FAKE_NVML, &error);
  ASSERT_NE(library, nullptr) << error;
  NvlinkReader reader(library.get());
  const NvlinkSnapshot snapshot = reader.Poll();
  EXPECT_EQ(snapshot.errors, 0u) << snapshot.last_error;
  ASSERT_EQ(snapshot.gpus.size(), 2u);
  const GpuReading& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(gpu.bus_id, "0000:18:00.0");
  EXPECT_EQ(gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(gpu.lost);
  ASSERT_EQ(gpu.links.size(), 4u);
  EXPECT_EQ(gpu.links[0].active, true);
  EXPECT_EQ(gpu.links[2].active, false);
  EXPECT_EQ(gpu.links[1].errors[0], 17u);
  EXPECT_EQ(gpu.links[1].errors[2], 3u);
  EXPECT_EQ(gpu.links[0].errors[0], 0u);  // supported, zero
  EXPECT_EQ(gpu.links[0].fields[Slot(field::kThroughputDataTx)], 1000u);
  EXPECT_EQ(gpu.links[0].fields[Slot(field::kThroughputRawRx)], 2200u);
  EXPECT_FALSE(gpu.links[0].fields[Slot(field::kCountXmitBytes)]);  // NVLink5 only
  EXPECT_EQ(gpu.totals[0], 4000u);

  // Unsupported fields are dropped after the first answer: only 4 links x 4 supported fields of
  // GPU 0, plus one total, are asked again (GPU 1 has no supported fields at all).
  const auto before = fake.FieldRequests();
  reader.Poll();
  EXPECT_EQ(fake.FieldRequests() - before, 4u + 1u);
}

TEST(NvlinkReaderTest, BlackwellUsesTheNvlink5FieldSet) {
  TempDir dir;
  FakeNvmlControl fake(dir);
  fake.Write(
      "gpu 0 GPU-bbbbbbbb-0000-0000-0000-000000000000 00000000:1B:00.0 NVIDIA_B200 2 blackwell\n"
      "field 0 0 202 123456789\nfield 0 0 204 987654321\n"
      "field 0 1 206 2\nfield 0 1 214 1\nfield 0 1 221 40\nfield 0 1 220 783\n");
  std::string error;
  auto library = Library::Open(NCCLSCOPE_FAKE_NVML, &error);
  ASSERT_NE(library, nullptr) << error;
  NvlinkReader reader(library.get());
  NvlinkSnapshot snapshot = reader.Poll();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  const GpuReading& gpu = snapshot.gpus[0];
  ASSERT_EQ(gpu.links.size(), 2u);
  for (const auto& counter : gpu.links[1].errors) EXPECT_FALSE(counter);  // DL counters gone
  EXPECT_EQ(gpu.links[0].fields[Slot(field::kCountXmitBytes)], 123456789u);
  EXPECT_EQ(gpu.links[1].fields[Slot(field::kCountMalformedPacketErrors)], 2u);
  EXPECT_EQ(gpu.links[1].fields[Slot(field::kCountLinkRecoveryFailedEvents)], 1u);
  EXPECT_EQ(gpu.links[1].fields[Slot(field::kCountEffectiveBer)], 783u);
  EXPECT_DOUBLE_EQ(DecodeBer(783), 3e-15);
  // The unsupported DL counters are not asked again.
  const auto calls = fake.Calls("nvmlDeviceGetNvLinkErrorCounter");
  reader.Poll();
  EXPECT_EQ(fake.Calls("nvmlDeviceGetNvLinkErrorCounter"), calls);
}

TEST(NvlinkReaderTest, LinkCountProbedWithoutTheFieldAndLostGpuRediscovered) {
  TempDir dir;
  FakeNvmlControl fake(dir);
  fake.Write("gpu 0 GPU-c 00000000:18:00.0 GPU 3 nolinkcount\n");
  std::string error;
  auto library = Library::Open(NCCLSCOPE_FAKE_NVML, &error);
  ASSERT_NE(library, nullptr) << error;
  NvlinkReader reader(library.get());
  NvlinkSnapshot snapshot = reader.Poll();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].links.size(), 3u);

  fake.Write("gpu 0 GPU-c 00000000:18:00.0 GPU 3 nolinkcount lost\n");
  snapshot = reader.Poll();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_TRUE(snapshot.gpus[0].lost);
  snapshot = reader.Poll();  // rediscovered: still lost, reported without a handle
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_TRUE(snapshot.gpus[0].lost);
  fake.Write("gpu 0 GPU-c 00000000:18:00.0 GPU 3 nolinkcount\n");  // back after a reset
  reader.Poll();
  snapshot = reader.Poll();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_FALSE(snapshot.gpus[0].lost);
  EXPECT_EQ(snapshot.gpus[0].links.size(), 3u);
}

}  // namespace
}  // namespace ncclscope::rdma::nvml
