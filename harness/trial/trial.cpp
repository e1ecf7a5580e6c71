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
#include "harness/trial/trial_ending.hpp"
#include "probes/detectors/reference.hpp"
#include "probes/detectors/run_judge.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

constexpr std::pair<Verdict, const char*> kVerdictNames[] = {{Verdict::Pass, "pass"},
                                                             {Verdict::Fail, "fail"},
                                                             {Verdict::Skip, "skip"},
                                                             {Verdict::InfraError, "infra_error"}};

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
  info.launcher_sets_json = nlohmann::json(launcher_.sets()).dump();
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
