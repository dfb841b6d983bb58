// The nvlink source over the fake NVML: metrics as a scrape shows them, findings over time with a
// ManualClock, and the source's behaviour without NVML.

#include "agent/nvlink/nvlink_source.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "tests/support/temp_dir.h"
#include "tests/unit/rdma/fake_nvml_control.h"
#include "tests/unit/rdma/source_test_util.h"

namespace ncclscope::nvlink {
namespace {

using ncclscope::testing::TempDir;
using rdma::testing::Exposition;
using rdma::testing::FakeNvmlControl;
using rdma::testing::Sample;
using std::chrono::seconds;

constexpr const char* kUuid0 = "GPU-11111111-2222-3333-4444-555555555555";

std::string Hopper(int link2_state, int crc_flit) {
  return std::string("gpu 0 ") + kUuid0 + " 00000000:18:00.0 NVIDIA_H100_80GB_HBM3 4\n" +
         "state 0 2 " + std::to_string(link2_state) + "\n" + "error 0 2 2 " +
         std::to_string(crc_flit) + "\n" + "error 0 1 0 5\n" +
         "field 0 0 138 1000\nfield 0 0 139 2000\nfield 0 all 138 4000\n";
}

struct Fixture {
  TempDir dir;
  FakeNvmlControl fake{dir};
  std::shared_ptr<platform::ManualClock> clock = std::make_shared<platform::ManualClock>();
  NvlinkSource source{{clock}};
  config::NvlinkConfig config;

  Fixture() { config.library = NCCLSCOPE_FAKE_NVML; }
  std::string Poll(std::chrono::seconds step = seconds(10)) {
    clock->Advance(step);
    source.PollOnce();
    return Exposition(source);
  }
};

TEST(NvlinkSourceTest, ExportsLinksThroughputAndErrors) {
  Fixture f;
  f.fake.Write(Hopper(1, 0));
  f.config.expected_links = 4;
  f.config.per_link_metrics = true;
  f.source.Configure(f.config);
  const std::string text = f.Poll();
  EXPECT_TRUE(f.source.Status().up) << f.source.Status().reason;
  const std::string link0 = std::string(R"({gpu="0",UUID=")") + kUuid0 + R"(",nvlink="0"})";
  const std::string link1 = std::string(R"({gpu="0",UUID=")") + kUuid0 + R"(",nvlink="1"})";
  EXPECT_EQ(Sample(text, "ncclscope_nvml_available"), 1);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_link_state" + link0), 1);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_data_transmitted_bytes_total" + link0), 1000.0 * 1024);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_data_received_bytes_total" + link0), 2000.0 * 1024);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_replay_errors_total" + link1), 5);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_crc_flit_errors_total" + link0), 0);
  EXPECT_EQ(
      Sample(text,
             std::string(R"(ncclscope_nvlink_gpu_data_transmitted_bytes_total{gpu="0",UUID=")") +
                 kUuid0 + R"("})"),
      4000.0 * 1024);
  EXPECT_EQ(
      Sample(
          text,
          std::string(R"(ncclscope_nvlink_gpu_info{gpu="0",UUID=")") + kUuid0 +
              R"(",pci_bus_id="00000000:18:00.0",model_name="NVIDIA H100 80GB HBM3",gpu_bus_id="0000:18:00.0"})"),
      1);
  EXPECT_EQ(Sample(text, std::string(R"(ncclscope_nvlink_active_links{gpu="0",UUID=")") + kUuid0 +
                             R"("})"),
            4);
  // A finding is a series only while it holds.
  EXPECT_TRUE(std::isnan(
      Sample(text, std::string(R"(ncclscope_nvlink_finding{gpu="0",UUID=")") + kUuid0 +
                       R"(",nvlink="",finding="links_below_expected",severity="critical"})")));
  EXPECT_EQ(text.find("ncclscope_nvlink_finding{"), std::string::npos) << text;
}

// nvlink.per_link_metrics off (the default): each per-link family is one series per GPU, the
// sum over its links (BER: the worst link), with no link_state, and no throughput sum where NVML
// has the GPU's total; findings still name the link.
TEST(NvlinkSourceTest, PerGpuSeriesByDefault) {
  Fixture f;
  f.fake.Write(Hopper(1, 0) + "error 0 3 0 7\nfield 0 1 138 500\n");
  f.config.expected_links = 4;
  f.source.Configure(f.config);
  std::string text = f.Poll();
  const std::string gpu0 = std::string(R"({gpu="0",UUID=")") + kUuid0 + R"("})";
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_replay_errors_total" + gpu0), 5 + 7);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_crc_flit_errors_total" + gpu0), 0);
  // Throughput: NVML's GPU total where it has one (field 138 here), not the links' sum again;
  // the sum where it has none (139).
  EXPECT_TRUE(std::isnan(Sample(text, "ncclscope_nvlink_data_transmitted_bytes_total" + gpu0)));
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_gpu_data_transmitted_bytes_total" + gpu0),
            4000.0 * 1024);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_data_received_bytes_total" + gpu0), 2000.0 * 1024);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_active_links" + gpu0), 4);
  EXPECT_EQ(text.find("ncclscope_nvlink_link_state"), std::string::npos) << text;
  EXPECT_EQ(text.find("nvlink=\""), std::string::npos) << text;
  f.fake.Write(Hopper(1, 3) + "error 0 3 0 7\nfield 0 1 138 500\n");
  text = f.Poll();
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_crc_flit_errors_total" + gpu0), 3);
  EXPECT_EQ(Sample(text, std::string(R"(ncclscope_nvlink_finding{gpu="0",UUID=")") + kUuid0 +
                             R"(",nvlink="2",finding="link_errors",severity="warning"})"),
            1);
}

