// Names the ranks of a hang from their records alone, so a live trial and an imported job read
// the same evidence the same way.
#include "harness/launch/hang_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>

#include "common/text.hpp"

namespace faultline::harness {

HangReport describe_hang(const std::vector<int64_t>& last_step, const std::vector<int64_t>& entered,
                         double silent_s) {
  HangReport hang;
  hang.silent_s = silent_s;
  if (last_step.empty()) return hang;
  const int64_t newest = entered.empty() ? 0 : *std::max_element(entered.begin(), entered.end());
  const int64_t oldest = entered.empty() ? 0 : *std::min_element(entered.begin(), entered.end());
  if (newest > 0 && oldest < newest) {  // some ranks wait in a collective others never entered
    hang.collective = newest;
    for (size_t rank = 0; rank < entered.size(); ++rank)
      (entered[rank] < newest ? hang.ranks : hang.waiting).push_back(static_cast<int>(rank));
    hang.step = last_step.at(static_cast<size_t>(hang.ranks.front())) + 1;
    return hang;
  }
  const int64_t lowest = *std::min_element(last_step.begin(), last_step.end());
  const int64_t highest = *std::max_element(last_step.begin(), last_step.end());
  for (size_t rank = 0; rank < last_step.size(); ++rank)
    if (lowest != highest ? last_step[rank] == lowest : true)
      hang.ranks.push_back(static_cast<int>(rank));
  hang.step = lowest + 1;
  return hang;
}

std::string collective_wait(const HangReport& hang) {
  if (hang.collective <= 0) return "";
  return fmt::format("rank(s) {} never entered collective #{} (step {}) that rank(s) {} wait in",
                     fmt::join(hang.ranks, ","), hang.collective, hang.step,
                     fmt::join(hang.waiting, ","));
}

std::string stacks_in_log(const std::string& path) {
  // A rank signalled twice (a launcher that relays a signal, a job asked again) dumps the same
  // stacks twice: each distinct block is kept once. A block is its header and the frames below
  // it, up to a blank line.
  std::ifstream in(path);
  std::vector<std::vector<std::string>> blocks;
  bool in_block = false;
  for (std::string line; std::getline(in, line);) {
    if (starts_with(line, "Thread 0x") || starts_with(line, "Current thread 0x")) {
      blocks.emplace_back();
      in_block = true;
    }
    if (line.empty()) in_block = false;
    if (in_block) blocks.back().push_back(line);
  }
  std::vector<std::vector<std::string>> distinct;
  for (auto& block : blocks)
    if (std::find(distinct.begin(), distinct.end(), block) == distinct.end())
      distinct.push_back(std::move(block));
  // The helper's own threads (its watchdog, in faultline_probe.py and threading.py only) last:
  // the signal may land on one, which then heads the dump, and 40 lines would be mostly theirs.
  std::stable_partition(distinct.begin(), distinct.end(), [](const auto& block) {
    bool helpers = false;
    for (const auto& line : block) {
      if (line.find("File \"") == std::string::npos) continue;
      if (line.find("faultline_probe.py\"") != std::string::npos)
        helpers = true;
      else if (line.find("threading.py\"") == std::string::npos)
        return true;
    }
    return !helpers;
  });
  std::string stacks;
  int lines = 0;
  for (const auto& block : distinct)
    for (const auto& line : block)
      if (lines++ < 40) stacks += "\n    " + line;
  return stacks;
}

}  // namespace faultline::harness
