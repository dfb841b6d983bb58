#include "tests/support/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace ncclscope::testing {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv, const std::string& capture_dir,
                       std::vector<std::string> extra_env) {
  static std::atomic<int> counter{0};
  const std::string tag = std::to_string(counter++);
  stdout_path_ = capture_dir + "/stdout." + tag;
  stderr_path_ = capture_dir + "/stderr." + tag;

  // extra_env replaces inherited variables of the same name (getenv would find the first one).
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const bool replaced =
        std::any_of(extra_env.begin(), extra_env.end(),
                    [&](const std::string& x) { return name_of(x) == name_of(entry); });
    if (!replaced) env.push_back(entry);
  }
  for (std::string& e : extra_env) env.push_back(std::move(e));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The test runner may block signals; the child must start with a clean mask.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  const int rc = posix_spawn(&pid_, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("posix_spawn " + argv[0] + " failed: " + std::to_string(rc));
}

Subprocess::~Subprocess() {
  if (Running()) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

void Subprocess::Signal(int signal) const { ::kill(pid_, signal); }

bool Subprocess::Running() {
  if (exit_code_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = DecodeStatus(status);
    return false;
  }
  return r == 0;
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (!WaitFor([&] { return !Running(); }, timeout, std::chrono::milliseconds(10))) {
    return std::nullopt;
  }
  return exit_code_;
}

std::string Subprocess::Stdout() const { return ReadFile(stdout_path_); }
std::string Subprocess::Stderr() const { return ReadFile(stderr_path_); }

std::optional<std::string> Subprocess::WaitForStderr(const std::string& needle,
                                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = Stderr();
    const std::size_t at = text.find(needle);
    if (at != std::string::npos) {
      const std::size_t begin = at + needle.size();
      const std::size_t end = text.find('\n', begin);
      if (end != std::string::npos) return text.substr(begin, end - begin);
    }
    if (!Running()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

RunResult RunCommand(const std::vector<std::string>& argv, const std::string& input) {
  TempDir dir;
  const std::string in_path = dir.WriteFile("stdin", input);
  const std::string out_path = dir.path() + "/out";
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv = CStrings(args);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  RunResult result;
  const int rc = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.output = "posix_spawn failed: " + std::to_string(rc);
    return result;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = DecodeStatus(status);
  result.output = ReadFile(out_path);
  return result;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot find a free port");
  return ntohs(addr.sin_port);
}

}  // namespace ncclscope::testing
