// Ranks that died after their end event said how the run ended, read as warnings: their records
// and checkpoints are whole, so the death is not a crash in the next step for a search to chase.
#include "harness/trial/teardown_deaths.hpp"

#include <fmt/format.h>

namespace faultline::harness {

namespace {

bool halted(EndStatus status) {
  return status == EndStatus::Nonfinite || status == EndStatus::DataAnomaly ||
         status == EndStatus::Oom;
}

}  // namespace

bool died_after_its_end(const SupervisedResult& result, size_t rank) {
  if (rank >= result.ranks.size() || rank >= result.ends.size()) return false;
  const RankStatus& status = result.ranks[rank];
  if (status.killed_by_harness || status.ended_by_scheduler) return false;
  const auto& ended = result.ends[rank].status;
  if (!ended) return false;
  if (status.kind == ExitKind::Signaled) return *ended == EndStatus::Ok || halted(*ended);
  return status.kind == ExitKind::Exited && status.exit_code != 0 && *ended == EndStatus::Ok;
}

std::string how_it_died(const RankStatus& status, const EndEvent& end) {
  std::string how = status.kind == ExitKind::Signaled
                        ? "died of " + signal_name(status.signal)
                        : "exited with code " + std::to_string(status.exit_code);
  if (!end.error.empty()) how += " after an error: " + end.error + " (its end event)";
  return how;
}

std::string stacks_of_rank(const RankLaunch& rank) {
  if (auto stacks = rank.stacks_path.empty() ? stacks_in_log(rank.log_path) : std::string();
      !stacks.empty())
    return "; its stacks (from its log):" + stacks;
  return "";
}

std::vector<detectors::Failure> teardown_warnings(const SupervisedResult& result,
                                                  const std::vector<RankLaunch>& ranks) {
  std::vector<detectors::Failure> warnings;
  for (size_t rank = 0; rank < result.ranks.size(); ++rank) {
    if (!died_after_its_end(result, rank)) continue;
    const EndStatus ended = *result.ends[rank].status;
    const std::string said =
        ended == EndStatus::Ok
            ? "its end event said training ended well (status ok"
            : fmt::format("its end event said it halted (status {}", to_string(ended));
    warnings.push_back({detectors::FailureKind::TeardownCrash, -1, static_cast<int>(rank),
                        fmt::format("rank {} {} after {}, after step {})", rank,
                                    how_it_died(result.ranks[rank], result.ends[rank]), said,
                                    result.last_step.at(rank)) +
                            (rank < ranks.size() ? stacks_of_rank(ranks[rank]) : "")});
  }
  return warnings;
}

}  // namespace faultline::harness
