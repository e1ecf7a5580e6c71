// `faultline import`: read a run directory into the store and print what the detectors found.
#include "cli/import_command.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/option_checks.hpp"
#include "cli/reference_command.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/trial/import_run.hpp"
#include "harness/trial/trial_cache.hpp"
#include "probes/detectors/failure_kind.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct ImportArgs {
  RunContextOptions& context = shared_context();
  std::string dir;
  int ranks = 0;
  std::string config;  // -c: the recipe of the user's own trainer that ran it
  std::vector<std::string> overrides;
  std::vector<std::string> option_names;
  std::string reference;  // --reference NAME: judge the run's loss against it
};

// A run of another trainer, imported without its recipe: faultline cannot launch it again.
void print_foreign_note(const harness::ImportResult& result, const std::string& dir) {
  fmt::print(
      "  note: its trainer ({}) is not faultline-train, and no recipe was given: the run was "
      "judged without its warm-up, and `isolate --run` cannot launch it again\n",
      result.trainer);
  fmt::print(
      "  next: faultline import {} -c RECIPE   (RECIPE: your trainer's recipe, "
      "docs/external-trainers.md)\n",
      dir);
}

// A job restarted from a checkpoint appended to its metrics files: say so, once for the ranks
// that restarted alike, and why the steps counted are its last run of each.
void print_restarts(const std::vector<harness::Restart>& restarts) {
  std::vector<std::pair<harness::Restart, std::vector<int>>> alike;
  for (const auto& restart : restarts) {
    auto same = std::find_if(alike.begin(), alike.end(), [&](const auto& group) {
      const auto& r = group.first;
      return r.stopped_after == restart.stopped_after && r.ended == restart.ended &&
             r.resumed_from == restart.resumed_from && r.rerun == restart.rerun &&
             r.terminated == restart.terminated;
    });
    if (same == alike.end())
      alike.push_back({restart, {restart.rank}});
    else
      same->second.push_back(restart.rank);
  }
  for (const auto& [r, ranks] : alike)
    fmt::print("  note: rank(s) {} restarted after step {} ({}), {}{}\n", fmt::join(ranks, ","),
               r.stopped_after,
               r.terminated ? "stopped by SIGTERM, as its end event says: a time limit, a "
                              "preemption or a requeue"
               : r.ended    ? "it had ended"
                            : "with no end event: a crash, a hang or a preemption, the records "
                              "cannot tell",
               r.resumed_from > 0 ? fmt::format("from the checkpoint of step {}", r.resumed_from)
                                  : std::string("from the start"),
               r.rerun > 0 ? fmt::format(": steps {}..{} ran twice, and their records are the "
                                         "second run's",
                                         r.resumed_from + 1, r.stopped_after)
                           : std::string());
}

// Its only failures are judged against a reference: isolate needs the setup it is worse than.
bool worse_than_reference(const std::vector<detectors::Failure>& failures) {
  auto curve = [](const detectors::Failure& failure) { return detectors::is_curve(failure.kind); };
  return std::any_of(failures.begin(), failures.end(), curve) &&
         std::all_of(failures.begin(), failures.end(), [&](const detectors::Failure& failure) {
           return curve(failure) ||
                  detectors::severity(failure.kind) != detectors::Severity::Failure;
         });
}

