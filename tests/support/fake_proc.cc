#include "tests/support/fake_proc.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>

namespace ncclscope::testing {

FakeProc::FakeProc() {
  std::filesystem::create_directories(dir_.path() + "/proc");
  std::filesystem::create_directories(dir_.path() + "/fs/lib");
}

std::string FakeProc::AddFile(const std::string& path, const std::string& content) {
  return dir_.WriteFile("fs" + path, content);
}

void FakeProc::AddProcess(pid_t pid, std::uint64_t start, const std::vector<std::string>& libs,
                          const char* perms) {
  const std::string p = proc_root() + "/" + std::to_string(pid);
  std::filesystem::create_directories(p);
  dir_.WriteFile("proc/" + std::to_string(pid) + "/stat",
                 std::to_string(pid) + " (fake) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " +
                     std::to_string(start) + " 0 0\n");
  std::string maps;
  std::uint64_t address = 0x7f0000000000;
  for (const std::string& lib : libs) {
    struct stat st {};
    stat((dir_.path() + "/fs" + lib).c_str(), &st);
    char line[512];
    std::snprintf(line, sizeof(line), "%" PRIx64 "-%" PRIx64 " %s 00000000 %02x:%02x %lu %s\n",
                  address, address + 0x1000, perms, major(st.st_dev), minor(st.st_dev),
                  static_cast<unsigned long>(st.st_ino), lib.c_str());
    maps += line;
    address += 0x10000;
  }
  dir_.WriteFile("proc/" + std::to_string(pid) + "/maps", maps);
  std::filesystem::remove(p + "/root");
  std::filesystem::create_directory_symlink(dir_.path() + "/fs", p + "/root");
}

void FakeProc::SetEnviron(pid_t pid, const std::vector<std::string>& entries) {
  std::string text;
  for (const std::string& entry : entries) {
    text += entry;
    text.push_back('\0');
  }
  dir_.WriteFile("proc/" + std::to_string(pid) + "/environ", text);
}

void FakeProc::RemoveProcess(pid_t pid) {
  std::filesystem::remove_all(proc_root() + "/" + std::to_string(pid));
}

}  // namespace ncclscope::testing
