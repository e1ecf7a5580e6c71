// /proc/<pid>/stat gives each process's parent and start time; the tree is walked from there.
#include "harness/launch/process_tree.hpp"

#include <dirent.h>

#include <csignal>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace faultline::harness {

namespace {

struct Stat {
  pid_t parent = 0;
  uint64_t started = 0;
};

// Fields 4 (ppid) and 22 (starttime) of /proc/<pid>/stat; the command name (field 2) may hold
// spaces and parentheses, so the fields are counted from its last ')'.
std::optional<Stat> read_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 1));
  std::string field;
  Stat stat;
  for (int index = 3; fields >> field; ++index) {
    if (index == 4) stat.parent = static_cast<pid_t>(std::stol(field));
    if (index == 22) {
      stat.started = std::stoull(field);
      return stat;
    }
  }
  return std::nullopt;
}

// Whether /proc/<pid>/environ (the environment it was started with, NUL-separated) sets it.
bool sets_variable(pid_t pid, const std::string& variable) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = variable + "=";
  for (std::string entry; std::getline(in, entry, '\0');)
    if (entry.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

// Each process's children, from one pass over /proc.
std::multimap<pid_t, SeenProcess> children_by_parent() {
  std::multimap<pid_t, SeenProcess> children;
  if (DIR* proc = opendir("/proc")) {
    while (const dirent* entry = readdir(proc)) {
      const std::string name = entry->d_name;
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto pid = static_cast<pid_t>(std::stol(name));
      if (auto stat = read_stat(pid))
        children.emplace(stat->parent, SeenProcess{pid, stat->started});
    }
    closedir(proc);
  }
  return children;
}

}  // namespace

std::vector<SeenProcess> descendants(pid_t root, int depth) {
  const auto children = children_by_parent();
  std::vector<SeenProcess> below;
  std::vector<std::pair<pid_t, int>> frontier = {{root, 0}};  // (pid, its generation)
  while (!frontier.empty()) {
    const auto [parent, generation] = frontier.back();
    frontier.pop_back();
    if (generation >= depth) continue;
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      below.push_back(it->second);
      frontier.emplace_back(it->second.pid, generation + 1);
    }
  }
  return below;
}

std::vector<SeenProcess> outermost_setting(pid_t root, const std::string& variable) {
  const auto children = children_by_parent();
  std::vector<SeenProcess> found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      if (sets_variable(it->second.pid, variable))
        found.push_back(it->second);
      else
        frontier.push_back(it->second.pid);
    }
  }
  return found;
}

void signal_seen(const std::vector<SeenProcess>& processes, int signal) {
  for (const auto& process : processes)
    if (auto stat = read_stat(process.pid); stat && stat->started == process.started)
      ::kill(process.pid, signal);
}

}  // namespace faultline::harness