int run_import(const ImportArgs& args) {
  harness::ImportRequest request;
  request.dir = args.dir;
  request.ranks = args.ranks;
  if (!args.context.detectors.empty())
    request.thresholds = detectors::load_thresholds(args.context.detectors);
  request.argv = {"faultline", "import", args.dir};
  if (args.ranks > 0)
    request.argv.insert(request.argv.end(), {"--ranks", std::to_string(args.ranks)});
  if (!args.config.empty()) {
    const std::string recipe = resolve_train_recipe(args.config);
    request.recipe = harness::contract::load_recipe(recipe, args.overrides, args.option_names);
    request.argv.insert(request.argv.end(), {"-c", recipe});
    for (const auto& set : args.overrides) request.argv.insert(request.argv.end(), {"--set", set});
  } else if (!args.overrides.empty()) {
    throw UserError("--set without -c", "--set",
                    "--set changes the keys of the recipe given with -c RECIPE");
  }
  std::optional<store::Store> store;
  auto opened_store = [&]() -> store::Store& {
    if (!store) store.emplace(open_store(args.context));
    return *store;
  };
  if (!args.reference.empty()) {
    request.reference = load_reference(opened_store(), args.reference);
    request.argv.insert(request.argv.end(), {"--reference", args.reference});
  }
  const auto result = harness::import_run(opened_store, request);
  const int64_t skipped_steps = store->summarize(result.run_id).skipped_steps;

  if (args.context.json) {
    fmt::print("{}\n", json{{"run_id", result.run_id},
                            {"verdict", harness::to_string(result.verdict)},
                            {"ranks", result.ranks},
                            {"last_step", result.last_step},
                            {"checkpoints", result.checkpoints},
                            {"skipped_steps", skipped_steps},
                            {"config", harness::to_string(result.config)},
                            {"trainer", result.trainer},
                            {"failures", failures_json(result.failures)},
                            {"malformed", result.malformed},
                            {"restarts", result.restarts},
                            {"saved_over", result.saved_over},
                            {"terminated", result.terminated},
                            {"earlier_imports", result.earlier_imports}}
                           .dump());
  } else {
    fmt::print("imported run {}: {}  ({} rank(s), {} steps, {} checkpoint(s))\n", result.run_id,
               harness::to_string(result.verdict), result.ranks, result.last_step,
               result.checkpoints);
    print_failures(result.failures);
    if (skipped_steps > 0)
      fmt::print("  note: the loss scaler skipped {} step(s) (fp16 overflow)\n", skipped_steps);
    print_malformed(result.malformed);
    print_restarts(result.restarts);
    if (!result.terminated.empty())
      fmt::print(
          "  note: rank(s) {} were stopped by SIGTERM after step {} (their end events say so: "
          "a time limit or a cancel), not a crash\n",
          fmt::join(result.terminated, ","), result.last_step);
    for (const auto& [path, steps] : result.saved_over)
      fmt::print(
          "  note: {} was saved over at steps {}: it holds step {}'s state only, so a replay "
          "starts from there or before it; keep one file per checkpoint (e.g. ckpt_{{step}}.pt) "
          "to replay from any\n",
          path, fmt::join(steps, ", "), steps.back());
    if (!result.earlier_imports.empty())
      fmt::print(
          "  note: this {} was imported before, as run(s) {}; they are kept, and `isolate "
          "--run {}` uses this one\n",
          std::filesystem::is_directory(args.dir) ? "directory" : "log",
          fmt::join(result.earlier_imports, ", "), result.run_id);
    if (result.config == harness::ImportedConfig::Foreign)
      print_foreign_note(result, args.dir);
    else if (worse_than_reference(result.failures))
      fmt::print(
          "  next: faultline isolate --run {} --baseline-set KEY=VALUE...   (the healthy run's "
          "values of the keys that differ, or --baseline RECIPE)\n",
          result.run_id);
    else if (result.verdict == harness::Verdict::Fail)
      fmt::print("  next: faultline isolate --run {}\n", result.run_id);
  }
  // Importing succeeded whatever the run did: the verdict is in the output, not the exit code.
  return static_cast<int>(ExitCode::Ok);
}

}  // namespace

void add_import_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ImportArgs>();
  auto* command = app.add_subcommand(
      "import", "store a run faultline did not launch (its metrics and checkpoints), judged");
  command
      ->add_option("dir", args->dir,
                   "the run's directory (metrics.rank<r>.jsonl per rank); with a log-only "
                   "trainer's recipe, its log file or a folder of rank<r>.log")
      ->required();
  command->add_option("--ranks", args->ranks, "expect this many ranks (default: the files found)")
      ->check(at_least(1));
  command->add_option("-c,--config", args->config,
                      "the recipe of your own trainer that the run was started from: isolate "
                      "--run launches it again from the run's checkpoints");
  command->add_option("--set", args->overrides,
                      "a recipe key as the run had it: section.key=value");
  command->add_option("--reference", args->reference,
                      "a stored reference (faultline reference add): the run's loss is judged "
                      "against its runs' (loss_regression)");
  add_context_options(*command);
  command->callback([args, command, &exit_code] {
    args->option_names = option_names(*command);
    exit_code = run_import(*args);
  });
}

}  // namespace faultline::cli
