// How a supervised trial ended: its exit statuses, end events and the scheduler's word become
// failures, or the reason nothing could be judged.
#include "harness/trial/trial_ending.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iterator>

#include "common/text.hpp"
#include "harness/launch/hang_report.hpp"
#include "harness/trial/teardown_deaths.hpp"

namespace faultline::harness {

namespace {

// A Python rank that died of an exception: the traceback's last line, its type and message
// ("RuntimeError: PytorchStreamReader failed reading zip archive"); "" without a traceback.
std::string python_exception(const std::string& path) {
  const std::string tail = log_tail(path);
  if (tail.find("Traceback (most recent call last):") == std::string::npos) return "";
  return tail.substr(tail.rfind('\n') + 1);  // npos + 1 == 0: a one-line tail
}

// A launcher's exit status is not its rank's (torchrun exits 1 whatever its ranks did): the
// rank's end event says whether it halted on a failure its records show.
contract::ExitMeaning launched_rank_meaning(const EndEvent& end, contract::ExitMeaning launcher) {
  using contract::ExitMeaning;
  if (!end.status) return launcher;
  switch (*end.status) {
    case EndStatus::Nonfinite:
      return ExitMeaning::HaltedNonfinite;
    case EndStatus::DataAnomaly:
      return ExitMeaning::HaltedData;
    case EndStatus::Oom:
      return ExitMeaning::OutOfMemory;
    case EndStatus::Ok:
    case EndStatus::Error:
    case EndStatus::Terminated:
      return launcher;
  }
  return launcher;
}

// What the first rank to die said by its death: its exit code's meaning in the contract, or, for
// a launcher's status, its rank's end event; a signal is a failure.
contract::ExitMeaning death_meaning(const CrashReport& crash, const SupervisedResult& result,
                                    const contract::TrainerContract& trainer) {
  auto meaning =
      crash.signal == 0 ? trainer.exit_meaning(crash.exit_code) : contract::ExitMeaning::Failed;
  if (crash.launcher_of) meaning = launched_rank_meaning(result.ends.at(crash.rank), meaning);
  return meaning;
}

}  // namespace

// The last whole lines of a log, at most `bytes` and 15 lines of it: what a trainer said last
// (argparse's one-line error comes after its usage block; a traceback's last line is its error).
std::string log_tail(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty()) return "(the log is empty)";
  size_t from = text.size() > bytes ? text.size() - bytes : 0;
  if (const size_t newline = text.find('\n', from); from > 0 && newline != std::string::npos)
    from = newline + 1;  // no line cut in two (one line longer than `bytes` is cut)
  for (size_t at = text.size(), lines = 0; at != std::string::npos && at > from; ++lines) {
    if (lines == 15) {
      from = at + 1;
      break;
    }
    at = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
  }
  return (from > 0 ? "…\n" : "") + text.substr(from);
}

