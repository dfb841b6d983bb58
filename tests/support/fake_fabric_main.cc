// ncclscope-fake-fabric: a fake sysfs tree of one node's HCAs (tests/support/sysfs_tree.h, the
// same shape the fabric tests read) whose counters move over time, for end-to-end runs of the
// rdma source without an HCA (bench/detection, tests/deploy/series_budget.mjs). By default two
// InfiniBand HCAs (mlx5_0, mlx5_1, one NDR port each) and a RoCE one (mlx5_2, netdev eth2);
// `--ib N --roce M` makes N InfiniBand HCAs then M RoCE ones (an 8-rail node: --ib 8 --roce 0).
// Each has mlx5's counter files; every 200 ms each counter
// grows by its rate (healthy background traffic and transmit wait, with +-20 % noise, plus what
// the commands add). Prints "root <path>" once the tree exists, then reads commands, one a line:
//   rate  DEV PORT GROUP COUNTER PER_SECOND   extra growth of a counter (0 ends it)
//   add   DEV PORT GROUP COUNTER N            a one-off increment
//   state DEV PORT STATE|PHYS_STATE           e.g. "state mlx5_0 1 1: DOWN|3: Disabled"
// and exits (removing the tree) at end of input. GROUP is counters or hw_counters.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/sysfs_tree.h"

namespace {

using Key = std::tuple<std::string, std::uint32_t, std::string, std::string>;

struct Counter {
  double value = 0;
  double base_rate = 0;   // healthy background, with noise
  double extra_rate = 0;  // from `rate` commands
};

}  // namespace

int main(int argc, char** argv) {
  int ib_hcas = 2;
  int roce_hcas = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    char* end = nullptr;
    const long parsed = std::strtol(argv[i + 1], &end, 10);
    const int n = end != argv[i + 1] && *end == '\0' && parsed >= 0 && parsed <= 32
                      ? static_cast<int>(parsed)
                      : -1;
    if (flag == "--ib" && n >= 0) {
      ib_hcas = n;
    } else if (flag == "--roce" && n >= 0) {
      roce_hcas = n;
    } else {
      std::fprintf(stderr, "usage: ncclscope-fake-fabric [--ib N] [--roce M] (0..32 each)\n");
      return 2;
    }
  }
  ncclscope::testing::SysfsTree tree;
  ncclscope::testing::SysfsTree::Hca hca;
  std::mutex mutex;
  std::map<Key, Counter> counters;
  auto seed = [&](const std::string& dev, const std::string& group,
                  const ncclscope::testing::SysfsTree::Counters& files) {
    for (const auto& [name, text] : files) {
      Counter c;
      c.value = std::stod(text);
      counters[{dev, 1, group, name}] = c;
    }
  };
  std::vector<std::string> names;
  for (int i = 0; i < ib_hcas + roce_hcas; ++i) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "0000:%02x:00.0", (5 + i) & 0xff);
    char guid[32];
    std::snprintf(guid, sizeof guid, "a088:c203:0012:34%02x", (0x50 + i) & 0xff);
    hca.name = "mlx5_" + std::to_string(i);
    hca.pci_address = pci;
    hca.node_guid = guid;
    names.push_back(hca.name);
    if (i < ib_hcas) {
      tree.AddMlx5Ib(hca, 1);
      seed(hca.name, "counters", ncclscope::testing::SysfsTree::Mlx5PmaCounters());
      continue;
    }
    tree.AddMlx5Roce(hca, "eth" + std::to_string(i));
    seed(hca.name, "counters", ncclscope::testing::SysfsTree::Mlx5PmaCounters());
    seed(hca.name, "hw_counters", ncclscope::testing::SysfsTree::Mlx5HwCounters());
    // On a RoCE port, a trickle of ECN marks and CNPs.
    counters[{hca.name, 1, "hw_counters", "np_ecn_marked_roce_packets"}].base_rate = 10;
    counters[{hca.name, 1, "hw_counters", "rp_cnp_handled"}].base_rate = 10;
  }
  // Healthy background: traffic (in 4-byte words, as PMA counts data) and a little credit wait.
  for (const std::string& dev : names) {
    counters[{dev, 1, "counters", "port_xmit_data"}].base_rate = 2.5e9;
    counters[{dev, 1, "counters", "port_rcv_data"}].base_rate = 2.5e9;
    counters[{dev, 1, "counters", "port_xmit_packets"}].base_rate = 2.4e6;
    counters[{dev, 1, "counters", "port_rcv_packets"}].base_rate = 2.4e6;
    counters[{dev, 1, "counters", "port_xmit_wait"}].base_rate = 2e5;
  }
  std::printf("root %s\n", tree.root().c_str());
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    std::mt19937_64 random(42);
    std::uniform_real_distribution<double> noise(0.8, 1.2);
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& [key, c] : counters) {
        const double grow = (c.base_rate * noise(random) + c.extra_rate) * 0.2;
        if (grow <= 0) continue;
        c.value += grow;
        const auto& [dev, port, group, name] = key;
        tree.SetCounter(dev, port, group, name, static_cast<std::uint64_t>(c.value));
      }
    }
  });

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string verb;
    std::string dev;
    std::uint32_t port = 0;
    in >> verb >> dev >> port;
    std::lock_guard<std::mutex> lock(mutex);
    if (verb == "rate" || verb == "add") {
      std::string group;
      std::string name;
      double n = 0;
      in >> group >> name >> n;
      Counter& c = counters[{dev, port, group, name}];
      if (verb == "rate") {
        c.extra_rate = n;
      } else {
        c.value += n;
        tree.SetCounter(dev, port, group, name, static_cast<std::uint64_t>(c.value));
      }
    } else if (verb == "state") {
      std::string rest;
      std::getline(in >> std::ws, rest);
      const std::size_t bar = rest.find('|');
      tree.SetPortAttribute(dev, port, "state", rest.substr(0, bar));
      if (bar != std::string::npos)
        tree.SetPortAttribute(dev, port, "phys_state", rest.substr(bar + 1));
    } else if (!verb.empty()) {
      std::fprintf(stderr, "ncclscope-fake-fabric: unknown command '%s'\n", line.c_str());
    }
  }
  stop.store(true);
  ticker.join();
  return 0;
}
