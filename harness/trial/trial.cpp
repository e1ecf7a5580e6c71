// The trial runner: validate the recipe, store the run, launch and supervise the ranks while
// ingesting their metrics and judging them, then classify how it ended and store the verdict.
#include "harness/trial/trial.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/hang_report.hpp"
#include "harness/launch/local_launcher.hpp"
#include "harness/trial/ingest_sink.hpp"
#include "harness/trial/rank_launches.hpp"
#include "harness/trial/run_owner.hpp"
#include "harness/trial/teardown_deaths.hpp"
#include "probes/detectors/reference.hpp"
#include "probes/detectors/run_judge.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

// The last whole lines of a log, at most `bytes` and 15 lines of it: what a trainer said last
// (argparse's one-line error comes after its usage block; a traceback's last line is its error).
std::string log_tail(const std::string& path, size_t bytes = 2000) {
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
  auto meaning = crash.signal == 0 ? trainer.exit_meaning(crash.exit_code) : ExitMeaning::Failed;
  if (crash.launcher_of) meaning = launched_rank_meaning(result.ends.at(crash.rank), meaning);
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
  auto meaning = trainer.exit_meaning(crash.exit_code);
  if (crash.launcher_of) meaning = launched_rank_meaning(result.ends.at(crash.rank), meaning);
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

constexpr std::pair<Verdict, const char*> kVerdictNames[] = {{Verdict::Pass, "pass"},
                                                             {Verdict::Fail, "fail"},
                                                             {Verdict::Skip, "skip"},
                                                             {Verdict::InfraError, "infra_error"}};

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

}  // namespace

const char* to_string(Verdict verdict) {
  return name_of(kVerdictNames, verdict);
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  return value_of(kVerdictNames, text);
}

std::vector<std::string> trial_overrides(const TrialSpec& spec) {
  std::vector<std::string> overrides = spec.overrides;
  for (auto& scale : contract::TrainerContract::of(spec.config_path).scale_overrides(spec))
    overrides.push_back(std::move(scale));
  return overrides;
}

std::optional<detectors::Failure> regression_against(
    const store::Store& store, int64_t run_id,
    const std::shared_ptr<const std::vector<std::vector<StepRecord>>>& reference,
    const detectors::Thresholds& thresholds) {
  if (!reference || !thresholds.loss_regression.enabled) return std::nullopt;
  return detectors::compare_to_reference(store.steps(run_id), *reference,
                                         thresholds.loss_regression);
}

store::RunFailure stored_failure(const detectors::Failure& failure) {
  return {to_string(failure.kind), failure.step, failure.rank, failure.detail, failure.shown_by};
}

std::vector<std::string> trainer_argv(const TrialSpec& spec, const std::string& trainer) {
  return contract::TrainerContract::of(spec.config_path).argv(spec, trainer);
}

TrialRunner::TrialRunner(store::Store& store, Launcher& launcher, RunnerOptions options)
    : store_(store), launcher_(launcher), options_(std::move(options)) {}

namespace {

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

}  // namespace

void throw_not_run(const Outcome& outcome, const std::string& what) {
  const std::string run = "run " + std::to_string(outcome.run_id);
  if (outcome.infra_cause == InfraCause::BadInput)
    throw UserError(what + " could not run: " + outcome.infra_detail, run,
                    "fix the recipe key, --set, trainer argument or script it names");
  throw InfraError(what + " could not run (" + run + "): " + outcome.infra_detail);
}

