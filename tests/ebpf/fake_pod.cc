#include "tests/ebpf/fake_pod.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace ncclscope::testing {
namespace {

std::string RandomHex(std::size_t n) {
  static std::mt19937_64 random(std::random_device{}());
  std::string out;
  while (out.size() < n) {
    char buffer[17];
    std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(random()));
    out += buffer;
  }
  return out.substr(0, n);
}

bool IsCgroup2(const std::string& path) {
  struct statfs fs {};
  return statfs(path.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

}  // namespace

std::string WritableUnifiedCgroupRoot() {
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (IsCgroup2(root) && access(root, W_OK) == 0) return root;
  }
  return "";
}

FakePod::FakePod(const std::string& state_dir, const std::string& name_space,
                 const std::string& pod, const std::string& container, bool cgroup_v1)
    : name_space_(name_space), pod_(pod), container_(container) {
  static std::atomic<int> counter{0};
  const std::string uid = RandomHex(8) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" +
                          RandomHex(4) + "-" + RandomHex(12);
  std::string uid_underscores = uid;
  for (char& c : uid_underscores) c = c == '-' ? '_' : c;
  const std::string id = RandomHex(64);
  const std::string top_name =
      "ncclscope-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  if (cgroup_v1) {
    top_ = "/sys/fs/cgroup/memory/" + top_name;
    leaf_ = top_ + "/kubepods/burstable/pod" + uid + "/" + id;
  } else {
    const std::string root = WritableUnifiedCgroupRoot();
    if (root.empty()) {
      error_ = "no writable cgroup v2 hierarchy";
      return;
    }
    top_ = root + "/" + top_name;
    leaf_ = top_ + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
            uid_underscores + ".slice/cri-containerd-" + id + ".scope";
  }
  std::error_code ec;
  std::filesystem::create_directories(leaf_, ec);
  if (ec) {
    error_ = "cannot create " + leaf_ + ": " + ec.message();
    return;
  }
  std::filesystem::create_directories(state_dir + "/" + id, ec);
  std::ofstream(state_dir + "/" + id + "/config.json")
      << R"({"ociVersion":"1.1.0","annotations":{"io.kubernetes.cri.container-type":"container",)"
      << R"("io.kubernetes.cri.sandbox-namespace":")" << name_space
      << R"(","io.kubernetes.cri.sandbox-name":")" << pod
      << R"(","io.kubernetes.cri.container-name":")" << container << "\"}}";
}

FakePod::~FakePod() {
  if (top_.empty()) return;
  // Processes are gone by now; remove the cgroups deepest first (rmdir only, never rm -r).
  std::string dir = leaf_;
  while (dir.size() >= top_.size()) {
    rmdir(dir.c_str());
    dir = dir.substr(0, dir.rfind('/'));
  }
}

bool FakePod::Adopt(pid_t pid) {
  std::ofstream procs(leaf_ + "/cgroup.procs");
  procs << pid << "\n";
  procs.flush();
  return static_cast<bool>(procs);
}

std::string FakePod::Labels() const {
  return "namespace=\"" + name_space_ + "\",pod=\"" + pod_ + "\",container=\"" + container_ + "\"";
}

}  // namespace ncclscope::testing
