// `faultline import`: read a run directory into the store and print what the detectors found.
#include "cli/import_command.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "harness/trial/import_run.hpp"
#include "harness/trial/trial_cache.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct ImportArgs {
  RunContextOptions& context = shared_context();
  std::string dir;
  int ranks = 0;
};

int run_import(const ImportArgs& args) {
  harness::ImportRequest request;
  request.dir = args.dir;
  request.ranks = args.ranks;
  if (!args.context.detectors.empty())
    request.thresholds = detectors::load_thresholds(args.context.detectors);
  request.argv = {"faultline", "import", args.dir};
  if (args.ranks > 0)
    request.argv.insert(request.argv.end(), {"--ranks", std::to_string(args.ranks)});
  auto store = open_store(args.context);
  const auto result = harness::import_run(store, request);

  if (args.context.json) {
    fmt::print("{}\n", json{{"run_id", result.run_id},
                            {"verdict", harness::to_string(result.verdict)},
                            {"ranks", result.ranks},
                            {"last_step", result.last_step},
                            {"checkpoints", result.checkpoints},
                            {"failures", failures_json(result.failures)},
                            {"malformed", result.malformed}}
                           .dump());
  } else {
    fmt::print("imported run {}: {}  ({} rank(s), {} steps, {} checkpoint(s))\n", result.run_id,
               harness::to_string(result.verdict), result.ranks, result.last_step,
               result.checkpoints);
    print_failures(result.failures);
    print_malformed(result.malformed);
    if (result.verdict == harness::Verdict::Fail)
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
  command->add_option("dir", args->dir, "the run's directory: metrics.rank<r>.jsonl per rank")
      ->required();
  command->add_option("--ranks", args->ranks, "expect this many ranks (default: the files found)")
      ->check(CLI::PositiveNumber);
  add_context_options(*command);
  command->callback([args, &exit_code] { exit_code = run_import(*args); });
}

}  // namespace faultline::cli
