// fork/exec child processes for end-to-end tests, each in its own process group so a timeout
// kills everything it started.
#include "support/process.hpp"

#include "harness/launch/local_launcher.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace faultline::testing {

namespace {
struct Child {
  pid_t pid = -1;
  std::string log_path;
  ProcessResult result;
  bool done = false;
};

pid_t spawn(const ProcessSpec& spec, const std::string& log_path) {
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid > 0) return pid;
  setpgid(0, 0);
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  close(fd);
  for (const auto& [key, value] : spec.env) setenv(key.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

namespace {
// What make_temp_dir made, removed when the test program exits: a suite run leaves nothing in
// /tmp. FAULTLINE_KEEP_TEST_DIRS=1 keeps them, to look at a failed test's runs and logs.
class TempDirs {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    const char* keep = std::getenv("FAULTLINE_KEEP_TEST_DIRS");
    if (keep && *keep && std::string(keep) != "0") return;
    std::error_code ignored;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ignored);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> dirs_;
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

std::string make_temp_dir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/faultline-" + tag + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  temp_dirs().add(buffer.data());
  return buffer.data();
}

int free_port() {
  return harness::pick_free_port();
}

std::vector<ProcessResult> run_processes(const std::vector<ProcessSpec>& specs) {
  std::string dir = make_temp_dir("proc");
  std::vector<Child> children(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    children[i].log_path = dir + "/child" + std::to_string(i) + ".log";
    children[i].pid = spawn(specs[i], children[i].log_path);
  }
  double timeout_s = 0;
  for (const auto& spec : specs) timeout_s = std::max(timeout_s, spec.timeout_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  size_t remaining = children.size();
  while (remaining > 0) {
    for (auto& child : children) {
      if (child.done) continue;
      int status = 0;
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
        child.done = true;
        --remaining;
        if (WIFEXITED(status)) child.result.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) child.result.signal = WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    for (size_t i = 0; i < children.size(); ++i)
      if (!children[i].done && specs[i].kill_when && specs[i].kill_when())
        kill(-children[i].pid, SIGKILL);
    for (size_t i = 0; i < children.size(); ++i)
      if (!children[i].done && specs[i].signal_when)
        if (const int signal = specs[i].signal_when(); signal != 0) kill(-children[i].pid, signal);
    if (std::chrono::steady_clock::now() > deadline) {
      for (auto& child : children)
        if (!child.done) {
          kill(-child.pid, SIGKILL);
          child.result.timed_out = true;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<ProcessResult> results;
  for (auto& child : children) {
    child.result.output = read_text(child.log_path);
    results.push_back(child.result);
  }
  return results;
}

ProcessResult run_process(const ProcessSpec& spec) {
  return run_processes({spec}).front();
}

int processes_mentioning(const std::string& marker, ProcessText where) {
  int found = 0;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + entry->d_name +
                     (where == ProcessText::CommandLine ? "/cmdline" : "/environ"));
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) ++found;
  }
  closedir(proc);
  return found;
}

}  // namespace faultline::testing
