// The run commands. Each callback: resolve the context, open the store, run trials, print a
// one-screen summary (or one JSON document with --json), set the exit code.
#include "cli/run_commands.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/option_checks.hpp"
#include "cli/progress.hpp"
#include "cli/reference_command.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "common/resources.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/trial/ladder.hpp"
#include "harness/trial/trial_cache.hpp"
#include "store/store.hpp"
#include "trainer/launch_check.hpp"
#include "trainer/train_config.hpp"

namespace faultline::cli {

nlohmann::json finite_or_null(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json();
}

namespace {

using nlohmann::json;

struct TrainArgs {
  RunContextOptions& context = shared_context();
  std::string config;
  std::vector<std::string> overrides;
  int ranks = 0;
  int64_t steps = 0;
  std::vector<std::string> option_names;  // suggested for an unknown --set key
};

struct SmokeArgs {
  RunContextOptions& context = shared_context();
  std::string config;
  std::vector<std::string> overrides;
  std::string ladder = "default";  // an installed ladder's name, or a file
  std::string reference;           // a stored reference's name: rungs also judged against it
  std::vector<std::string> option_names;
};

// A run the trainer refused (its usage error before the first step) is the caller's input to
// fix, exit 2; any other run that could not be judged is the machine's, exit 4.
ExitCode exit_for(const harness::Outcome& outcome) {
  if (outcome.interrupted) return ExitCode::Infra;
  switch (outcome.verdict) {
    case harness::Verdict::Pass:
    case harness::Verdict::Skip:
      return ExitCode::Ok;
    case harness::Verdict::Fail:
      return ExitCode::Failed;
    case harness::Verdict::InfraError:
      return outcome.infra_cause == harness::InfraCause::BadInput ? ExitCode::BadInput
                                                                  : ExitCode::Infra;
  }
  return ExitCode::Infra;
}

// How a run ended: its verdict, or `interrupted` for one cut short, whose verdict judges only the
// steps it ran before the signal.
std::string ending_of(const harness::Outcome& outcome) {
  return outcome.interrupted ? store::to_string(store::RunStatus::Interrupted)
                             : harness::to_string(outcome.verdict);
}

void print_outcome(const harness::Outcome& outcome, const harness::TrialSpec& spec) {
  fmt::print("run {}: {}  ({} rank(s), {} steps done, {:.1f} s)\n", outcome.run_id,
             ending_of(outcome), spec.ranks, outcome.last_step, outcome.wall_s);
  if (outcome.first_loss && outcome.last_loss)
    fmt::print(
        "  loss {} -> {}{}{}\n", loss_text(*outcome.first_loss), loss_text(*outcome.last_loss),
        outcome.tokens_per_s > 0 ? fmt::format(", {:.0f} tokens/s", outcome.tokens_per_s) : "",
        outcome.skipped_steps > 0
            ? fmt::format("; {} steps skipped by the loss scaler (fp16 overflow)",
                          outcome.skipped_steps)
            : "");
  print_failures(outcome.failures);
  print_malformed(outcome.malformed);
  if (!outcome.infra_detail.empty())
    fmt::print(
        "  {}: {}\n",
        outcome.infra_cause == harness::InfraCause::BadInput ? "bad input" : "infrastructure error",
        outcome.infra_detail);
  if (outcome.interrupted)
    fmt::print("  interrupted: stored as interrupted; the {} steps it ran: {}\n", outcome.last_step,
               harness::to_string(outcome.verdict));
  fmt::print("  output: {}\n", outcome.out_dir);
}

// What to run after a failed run: the search that finds where it broke.
void print_next_isolate(int64_t run_id) {
  fmt::print("next: faultline isolate --run {}\n", run_id);
}

int run_train(const TrainArgs& args) {
  const std::string config = resolve_train_recipe(args.config);
  auto recipe = harness::contract::load_recipe(config, args.overrides, args.option_names);
  harness::TrialSpec spec;
  spec.config_path = config;
  spec.overrides = trainer::absolute_path_overrides(args.overrides);
  spec.ranks = args.ranks > 0 ? args.ranks : static_cast<int>(recipe.ranks);
  spec.stop_after = args.steps;
  if (args.steps > recipe.steps) {
    const std::string key = recipe.command ? recipe.command->trainer.steps_key : "train.steps";
    throw UserError(
        fmt::format("--steps {} is more than the recipe's {} steps", args.steps, recipe.steps),
        "--steps",
        fmt::format("--steps runs a prefix of the recipe's run; to train longer, "
                    "--set {}={} (the schedule follows the run's length)",
                    key, args.steps));
  }
  spec.parent = "train";
  // Checked here too, as smoke checks its rungs: before the store is opened (or created).
  harness::contract::check_launchable(recipe, spec.ranks);
  auto launcher = make_launcher(args.context, config, args.overrides);
  auto options = runner_options(args.context);  // a bad --trainer or --detectors: no store made
  auto store = open_store(args.context);
  ProgressLine out(progress_style(args.context.quiet), "train");
  TrialProgress progress(out, StepLines::EveryTenth);
  options.observer = &progress;
  harness::TrialRunner runner(store, *launcher, options);
  auto outcome = runner.run(spec);
  out.finish();
  if (args.context.json) {
    fmt::print("{}\n", json{{"run_id", outcome.run_id},
                            {"verdict", ending_of(outcome)},
                            {"failures", failures_json(outcome.failures)},
                            {"infra_detail", outcome.infra_detail},
                            {"ranks", spec.ranks},
                            {"steps", outcome.last_step},
                            {"first_loss", finite_or_null(outcome.first_loss)},
                            {"last_loss", finite_or_null(outcome.last_loss)},
                            {"tokens_per_s", outcome.tokens_per_s},
                            {"skipped_steps", outcome.skipped_steps},
                            {"queue_wait_s", outcome.queue_wait_s},
                            {"run_s", outcome.run_s()},
                            {"malformed", outcome.malformed},
                            {"interrupted", outcome.interrupted}}
                           .dump());
  } else {
    print_outcome(outcome, spec);
    if (outcome.verdict == harness::Verdict::Fail) print_next_isolate(outcome.run_id);
  }
  return static_cast<int>(exit_for(outcome));
}

int run_smoke(const SmokeArgs& args) {
  const std::string config = resolve_train_recipe(args.config);
  auto recipe = harness::contract::load_recipe(config, args.overrides, args.option_names);
  auto ladder = harness::load_ladder(resolve_recipe(args.ladder, RecipeKind::Ladder, "--ladder"));
  auto rungs = harness::resolve_ladder(ladder, static_cast<int>(recipe.ranks), recipe.steps);
  for (const auto& rung : rungs) harness::contract::check_launchable(recipe, rung.ranks);
  auto launcher = make_launcher(args.context, config, args.overrides);
  auto options = runner_options(args.context);  // a bad --trainer or --detectors: no store made
  auto store = open_store(args.context);
  const std::string& reference = args.reference.empty() ? ladder.reference : args.reference;
  if (!reference.empty()) options.reference = load_reference(store, reference);
  ProgressLine out(progress_style(args.context.quiet), "smoke");
  TrialProgress progress(out, StepLines::None);
  options.observer = &progress;
  harness::TrialRunner runner(store, *launcher, options);

  // A trainer that cannot train on a fraction of its data climbs the rungs on all of it.
  const auto trainer_contract = harness::contract::TrainerContract::of(config);
  const bool fractions = trainer_contract.can(harness::contract::Capability::DataFraction);
  if (!fractions)
    fmt::print(
        stderr, "faultline smoke: every rung trains on all the data: {}\n",
        trainer_contract.skipped("data fractions", harness::contract::Capability::DataFraction));
  json rungs_json = json::array();
  harness::Verdict gate = harness::Verdict::Pass;
  ExitCode gate_exit = ExitCode::Ok;
  int64_t failing_run = 0;
  std::optional<harness::Outcome> cut_short;  // the rung SIGINT/SIGTERM interrupted
  for (size_t i = 0; i < rungs.size(); ++i) {
    const auto& rung = rungs[i];
    harness::TrialSpec spec;
    spec.config_path = config;
    spec.overrides = trainer::absolute_path_overrides(args.overrides);
    spec.ranks = rung.ranks;
    spec.stop_after = rung.steps;
    const double fraction = fractions ? rung.rung.data_fraction : 1.0;
    spec.data_fraction = fractions ? fraction : 0;
    spec.parent = "smoke";
    out.line(fmt::format("rung {}/{} \"{}\": {} rank(s) x {} steps x {:g}% data ...", i + 1,
                         rungs.size(), rung.rung.name, rung.ranks, rung.steps, fraction * 100));
    progress.set_prefix(fmt::format("rung {}/{}: ", i + 1, rungs.size()));
    const auto outcome = runner.run(spec);
    out.line(fmt::format("rung {}/{}: {} (run {}, {:.1f} s)", i + 1, rungs.size(),
                         ending_of(outcome), outcome.run_id, outcome.wall_s));
    if (outcome.verdict == harness::Verdict::Fail) failing_run = outcome.run_id;
    rungs_json.push_back({{"name", rung.rung.name},
                          {"ranks", rung.ranks},
                          {"steps", rung.steps},
                          {"data_fraction", fraction},
                          {"run_id", outcome.run_id},
                          {"verdict", ending_of(outcome)},
                          {"queue_wait_s", outcome.queue_wait_s},
                          {"run_s", outcome.run_s()},
                          {"failures", failures_json(outcome.failures)},
                          {"infra_detail", outcome.infra_detail}});
    if (!args.context.json) print_outcome(outcome, spec);
    if (outcome.interrupted) {
      cut_short = outcome;
      break;  // no rung after it runs, and the gate has no verdict
    }
    if (outcome.verdict != harness::Verdict::Pass) {
      gate = outcome.verdict;
      gate_exit = exit_for(outcome);
      break;  // the golden rule: never climb past a failing rung
    }
  }
  const std::string verdict =
      cut_short ? ending_of(*cut_short) : std::string(harness::to_string(gate));
  if (args.context.json)
    fmt::print(
        "{}\n",
        json{{"verdict", verdict}, {"interrupted", cut_short.has_value()}, {"rungs", rungs_json}}
            .dump());
  else if (cut_short)
    fmt::print("smoke gate: interrupted at rung {}/{} (run {}); no verdict\n", rungs_json.size(),
               rungs.size(), cut_short->run_id);
  else
    fmt::print("smoke gate: {}\n", verdict);
  if (!args.context.json && failing_run > 0) print_next_isolate(failing_run);
  return static_cast<int>(cut_short ? ExitCode::Infra : gate_exit);
}

}  // namespace

void add_run_commands(CLI::App& app, int& exit_code) {
  auto train_args = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand("train", "one supervised trainer run, stored and judged");
  train
      ->add_option("-c,--config", train_args->config,
                   "trainer recipe: a TOML file or an installed recipe's name (tiny)")
      ->required();
  train->add_option("--set", train_args->overrides, "override a recipe key: section.key=value");
  train
      ->add_option("--ranks", train_args->ranks,
                   "ranks to launch (default: the recipe's dist.ranks)")
      ->check(at_least(1));
  train
      ->add_option("--steps", train_args->steps, "stop after this many steps (a prefix of the run)")
      ->check(at_least(1));
  add_context_options(*train);
  add_launcher_option(*train);
  train->callback([train_args, train, &exit_code] {
    train_args->option_names = option_names(*train);
    exit_code = run_train(*train_args);
  });

  auto smoke_args = std::make_shared<SmokeArgs>();
  auto* smoke = app.add_subcommand("smoke", "the golden-rule gate: small rungs before big ones");
  smoke
      ->add_option("-c,--config", smoke_args->config,
                   "trainer recipe: a TOML file or an installed recipe's name (tiny)")
      ->required();
  smoke->add_option("--set", smoke_args->overrides, "override a recipe key: section.key=value");
  smoke->add_option("--ladder", smoke_args->ladder,
                    "ladder file, or an installed ladder's name (default: default)");
  smoke->add_option("--reference", smoke_args->reference,
                    "a stored reference (faultline reference add): each rung's loss is judged "
                    "against its runs' (loss_regression); default: the ladder's reference");
  add_context_options(*smoke);
  add_launcher_option(*smoke);
  smoke->callback([smoke_args, smoke, &exit_code] {
    smoke_args->option_names = option_names(*smoke);
    exit_code = run_smoke(*smoke_args);
  });
}

}  // namespace faultline::cli
