// Single commands run to completion on a ChildProcess (harness/child_process.hpp), with a timeout
// and an interrupt flag.
#include "harness/launch/subprocess.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/launch/child_process.hpp"
#include "harness/launch/launcher.hpp"

namespace faultline::harness {

CommandResult run_command(const CommandSpec& spec) {
  if (spec.argv.empty()) throw InfraError("run_command: empty argv");
  const auto started = std::chrono::steady_clock::now();
  ChildProcess child({spec.argv, spec.cwd, spec.env, spec.output_path, spec.error_path, {}});

  CommandResult result;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    const auto ended = child.poll();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ended) {
      result.end = ended->kind == ExitKind::Signaled ? CommandEnd::Signaled : CommandEnd::Exited;
      result.exit_code = ended->exit_code;
      result.signal = ended->signal;
      break;
    }
    if (spec.timeout_s > 0 && elapsed > spec.timeout_s) {
      child.kill();
      result.end = CommandEnd::TimedOut;
      break;
    }
    if (spec.interrupted && spec.interrupted->load()) {
      child.kill();
      result.end = CommandEnd::Interrupted;
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

std::string describe(const CommandResult& result, const CommandSpec& spec) {
  switch (result.end) {
    case CommandEnd::Exited:
      return "exit " + std::to_string(result.exit_code);
    case CommandEnd::Signaled:
      return "killed by " + signal_name(result.signal);
    case CommandEnd::TimedOut: {
      std::ostringstream text;
      text << "timed out after " << spec.timeout_s << " s";
      return text.str();
    }
    case CommandEnd::Interrupted:
      return "interrupted";
  }
  return "?";
}

namespace {
// A file with no name: created and unlinked at once, so nothing is left behind even when
// faultline is killed (SIGKILL runs no destructor). The command's output reaches it, and it is
// read back, through its descriptor's /proc/self/fd link, which opens the unlinked file itself.
class TempFile {
 public:
  TempFile() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "faultline-cmd.XXXXXX").string();
    // Close-on-exec: a trainer started by another thread meanwhile does not inherit it.
    fd_ = mkostemp(pattern.data(), O_CLOEXEC);
    if (fd_ < 0) throw InfraError("cannot create a temporary file in " + pattern);
    ::unlink(pattern.c_str());
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~TempFile() { ::close(fd_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  // Valid in this process, and in a child until it execs (where its output is opened).
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};
}  // namespace

CapturedCommand run_captured(CommandSpec spec) {
  TempFile out, err;
  spec.output_path = out.path();
  spec.error_path = err.path();
  CapturedCommand captured;
  captured.result = run_command(spec);
  captured.out = file_tail(out.path(), std::string::npos);
  captured.err = file_tail(err.path(), std::string::npos);
  return captured;
}

std::string file_tail(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace faultline::harness
