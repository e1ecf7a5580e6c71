// The search commands: parse, build the request, run the Isolator with a progress line per
// trial on stderr, print a short summary (or one JSON document), set the exit code.
#include "cli/isolate_commands.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/error_output.hpp"
#include "cli/finding_report.hpp"
#include "cli/option_checks.hpp"
#include "cli/progress.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/launch/slurm_launcher.hpp"
#include "trainer/train_config.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct IsolateArgs {
  RunContextOptions& context = shared_context();
  std::string config;
  std::vector<std::string> overrides;
  std::string baseline;
  std::vector<std::string> baseline_overrides;
  int64_t run = 0;
  int jobs = 1;
  int ranks = 0;
  std::string hosts;  // comma-separated host labels: the ranks' first, then spares
  std::vector<std::string> option_names;  // suggested for an unknown --set key
  bool step_timeout_given = false;        // --step-timeout was on the command line
};

std::vector<std::string> host_labels(const std::string& list, int ranks) {
  std::vector<std::string> hosts;
  if (list.empty()) return hosts;
  for (const auto& item : split(list, ',')) {
    const std::string label = trim(item);
    if (label.empty() || std::find(hosts.begin(), hosts.end(), label) != hosts.end())
      throw UserError("invalid host list \"" + list + "\" (an empty or repeated label)", "--hosts",
                      "give distinct labels separated by commas, e.g. node0,node1,node2");
    hosts.push_back(label);
  }
  if (!hosts.empty() && static_cast<int>(hosts.size()) < ranks)
    throw UserError(
        std::to_string(hosts.size()) + " host label(s) for " + std::to_string(ranks) + " ranks",
        "--hosts", "give at least one label per rank; labels after those are spares");
  return hosts;
}

// On Slurm a host label is the node a rank is placed on. Inside an allocation its nodes are the
// hosts when none are given (one rank per node, the rest spares); every label must be a node,
// or one sbatch would refuse it ("Invalid node name specified") without saying which.
void place_on_slurm_nodes(harness::TrialSpec& failing) {
  const bool in_allocation = std::getenv("SLURM_JOB_NODELIST") != nullptr;
  const bool take_allocation =
      failing.hosts.empty() && in_allocation && !failing.config_path.empty();
  if (failing.hosts.empty() && !take_allocation) return;
  const auto nodes = harness::slurm_nodes();
  if (nodes.empty()) return;  // Slurm cannot be asked: its own error comes with the first trial
  if (take_allocation) {
    if (static_cast<int>(nodes.size()) >= failing.ranks) failing.hosts = nodes;
    return;
  }
  std::vector<std::string> unknown;
  for (const auto& label : failing.hosts)
    if (std::find(nodes.begin(), nodes.end(), label) == nodes.end()) unknown.push_back(label);
  if (!unknown.empty())
    throw UserError(
        fmt::format("host label(s) {} are not nodes of {}", fmt::join(unknown, ","),
                    in_allocation ? "this allocation" : "the cluster"),
        "--hosts",
        fmt::format("with --launcher slurm each label is a node name: {}", fmt::join(nodes, ",")));
}

// A stored run replays its own recipe and keys: a -c or --set beside --run was dropped without a
// word, and the finding was not of the setup the user meant.
void refuse_recipe_beside_run(const IsolateArgs& args) {
  ErrorList errors;
  if (!args.config.empty())
    errors.add("-c " + args.config + " is not used with --run", "-c",
               "a stored run replays its own recipe: drop -c, or train the setup you mean "
               "(`faultline train -c ...`) and give that run to --run");
  std::vector<std::string> dropped;
  for (const auto& set : args.overrides)
    if (!starts_with(set, "launcher.")) dropped.push_back(set);
  if (!dropped.empty())
    errors.add(fmt::format("--set {} would not change run {}'s replays", fmt::join(dropped, " "),
                           args.run),
               "--set",
               "a stored run replays its own keys (a launcher.* key places its replays); to "
               "search against other values, give them as --baseline-set");
  errors.throw_if_any();
}

