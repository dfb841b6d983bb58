#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ncclscope::testing {

// A child process with stdout and stderr captured to files, killed (SIGKILL) on destruction if
// still running.
class Subprocess {
 public:
  // Starts argv[0] with the given arguments; `extra_env` entries ("K=V") are added to environ,
  // replacing inherited variables of the same name.
  Subprocess(std::vector<std::string> argv, const std::string& capture_dir,
             std::vector<std::string> extra_env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;

  // Exit status (WEXITSTATUS, or 128+signal) once the process ends within `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();

  std::string Stdout() const;
  std::string Stderr() const;

  // Polls stderr until it contains `needle`; returns the text after it up to the end of that line.
  std::optional<std::string> WaitForStderr(const std::string& needle,
                                           std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

// Runs a command to completion; returns {exit code, stdout+stderr}. `input` is fed to stdin.
struct RunResult {
  int exit_code = -1;
  std::string output;
};
RunResult RunCommand(const std::vector<std::string>& argv, const std::string& input = "");

// A TCP port on 127.0.0.1 that was free a moment ago (for servers that cannot bind port 0).
int FreePort();

}  // namespace ncclscope::testing