TEST(NvlinkSourceTest, InactiveLinkAndErrorsOverTime) {
  Fixture f;
  f.fake.Write(Hopper(1, 0));
  f.config.expected_links = 4;
  f.config.per_link_metrics = true;
  f.source.Configure(f.config);
  f.Poll();
  f.fake.Write(Hopper(0, 3));  // link 2 goes down, with CRC errors
  std::string text = f.Poll();
  const std::string prefix = std::string(R"(ncclscope_nvlink_finding{gpu="0",UUID=")") + kUuid0;
  EXPECT_EQ(Sample(text, prefix + R"(",nvlink="2",finding="link_errors",severity="warning"})"), 1);
  EXPECT_TRUE(std::isnan(
      Sample(text, prefix + R"(",nvlink="2",finding="link_inactive",severity="critical"})")));
  EXPECT_EQ(
      Sample(text, prefix + R"(",nvlink="",finding="links_below_expected",severity="critical"})"),
      1);
  for (int i = 0; i < 12; ++i) text = f.Poll();  // 2 minutes
  EXPECT_EQ(Sample(text, prefix + R"(",nvlink="2",finding="link_inactive",severity="critical"})"),
            1);
  EXPECT_EQ(Sample(text, std::string(R"(ncclscope_nvlink_link_state{gpu="0",UUID=")") + kUuid0 +
                             R"(",nvlink="2"})"),
            0);
  // Errors age out of their 10 minute window; the link comes back.
  f.fake.Write(Hopper(1, 3));
  for (int i = 0; i < 61; ++i) text = f.Poll();
  EXPECT_EQ(text.find("ncclscope_nvlink_finding{"), std::string::npos) << text;
}

TEST(NvlinkSourceTest, BlackwellFieldsAndLostGpu) {
  Fixture f;
  f.fake.Write(
      "gpu 0 GPU-b 00000000:1B:00.0 NVIDIA_B200 2 blackwell\n"
      "field 0 0 202 500\nfield 0 0 204 600\nfield 0 1 214 0\nfield 0 1 221 9\n"
      "field 0 1 220 783\nfield 0 0 220 527\n");
  f.source.Configure(f.config);
  std::string text = f.Poll();
  // Per GPU (the default): the worst link's BER (link 1: 3e-15, link 0: 2e-15).
  EXPECT_DOUBLE_EQ(Sample(text, R"(ncclscope_nvlink_effective_ber{gpu="0",UUID="GPU-b"})"), 3e-15);
  EXPECT_EQ(Sample(text, R"(ncclscope_nvlink_symbol_errors_total{gpu="0",UUID="GPU-b"})"), 9);
  f.config.per_link_metrics = true;
  f.source.Configure(f.config);
  text = f.Poll();
  const std::string link0 = R"({gpu="0",UUID="GPU-b",nvlink="0"})";
  const std::string link1 = R"({gpu="0",UUID="GPU-b",nvlink="1"})";
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_count_transmitted_bytes_total" + link0), 500);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_count_received_bytes_total" + link0), 600);
  EXPECT_EQ(Sample(text, "ncclscope_nvlink_symbol_errors_total" + link1), 9);
  EXPECT_DOUBLE_EQ(Sample(text, "ncclscope_nvlink_effective_ber" + link1), 3e-15);
  EXPECT_TRUE(std::isnan(Sample(text, "ncclscope_nvlink_crc_flit_errors_total" + link1)));
  // A failed recovery on NVLink5 is a link error.
  f.fake.Write(
      "gpu 0 GPU-b 00000000:1B:00.0 NVIDIA_B200 2 blackwell\n"
      "field 0 0 202 500\nfield 0 0 204 600\nfield 0 1 214 1\nfield 0 1 221 9\n");
  text = f.Poll();
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_nvlink_link_recovery_failed_total{gpu="0",UUID="GPU-b",nvlink="1"})"),
      1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_nvlink_finding{gpu="0",UUID="GPU-b",nvlink="1",finding="link_errors",severity="warning"})"),
      1);

  f.fake.Write("gpu 0 GPU-b 00000000:1B:00.0 NVIDIA_B200 2 blackwell lost\n");
  text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_nvlink_finding{gpu="0",UUID="GPU-b",nvlink="",finding="gpu_lost",severity="critical"})"),
      1);
  EXPECT_TRUE(f.source.Status().up);
}

TEST(NvlinkSourceTest, WithoutNvmlTheSourceSaysSoAndRetries) {
  Fixture f;
  f.config.library = f.dir.path() + "/libnvidia-ml.so.1";  // not there
  f.source.Configure(f.config);
  std::string text = f.Poll();
  EXPECT_EQ(Sample(text, "ncclscope_nvml_available"), 0);
  SourceStatus status = f.source.Status();
  EXPECT_FALSE(status.up);
  EXPECT_NE(status.reason.find("NVML not available"), std::string::npos) << status.reason;
  EXPECT_NE(status.reason.find("libnvidia-ml.so.1"), std::string::npos) << status.reason;

  // The driver arrives (e.g. the GPU Operator's driver container): the next poll loads it.
  f.fake.Write(Hopper(1, 0));
  f.config.library = NCCLSCOPE_FAKE_NVML;
  f.source.Configure(f.config);
  text = f.Poll();
  EXPECT_EQ(Sample(text, "ncclscope_nvml_available"), 1);
  EXPECT_TRUE(f.source.Status().up);
}

}  // namespace
}  // namespace ncclscope::nvlink
