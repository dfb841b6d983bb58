// Pod and container identity from cgroup paths (both kubelet drivers, the common runtimes,
// cgroup namespaces, v1), the cgroup-id walk, and runtime state files.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/ebpf/cgroup/cgroup_paths.h"
#include "agent/ebpf/cgroup/kubepods.h"
#include "agent/ebpf/cgroup/pod_metadata.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::ebpf::cgroup {
namespace {

// A container id and a pod UID in both spellings.
const std::string& Id() {
  static const std::string k = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  return k;
}
const std::string& Uid() {
  static const std::string k = "1f2e3d4c-5b6a-4789-90ab-cdef01234567";
  return k;
}
const std::string& UidUnderscores() {
  static const std::string k = "1f2e3d4c_5b6a_4789_90ab_cdef01234567";
  return k;
}

TEST(KubepodsTest, Layouts) {
  struct Case {
    std::string path;
    std::string container;
    std::string runtime;
  };
  const Case cases[] = {
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + UidUnderscores() +
           ".slice/cri-containerd-" + Id() + ".scope",
       Id(), "containerd"},
      {"/kubepods.slice/kubepods-pod" + UidUnderscores() + ".slice/crio-" + Id() + ".scope", Id(),
       "crio"},
      {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + UidUnderscores() +
           ".slice/docker-" + Id() + ".scope",
       Id(), "docker"},
      {"/kubepods/burstable/pod" + Uid() + "/" + Id(), Id(), ""},
      {"/kubepods/pod" + Uid() + "/" + Id(), Id(), ""},
      {"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
       "kubelet-kubepods-burstable-pod" +
           UidUnderscores() + ".slice/cri-containerd-" + Id() + ".scope",
       Id(), "containerd"},
      {"/system.slice/containerd.service/kubepods-burstable-pod" + UidUnderscores() +
           ".slice:cri-containerd:" + Id(),
       Id(), "containerd"},
      // Seen from inside a private cgroup namespace.
      {"/../../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + UidUnderscores() +
           ".slice/cri-containerd-" + Id() + ".scope",
       Id(), "containerd"},
      // The pod's own cgroup, and CRI-O's monitor process: a pod but no container.
      {"/kubepods/burstable/pod" + Uid(), "", ""},
      {"/kubepods.slice/kubepods-pod" + UidUnderscores() + ".slice/crio-conmon-" + Id() + ".scope",
       "", ""},
  };
  for (const Case& c : cases) {
    const auto ref = ParseKubepodsPath(c.path);
    ASSERT_TRUE(ref) << c.path;
    EXPECT_EQ(ref->pod_uid, Uid()) << c.path;
    EXPECT_EQ(ref->container_id, c.container) << c.path;
    EXPECT_EQ(ref->runtime, c.runtime) << c.path;
  }
  for (const std::string& path :
       {std::string("/"), std::string("/system.slice/sshd.service"),
        std::string("/kubepods.slice/kubepods-burstable.slice"),
        "/kubepods/burstable/pod" + Uid().substr(0, 20), "/user.slice/mypod" + Uid()}) {
    EXPECT_FALSE(ParseKubepodsPath(path)) << path;
  }
}

TEST(KubepodsTest, ProcCgroupPrefersV2AndFallsBackToV1) {
  const std::string v1 = "12:pids:/kubepods/burstable/pod" + Uid() + "/" + Id() +
                         "\n4:memory:/kubepods/burstable/pod" + Uid() + "/" + Id() + "\n0::/\n";
  auto ref = ParseProcCgroup(v1);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->container_id, Id());
  const std::string v2 =
      "0::/kubepods.slice/kubepods-pod" + UidUnderscores() + ".slice/crio-" + Id() + ".scope\n";
  ref = ParseProcCgroup(v2);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->runtime, "crio");
  EXPECT_EQ(UnifiedPath(v2),
            "/kubepods.slice/kubepods-pod" + UidUnderscores() + ".slice/crio-" + Id() + ".scope");
  EXPECT_FALSE(ParseProcCgroup("0::/user.slice\n1:name=systemd:/user.slice\n"));
  EXPECT_FALSE(ParseProcCgroup("garbage without colons\n::\n"));
}

TEST(CgroupPathsTest, WalkFindsDirectoriesByInodeAndRateLimitsMisses) {
  testing::TempDir root;
  const std::string deep = "/kubepods.slice/kubepods-pod" + UidUnderscores() + ".slice";
  ASSERT_EQ(mkdir((root.path() + "/kubepods.slice").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root.path() + deep).c_str(), 0755), 0);
  struct stat st {};
  ASSERT_EQ(stat((root.path() + deep).c_str(), &st), 0);
  CgroupPaths paths(root.path(), {1000, 8, std::chrono::milliseconds(60000)});
  EXPECT_EQ(paths.PathOf(st.st_ino), deep);
  EXPECT_EQ(paths.walks(), 1u);
  EXPECT_EQ(paths.PathOf(st.st_ino), deep);  // cached
  EXPECT_EQ(paths.PathOf(1), std::nullopt);  // miss within the interval: no new walk
  EXPECT_EQ(paths.walks(), 1u);
  EXPECT_EQ(FindUnifiedRoot(root.path()), std::nullopt);  // a plain directory is not cgroup2
}

TEST(PodMetadataTest, ContainerdCrioDockerAndGarbage) {
  const auto containerd = ParseRuntimeState(R"({"ociVersion":"1.1.0","annotations":{
      "io.kubernetes.cri.container-type":"container",
      "io.kubernetes.cri.sandbox-namespace":"ml","io.kubernetes.cri.sandbox-name":"trainer-0",
      "io.kubernetes.cri.container-name":"worker"}})");
  ASSERT_TRUE(containerd);
  EXPECT_EQ(containerd->namespace_name, "ml");
  EXPECT_EQ(containerd->pod, "trainer-0");
  EXPECT_EQ(containerd->container, "worker");
  const auto crio = ParseRuntimeState(R"({"annotations":{"io.kubernetes.pod.namespace":"a",
      "io.kubernetes.pod.name":"b","io.kubernetes.container.name":"c"}})");
  ASSERT_TRUE(crio);
  EXPECT_EQ(crio->pod, "b");
  const auto docker = ParseRuntimeState(R"({"Config":{"Labels":{
      "io.kubernetes.pod.namespace":"d","io.kubernetes.pod.name":"e",
      "io.kubernetes.container.name":"f"}}})");
  ASSERT_TRUE(docker);
  EXPECT_EQ(docker->container, "f");
  EXPECT_FALSE(ParseRuntimeState("{\"annotations\": {\"io.kubernetes.cri.sandbox-name\": 7}}"));
  EXPECT_FALSE(ParseRuntimeState("{not json"));
  EXPECT_FALSE(ParseRuntimeState("[]"));

  testing::TempDir dir;
  ASSERT_EQ(mkdir((dir.path() + "/" + Id()).c_str(), 0755), 0);
  dir.WriteFile(Id() + "/config.json", R"({"annotations":{"io.kubernetes.pod.name":"p"}})");
  PodMetadata metadata({dir.path() + "/missing/{id}.json", dir.path() + "/{id}/config.json"});
  ASSERT_TRUE(metadata.Lookup(Id()));
  EXPECT_EQ(metadata.Lookup(Id())->pod, "p");
  EXPECT_FALSE(metadata.Lookup("feedfacefeedface"));
}

}  // namespace
}  // namespace ncclscope::ebpf::cgroup