// How the supervised run ended, as failures: crash, hang, oom. A halt on a non-finite value or
// a data anomaly is the trainer reporting a failure the detectors judge from its records; its
// report of a failed allocation is `oom`, like a kill by the kernel's OOM killer. A run
// stopped at the total time limit never finished: a `hang` at the step the slowest rank was in.
void classify_exit(const SupervisedResult& result, const SuperviseOptions& watch,
                   const contract::TrainerContract& trainer,
                   std::vector<detectors::Failure>& failures, std::string& infra_detail,
                   InfraCause& infra_cause, const std::vector<RankLaunch>& ranks) {
  if (result.timed_out) {
    const int64_t step =
        result.last_step.empty()
            ? 1
            : *std::min_element(result.last_step.begin(), result.last_step.end()) + 1;
    failures.push_back({detectors::FailureKind::Hang, step, -1,
                        fmt::format("the total time limit of {} s was reached; the run was "
                                    "stopped in step {}",
                                    watch.total_timeout_s, step)});
  }
  if (result.hang) {
    std::string detail =
        fmt::format("no step record for {} s from rank(s) {}",
                    static_cast<int>(result.hang->silent_s), fmt::join(result.hang->ranks, ","));
    if (const std::string wait = collective_wait(*result.hang); !wait.empty())
      detail = wait + "; " + detail;
    if (watch.stack_signal)
      for (int rank : result.hang->ranks)
        if (auto stacks =
                stacks_in_log(ranks.at(rank).stacks_path.empty() ? ranks.at(rank).log_path
                                                                 : ranks.at(rank).stacks_path);
            !stacks.empty())
          detail += "; the stacks of rank " + std::to_string(rank) + " (" +
                    signal_name(watch.stack_signal) + ", from its log):" + stacks;
    failures.push_back({detectors::FailureKind::Hang, result.hang->step,
                        result.hang->ranks.size() == 1 ? result.hang->ranks[0] : -1, detail});
  }
  if (!result.crash) return;
  const auto& crash = *result.crash;
  using contract::ExitMeaning;
  const auto meaning = death_meaning(crash, result, trainer);
  if (meaning == ExitMeaning::HaltedNonfinite || meaning == ExitMeaning::HaltedData) return;
  if (meaning == ExitMeaning::BadUsage || meaning == ExitMeaning::NotRunnable) {
    // Mostly before its first step; the helper also refuses mid-run an op its determinism
    // forbids, which is the set-up's problem too, not a fault of the run.
    // Before its first step record of this trial (a replay's ranks begin at its checkpoint).
    const bool before = result.first_step.at(crash.rank) == 0;
    infra_detail =
        fmt::format("rank {} exited {} {}: {}", crash.rank, crash.exit_code,
                    before ? std::string("before training")
                           : fmt::format("after step {}", result.last_step.at(crash.rank)),
                    log_tail(ranks.at(crash.rank).log_path));
    if (meaning == ExitMeaning::BadUsage && before) infra_cause = InfraCause::BadInput;
    return;
  }
  if (trainer.is_command() && result.first_step.at(crash.rank) == 0 && crash.signal == 0) {
    // A script that cannot import what it needs never trained: the machine's problem, not a
    // crash of the run (e.g. a python3 on PATH without torch).
    const std::string log = log_tail(ranks.at(crash.rank).log_path);
    // Python stops at a syntax error before running a line: the script's mistake, not the run's.
    for (const char* error : {"SyntaxError:", "IndentationError:", "TabError:"})
      if (log.find(error) != std::string::npos) {
        infra_detail = "rank " + std::to_string(crash.rank) + " of " + trainer.name() +
                       " did not start: its script does not parse: " + log;
        infra_cause = InfraCause::BadInput;
        return;
      }
    if (log.find("ModuleNotFoundError") != std::string::npos ||
        log.find("ImportError") != std::string::npos) {
      infra_detail = "rank " + std::to_string(crash.rank) + " of " + trainer.name() +
                     " could not import a module before training (is it the interpreter with "
                     "torch? Debian's is /usr/bin/python3): " +
                     log;
      return;
    }
  }
  if (died_after_its_end(result, crash.rank)) {
    // Its end event said how the run ended (every step trained, or it halted and said why);
    // it died shutting down. Warned of with every such rank (teardown_warnings); a halt's oom
    // is still the run's oom.
    if (result.ends.at(crash.rank).status == EndStatus::Oom)
      failures.push_back(
          {detectors::FailureKind::Oom, crash.step, crash.rank,
           "rank " + std::to_string(crash.rank) + " ran out of memory (the trainer reported it)"});
    return;
  }
  if (meaning == ExitMeaning::OutOfMemory) {
    failures.push_back(
        {detectors::FailureKind::Oom, crash.step, crash.rank,
         "rank " + std::to_string(crash.rank) + " ran out of memory (the trainer reported it)"});
    return;
  }
  if (crash.signal == SIGKILL) {
    failures.push_back(
        {detectors::FailureKind::Oom, crash.step, crash.rank,
         "killed by SIGKILL, not by faultline: the kernel's OOM killer is the usual cause"});
    return;
  }
  const auto& status = result.ranks.at(crash.rank);
  const auto& end = result.ends.at(crash.rank);
  std::string how;
  if (!crash.launcher_of) {
    how = how_it_died(status, end);
  } else {
    // Its launcher's status is not the rank's own: what the rank said, then whose status it is.
    if (!end.error.empty())
      how = fmt::format("ended after an error: {} (its end event)", end.error);
    else if (end.status)
      how = fmt::format("ended with status {} (its end event)", to_string(*end.status));
    else
      how = fmt::format("stopped after step {} without an end event",
                        result.last_step.at(crash.rank));
    how += fmt::format("; the launcher of ranks {}-{} {}", crash.launcher_of->first,
                       crash.launcher_of->second, how_it_died(status, {}));
  }
  if (const std::string exception = python_exception(ranks.at(crash.rank).log_path);
      !exception.empty())
    how += "; its log ends with " + exception;
  failures.push_back(
      {detectors::FailureKind::Crash, crash.step, crash.rank,
       "rank " + std::to_string(crash.rank) + " " + how + stacks_of_rank(ranks.at(crash.rank))});
}