harness::TrialSpec failing_spec(const IsolateArgs& args) {
  harness::TrialSpec spec;
  if (args.config.empty()) return spec;
  spec.config_path = resolve_train_recipe(args.config);
  spec.overrides = trainer::absolute_path_overrides(args.overrides);
  const auto recipe =
      harness::contract::load_recipe(spec.config_path, spec.overrides, args.option_names);
  spec.ranks = args.ranks > 0 ? args.ranks : static_cast<int>(recipe.ranks);
  spec.parent = "isolate";
  spec.hosts = host_labels(args.hosts, spec.ranks);
  return spec;
}

std::optional<harness::TrialSpec> baseline_spec(const IsolateArgs& args,
                                                const harness::TrialSpec& failing) {
  if (args.baseline.empty() && args.baseline_overrides.empty()) return std::nullopt;
  harness::TrialSpec spec = failing;
  if (!args.baseline.empty()) {
    spec.config_path = resolve_train_recipe(args.baseline, "--baseline");
    spec.overrides.clear();
  }
  const auto baseline_overrides = trainer::absolute_path_overrides(args.baseline_overrides);
  spec.overrides.insert(spec.overrides.end(), baseline_overrides.begin(), baseline_overrides.end());
  spec.parent = "isolate:baseline";
  // With --run the failing config is the stored run's, known once it is loaded: the isolator
  // completes and checks the baseline then.
  if (spec.config_path.empty()) return spec;
  // bad input: report it now
  harness::contract::load_recipe(spec.config_path, spec.overrides, args.option_names);
  spec.parent = "isolate:baseline";
  return spec;
}

int run_isolate(const IsolateArgs& args, harness::IsolateScope scope, const std::string& command) {
  if (args.config.empty() && args.run == 0)
    throw UserError("nothing to isolate", "-c/--run", "give a failing recipe (-c) or a stored run");
  if (args.run > 0) refuse_recipe_beside_run(args);
  harness::IsolateRequest request;
  request.failing = failing_spec(args);
  // A stored run's replays run where it ran: its store is read first. Without one, bad input
  // is reported before a store is created.
  std::optional<store::Store> opened;
  runner_options(args.context);  // a bad --trainer or --detectors, before a store is made
  if (args.run > 0) opened.emplace(open_store(args.context));
  bool took_runs_launcher = false;
  const auto launcher_setup =
      opened ? launcher_config_of_run(args.context, *opened, args.run, args.overrides,
                                      took_runs_launcher)
             : launcher_config(args.context, request.failing.config_path, args.overrides);
  if (took_runs_launcher && !args.context.quiet)
    fmt::print(stderr,
               "faultline {}: run {} ran on Slurm: its replays do too (--launcher local runs "
               "them here)\n",
               command, args.run);
  auto launcher = harness::make_launcher(launcher_setup);
  if (launcher_setup.kind == harness::LauncherKind::Slurm) place_on_slurm_nodes(request.failing);
  request.baseline = baseline_spec(args, request.failing);
  if (scope == harness::IsolateScope::Config && !request.baseline)
    throw UserError("bisect config needs a baseline", "--baseline",
                    "give --baseline CFG or --baseline-set key=value");
  request.from_run = args.run;
  request.scope = scope;
  request.jobs = args.jobs;

  if (!opened) opened.emplace(open_store(args.context));
  auto& store = *opened;
  RunContextOptions context = args.context;
  if (args.run > 0) take_trainer_of_run(store, args.run, context, command, "--run");
  if (args.run > 0 && !args.step_timeout_given)
    if (auto timeout = step_timeout_of_run(store, args.run)) context.step_timeout_s = *timeout;
  auto options = runner_options(context);
  ProgressLine out(progress_style(args.context.quiet), command);
  SearchProgress progress(out);
  // Trials run side by side (--jobs) would draw over each other's live line.
  if (args.jobs == 1) options.observer = &progress;
  harness::TrialRunner runner(store, *launcher, options);
  harness::TrialCache cache(store, runner, options.trainer, judge_identity(context));
  harness::IsolateOptions isolate_options;
  isolate_options.trainer = options.trainer;
  isolate_options.work_dir = options.work_dir;
  harness::Isolator isolator(store, cache, isolate_options, std::ref(progress));
  harness::IsolateResult result;
  const auto error_format = args.context.json ? ErrorFormat::Json : ErrorFormat::Text;
  try {
    result = isolator.run(request);
    out.finish();
  } catch (const harness::Interrupted&) {
    out.finish();
    return report_stop(error_format, command, StopKind::Interrupted, "",
                       "finished trials are stored, and running the same command again resumes "
                       "without repeating them");
  } catch (const harness::InfraError& error) {
    out.finish();
    return report_stop(error_format, command, StopKind::Infra, error.what());
  }
  if (result.status == harness::IsolateStatus::NotReproduced) {
    if (args.context.json)
      fmt::print(
          "{}\n",
          json{{"finding_id", nullptr}, {"reproduced", false}, {"message", result.message}}.dump());
    else
      fmt::print("not reproduced: {}\n", result.message);
    return static_cast<int>(ExitCode::NotReproduced);
  }
  auto finding = store.get_finding(result.finding_id);
  if (args.context.json) {
    auto doc = finding_document(*finding);
    doc["already_stored"] = result.already_stored;
    fmt::print("{}\n", doc.dump());
  } else {
    print_finding(*finding);
    if (result.already_stored)
      fmt::print("  stored:   before, on {}; this search found it again (not stored twice)\n",
                 finding->created_at);
  }
  if (!args.context.json)
    fmt::print("next: faultline report F{0} --html f{0}.html\n", result.finding_id);
  return static_cast<int>(ExitCode::Ok);
}