Outcome TrialRunner::run(const TrialSpec& spec,
                         const std::function<void(const Outcome&)>& with_finish) {
  const auto overrides = trial_overrides(spec);
  // Validate here: a bad recipe is the user's error, reported before anything is launched.
  const auto config = contract::load_recipe(spec.config_path, overrides);
  contract::check_launchable(config, spec.ranks);
  const auto trainer = contract::TrainerContract::of(spec.config_path);
  const int nodes = launcher_.nodes_for(spec.ranks);
  if (trainer.starts_own_ranks()) check_node_split(spec.ranks, nodes);
  // Removed since the run wrote it (a clean-up, gc): the replay would die loading it, which
  // reads as the run's crash, or as a failure that "did not reproduce".
  if (!spec.resume.empty() && !std::filesystem::exists(spec.resume))
    throw InfraError("the checkpoint to resume from, " + spec.resume +
                     ", no longer exists (removed since the run wrote it?)");

  store::RunInfo info;
  info.config_path = spec.config_path;
  info.config = config.canonical;
  info.config_hash = config.hash;
  info.ranks = spec.ranks;
  // A prefix asked of the trial (--steps), or in the bundled trainer's own config (--set
  // train.stop_after=N): the steps the run is asked to train.
  int64_t stop_after = spec.stop_after;
  if (config.bundled && config.bundled->train.stop_after > 0)
    stop_after = stop_after > 0 ? std::min(stop_after, config.bundled->train.stop_after)
                                : config.bundled->train.stop_after;
  info.steps = stop_after > 0 ? std::min(stop_after, config.steps) : config.steps;
  info.data_fraction = config.data_fraction;
  info.launcher = launcher_.name();
  info.parent = spec.parent;
  info.owner_pid = getpid();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  info.owner_host = host;
  Outcome outcome;
  contract::RankCommand command;
  std::vector<RankLaunch> ranks;
  const int port = pick_free_port();
  outcome.ranks = spec.ranks;
  // The run's directory is named after its id, and the argv names the directory: one
  // transaction, so no run is ever stored without the command line it ran or its directory.
  store_.in_transaction([&] {
    outcome.run_id = store_.create_run(info);
    // Run ids restart with each store: a directory left by another store's run is not reused
    // (its metrics file would be read as this run's).
    outcome.out_dir = options_.work_dir + "/run-" + std::to_string(outcome.run_id);
    for (int again = 2; std::filesystem::exists(outcome.out_dir); ++again)
      outcome.out_dir = options_.work_dir + "/run-" + std::to_string(outcome.run_id) + "." +
                        std::to_string(again);
    command = trainer.rank_command(spec, options_.trainer, outcome.out_dir, port);
    ranks = rank_launches(spec, command, outcome.out_dir, port, nodes);
    // What rank 0's process runs: a node's launcher with the trial's layout filled in.
    info.argv_json = nlohmann::json(ranks.at(0).argv).dump();
    store_.set_run_argv(outcome.run_id, info.argv_json);
    store_.set_run_out_dir(outcome.run_id, outcome.out_dir);
    // Inside the transaction: a directory that cannot be made leaves no run behind that never
    // ran (it read as `interrupted` afterwards).
    std::error_code error;
    std::filesystem::create_directories(outcome.out_dir, error);
    if (error)
      throw UserError("cannot create the run's directory: " + error.message(), outcome.out_dir,
                      "give a --work-dir you can write to (the default is ./faultline-runs)");
  });
  write_run_owner(outcome.out_dir, {store_.path(), outcome.run_id});
  for (const auto& [path, text] : command.files) std::ofstream(path) << text;

  const int64_t vocab = config.bundled ? config.bundled->model.vocab_size : 0;
  detectors::RunJudge judge(options_.thresholds,
                            detectors::RunContext{spec.ranks, config.warmup_steps, vocab});
  IngestSink sink(store_, outcome.run_id, judge, options_.observer);
  if (options_.observer) {
    TrialStart start{outcome.run_id, outcome.out_dir, {}, spec.ranks, info.steps};
    for (const auto& rank : ranks) start.logs.push_back(rank.log_path);
    options_.observer->started(start);
  }
  SupervisedResult result;
  SuperviseOptions watch = options_.supervise;
  watch.interrupted = options_.interrupted;
  watch.resume_step = spec.resume_step;
  if (trainer.is_command() && trainer.records() == contract::RecordSource::Protocol)
    watch.stack_signal = SIGUSR1;  // faultline_probe.py prints every thread's stack on it
  std::unique_ptr<RunningTrial> trial;
  try {
    trial = launcher_.launch(ranks);
    result = supervise(*trial, ranks, watch, sink);
  } catch (const InfraError& error) {
    outcome.infra_detail = error.what();
  }
  if (trial && outcome.infra_detail.empty() && !result.interrupted && !trial->started())
    // srun refused the step (an unknown option, more tasks than the allocation holds) or the
    // job ended before a task ran: the ranks' logs are empty, the launcher's says why.
    outcome.infra_detail =
        trial->launcher_log_path().empty()
            ? std::string("no rank started")
            : fmt::format("no rank started; the end of {}: {}", trial->launcher_log_path(),
                          log_tail(trial->launcher_log_path()));
  if (trial) {
    outcome.queue_wait_s = trial->queue_wait_s();
    if (auto report = trial->scheduler_report(); report && !result.interrupted)
      classify_scheduler_end(*report, result, outcome.failures, outcome.infra_detail);
  }
  sink.flush();

  outcome.interrupted = result.interrupted;
  outcome.malformed = sink.malformed();
  outcome.wall_s = result.wall_s;
  for (int64_t step : result.last_step) outcome.last_step = std::max(outcome.last_step, step);
  if (outcome.infra_detail.empty() && !result.interrupted) {
    outcome.infra_detail = ignored_resume(spec, result, trainer);
    if (!outcome.infra_detail.empty()) outcome.infra_cause = InfraCause::BadInput;
  }
  if (outcome.infra_detail.empty()) {
    classify_exit(result, watch, trainer, outcome.failures, outcome.infra_detail,
                  outcome.infra_cause, ranks);
    for (auto& warning : teardown_warnings(result, ranks)) outcome.failures.push_back(warning);
  }
  for (auto& failure : judge.finish()) outcome.failures.push_back(failure);
  if (outcome.infra_detail.empty())
    if (auto died = unproven_halt(result, trainer, outcome.failures))
      outcome.failures.push_back(*died);
  if (outcome.infra_detail.empty())
    if (auto regression =
            regression_against(store_, outcome.run_id, options_.reference, options_.thresholds))
      outcome.failures.push_back(*regression);
  detectors::order_for_report(outcome.failures);
  if (auto rate = judge.tokens_per_s()) outcome.tokens_per_s = *rate;
  auto summary = store_.summarize(outcome.run_id);
  if (summary.ranks > 0) outcome.steps_run = summary.steps / summary.ranks;
  outcome.first_loss = summary.first_loss;
  outcome.last_loss = summary.last_loss;
  if (outcome.tokens_per_s == 0) outcome.tokens_per_s = summary.tokens_per_s;
  outcome.skipped_steps = summary.skipped_steps;

  if (outcome.infra_detail.empty() && outcome.failures.empty() && !outcome.interrupted)
    outcome.infra_detail = not_trained(trainer, spec, info.steps, summary.steps, outcome.last_step,
                                       ranks.at(0).log_path);
  if (!outcome.infra_detail.empty())
    outcome.verdict = Verdict::InfraError;
  else
    outcome.verdict = detectors::any_failing(outcome.failures) ? Verdict::Fail : Verdict::Pass;

  info.status = outcome.interrupted ? store::RunStatus::Interrupted : store::RunStatus::Finished;
  info.verdict = outcome.interrupted ? "" : to_string(outcome.verdict);
  info.infra_detail = outcome.infra_detail;
  if (result.crash) {
    info.exit_code = result.crash->exit_code;
    if (result.crash->signal) info.signal = signal_name(result.crash->signal);
  } else if (!result.ranks.empty()) {
    info.exit_code = 0;
  }
  // ended_at stays empty: the store writes now, to the millisecond as started_at has it.
  for (const auto& failure : outcome.failures) info.failures.push_back(stored_failure(failure));
  info.malformed = outcome.malformed;
  store_.in_transaction([&] {
    store_.finish_run(outcome.run_id, info);
    if (with_finish) with_finish(outcome);
  });
  return outcome;
}

}  // namespace faultline::harness