// Exit 3 or 4 says "I halted on a non-finite value" or "on a data anomaly"; with no record that
// shows one, it is a death like any other exit (it read as "exited cleanly after step 6").
std::optional<detectors::Failure> unproven_halt(const SupervisedResult& result,
                                                const contract::TrainerContract& trainer,
                                                const std::vector<detectors::Failure>& failures) {
  if (!result.crash || result.crash->signal != 0) return std::nullopt;
  const auto& crash = *result.crash;
  using contract::ExitMeaning;
  const auto meaning = death_meaning(crash, result, trainer);
  if (meaning != ExitMeaning::HaltedNonfinite && meaning != ExitMeaning::HaltedData)
    return std::nullopt;
  const auto shown = meaning == ExitMeaning::HaltedNonfinite ? detectors::FailureKind::Nonfinite
                                                             : detectors::FailureKind::Data;
  for (const auto& failure : failures)
    if (failure.kind == shown) return std::nullopt;
  return detectors::Failure{
      detectors::FailureKind::Crash, crash.step, crash.rank,
      fmt::format(
          "rank {} exited {} after step {}, the code for a halt on {}, but no record "
          "shows one: a death, not a halt",
          crash.rank, crash.exit_code, result.last_step.at(crash.rank),
          meaning == ExitMeaning::HaltedNonfinite ? "a non-finite value" : "a data anomaly")};
}

// A job or step the scheduler ended (Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED).
void classify_scheduler_end(const SchedulerReport& report, const SupervisedResult& result,
                            std::vector<detectors::Failure>& failures, std::string& infra_detail) {
  const int64_t step =
      result.last_step.empty()
          ? 1
          : *std::min_element(result.last_step.begin(), result.last_step.end()) + 1;
  switch (report.end) {
    case SchedulerEnd::TimeLimit:
      failures.push_back({detectors::FailureKind::Hang, step, -1,
                          report.detail + ": the run was stopped in step " + std::to_string(step)});
      return;
    case SchedulerEnd::OutOfMemory:
      failures.push_back({detectors::FailureKind::Oom, step, -1, report.detail});
      return;
    case SchedulerEnd::NodeFail:
      infra_detail = report.detail;
      return;
    case SchedulerEnd::Cancelled:
    case SchedulerEnd::Other:
      infra_detail = report.detail + ", not by faultline";
      return;
  }
}

// Nothing judged is not a pass: a run that exited cleanly without a step record (the records
// never arrived, or the program is no trainer: --trainer /bin/true), or, when it writes a
// record every step, short of the steps it was asked for, did not do what it was asked.
std::string not_trained(const contract::TrainerContract& trainer, const TrialSpec& spec,
                        int64_t steps_asked, int64_t step_records, int64_t last_step,
                        const std::string& log_path) {
  const bool logged = trainer.records() == contract::RecordSource::Log;
  if (step_records == 0 && spec.resume.empty())
    return trainer.name() + " ended without a single step record: " +
           (logged ? "no line of its output matched trainer.log_regex"
            : trainer.is_command()
                ? "it wrote none to $FAULTLINE_METRICS (faultline_probe.py writes them)"
                : "it wrote none to $FAULTLINE_METRICS (is --trainer faultline-train?)") +
           "; the end of rank 0's log: " + log_tail(log_path, 600);
  // A log-only trainer prints every so many steps; its last line may come before the last step.
  if (!logged && steps_asked > 0 && step_records > 0 && last_step < steps_asked)
    return fmt::format(
        "{} exited cleanly after step {} of the {} asked, with no failure in its records: a "
        "trainer must train the steps it is given (its steps key) or fail; the end of rank 0's "
        "log: {}",
        trainer.name(), last_step, steps_asked, log_tail(log_path, 600));
  return "";
}

// A rank asked to resume from the state after step S whose first step record is S or earlier
// trained from the start: a replay that claims steps S+1.. would cost and show something else.
std::string ignored_resume(const TrialSpec& spec, const SupervisedResult& result,
                           const contract::TrainerContract& trainer) {
  if (spec.resume.empty() || spec.resume_step <= 0) return "";
  for (size_t rank = 0; rank < result.first_step.size(); ++rank) {
    const int64_t first = result.first_step[rank];
    if (first > 0 && first <= spec.resume_step)
      return fmt::format(
          "rank {} of {} was asked to resume from {} (the state after step {}), but its first "
          "step record is step {}: it ignored the checkpoint (FAULTLINE_RESUME, or the recipe's "
          "trainer.resume fragment), or numbers its steps from 1 again (a record's step is the "
          "run's global step); a trainer that cannot resume must not declare 'resume' in "
          "trainer.provides",
          rank, trainer.name(), spec.resume, spec.resume_step, first);
  }
  return "";
}

}  // namespace faultline::harness