void add_search_options(CLI::App& command, IsolateArgs& args, bool with_baseline) {
  command.add_option("-c,--config", args.config,
                     "the failing trainer recipe: a TOML file or an installed recipe's name");
  command.add_option("--set", args.overrides, "override a recipe key: section.key=value");
  command.add_option("--ranks", args.ranks, "ranks of the failing run (default: dist.ranks)")
      ->check(at_least(1));
  command.add_option("--run", args.run, "start from this stored failing run instead of -c")
      ->check(at_least(1));
  command.add_option("--jobs", args.jobs, "trials a search may propose at once")
      ->check(at_least(1));
  command.add_option("--hosts", args.hosts,
                     "host labels (FAULTLINE_HOST) of ranks 0..N-1, then spare hosts a search "
                     "may swap in: a,b,c,...");
  if (with_baseline) {
    command.add_option("--baseline", args.baseline, "a recipe known to be good");
    command.add_option("--baseline-set", args.baseline_overrides,
                       "the failing recipe with these keys is known to be good");
  }
  add_context_options(command);
  add_launcher_option(command);
}

}  // namespace

CLI::App* add_isolate_commands(CLI::App& app, int& exit_code) {
  auto isolate_args = std::make_shared<IsolateArgs>();
  auto* isolate = app.add_subcommand(
      "isolate", "find where a failing setup breaks: scale, step, module, samples, config");
  add_search_options(*isolate, *isolate_args, true);
  isolate->callback([isolate_args, isolate, &exit_code] {
    isolate_args->option_names = option_names(*isolate);
    isolate_args->step_timeout_given = option_given(*isolate, "--step-timeout");
    exit_code = run_isolate(*isolate_args, harness::IsolateScope::All, "isolate");
  });

  auto* bisect = app.add_subcommand("bisect", "one search axis alone");
  bisect->require_subcommand(1);
  const std::vector<std::tuple<const char*, const char*, harness::IsolateScope>> axes = {
      {"steps", "the first bad step and where in it", harness::IsolateScope::Steps},
      {"data", "the first bad step and the samples and shards it needs",
       harness::IsolateScope::Data},
      {"config", "the 1-minimal config change from a baseline", harness::IsolateScope::Config}};
  for (const auto& [name, help, scope] : axes) {
    auto args = std::make_shared<IsolateArgs>();
    auto* axis = bisect->add_subcommand(name, help);
    add_search_options(*axis, *args, scope == harness::IsolateScope::Config);
    axis->callback([args, axis, scope = scope, &exit_code] {
      args->option_names = option_names(*axis);
      args->step_timeout_given = option_given(*axis, "--step-timeout");
      exit_code = run_isolate(*args, scope, std::string("bisect ") + axis->get_name());
    });
  }
  add_finding_commands(app, exit_code);
  return bisect;
}

}  // namespace faultline::cli
