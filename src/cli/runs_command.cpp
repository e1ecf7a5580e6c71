// `faultline runs` (a table of stored runs, filtered, search trials hidden unless --all) and
// `faultline show RUN` (one run laid out as `show F<id>` lays out a finding; --json the document).
#include <fmt/core.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/browse_commands.hpp"
#include "cli/finding_report.hpp"
#include "cli/option_checks.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/event_names.hpp"
#include "common/text.hpp"
#include "harness/browse/export.hpp"
#include "harness/browse/gc.hpp"
#include "harness/browse/run_list.hpp"
#include "harness/launch/launcher_config.hpp"
#include "harness/trial/run_owner.hpp"
#include "harness/trial/trial.hpp"
#include "harness/trial/trial_cache.hpp"
#include "report/gpu_figures.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct RunsArgs {
  RunContextOptions& context = shared_context();
  int limit = 20;
  bool failed = false, all = false;
  std::string recipe, since;
};

int64_t steps_run(const store::MetricsSummary& summary) {
  return summary.ranks > 0 ? summary.steps / summary.ranks : 0;
}

// How long it ran; unknown for an imported run, whose times in the store are the import's.
std::optional<double> duration_of(const store::RunInfo& run) {
  if (harness::origin_of(run.parent) == harness::RunOrigin::Import) return std::nullopt;
  return seconds_between(run.started_at, run.ended_at);
}

// "12.3 s"; an imported run's own time is not known, which is not "still running".
std::string duration_text(const store::RunInfo& run) {
  if (const auto seconds = duration_of(run)) return format_seconds(*seconds);
  return run.status == store::RunStatus::Running ? "still running" : "its duration is not known";
}

std::string first_failure(const store::RunInfo& run) {
  if (run.failures.empty()) return "-";
  const auto& f = run.failures.front();
  return f.step < 0 ? f.kind : fmt::format("{}@{}", f.kind, f.step);
}

std::string loss_text(const std::optional<double>& loss) {
  return loss ? faultline::loss_text(*loss) : "-";
}

json run_json(const store::RunInfo& run, const store::MetricsSummary& summary) {
  json failures = json::array();
  for (const auto& f : run.failures)
    failures.push_back({{"kind", f.kind},
                        {"step", f.step < 0 ? json() : json(f.step)},
                        {"rank", f.rank < 0 ? json() : json(f.rank)},
                        {"detail", f.detail}});
  const auto seconds = duration_of(run);
  return {{"run_id", run.id},
          {"status", store::to_string(run.status)},
          {"verdict", run.verdict},
          {"origin", harness::to_string(harness::origin_of(run.parent))},
          {"launcher", run.launcher},  // local, slurm, or import
          {"config_path", run.config_path},
          {"config_hash", run.config_hash},
          {"ranks", run.ranks},
          {"steps", run.steps},
          {"data_fraction", run.data_fraction},
          {"started_at", run.started_at},
          {"ended_at", run.ended_at},
          {"duration_s", seconds ? json(*seconds) : json()},
          {"parent", run.parent},
          {"failures", failures},
          {"infra_detail", run.infra_detail},  // "": none (only an infra_error run has one)
          {"malformed", run.malformed},
          {"steps_stored", summary.steps},
          {"steps_run", steps_run(summary)},
          {"first_loss", finite_or_null(summary.first_loss)},
          {"last_loss", finite_or_null(summary.last_loss)},
          // null, not 0, for a trainer that reports no tokens or step times (a log-only script)
          {"tokens_per_s", summary.tokens_per_s > 0 ? json(summary.tokens_per_s) : json()},
          {"skipped_steps", summary.skipped_steps}};
}

harness::RunFilter filter_of(const RunsArgs& args) {
  harness::RunFilter filter;
  filter.verdicts = args.failed ? harness::VerdictsShown::FailedOnly : harness::VerdictsShown::All;
  filter.trials = args.all ? harness::TrialsShown::Shown : harness::TrialsShown::Hidden;
  filter.recipe = args.recipe;
  if (!args.since.empty()) {
    filter.since = point_in_time(args.since, Clock::now());
    if (!filter.since)
      throw UserError("'" + args.since + "' is neither a date nor a duration", "--since",
                      "give a date such as 2026-12-01 (UTC) or a duration back from now: 90s, "
                      "30m, 12h, 3d, 2w");
  }
  return filter;
}

void list_runs(const RunsArgs& args) {
  const auto filter = filter_of(args);
  auto store = open_existing_store(args.context.db);
  auto with_trials = filter;
  with_trials.trials = harness::TrialsShown::Shown;
  json out = json::array();
  int shown = 0, hidden = 0;
  for (const auto& run : store.list_runs(-1)) {
    if (!harness::matches(run, filter)) {
      hidden += harness::matches(run, with_trials);
      continue;
    }
    if (shown == args.limit) continue;
    ++shown;
    const auto summary = store.summarize(run.id);
    if (args.context.json) {
      out.push_back(run_json(run, summary));
      continue;
    }
    if (shown == 1)
      fmt::print("{:>5}  {:<6} {:<11} {:>5} {:>6}  {:>8}  {:>9}  {:<18} {:<24} {}\n", "RUN",
                 "ORIGIN", "VERDICT", "RANKS", "STEPS", "TIME", "LAST LOSS", "FIRST FAILURE",
                 "STARTED", "RECIPE");
    const auto seconds = duration_of(run);
    fmt::print("{:>5}  {:<6} {:<11} {:>5} {:>6}  {:>8}  {:>9}  {:<18} {:<24} {}\n", run.id,
               harness::to_string(harness::origin_of(run.parent)),
               run.verdict.empty() ? store::to_string(run.status) : run.verdict, run.ranks,
               steps_run(summary), seconds ? format_seconds(*seconds) : "-",
               loss_text(summary.last_loss), first_failure(run), run.started_at,
               harness::recipe_name(run.config_path));
  }
  if (args.context.json) {
    fmt::print("{}\n", json{{"runs", out}}.dump());
    return;
  }
  if (shown == 0) fmt::print("no stored runs match\n");
  if (hidden > 0) fmt::print("({} search trial(s) hidden; --all shows them)\n", hidden);
}

// The --set assignments of a run's command line (the bundled trainer's), a key once with the
// value that won (the trial's scale repeats dist.ranks); "" for none.
std::string overrides_of(const std::vector<std::string>& argv) {
  std::vector<std::string> sets;
  for (const auto& assignment : set_assignments(argv)) {
    const std::string key = assignment.substr(0, assignment.find('='));
    sets.erase(
        std::remove_if(sets.begin(), sets.end(),
                       [&](const std::string& s) { return s.substr(0, s.find('=')) == key; }),
        sets.end());
    sets.push_back(assignment);
  }
  return fmt::format("{}", fmt::join(sets, " "));
}

void print_run(const store::Store& store, const store::RunInfo& run) {
  const auto summary = store.summarize(run.id);
  const auto argv = json::parse(run.argv_json, nullptr, false);
  const auto words =
      argv.is_array() ? argv.get<std::vector<std::string>>() : std::vector<std::string>{};
  const bool on_slurm = harness::parse_launcher_kind(run.launcher) == harness::LauncherKind::Slurm;
  fmt::print("run {}: {} ({}, {} rank(s), {} of {} steps, {}{})\n", run.id,
             run.verdict.empty() ? store::to_string(run.status) : run.verdict,
             harness::to_string(harness::origin_of(run.parent)), run.ranks, steps_run(summary),
             run.steps, duration_text(run), on_slurm ? ", on Slurm" : "");
  fmt::print("  recipe:   {} (config {})\n", run.config_path, run.config_hash);
  const std::string overrides = overrides_of(words);
  fmt::print("  overrides: {}\n", overrides.empty() ? "-" : overrides);
  const std::string dir = harness::run_directory(run, store.events(run.id, {kCheckpointEvent}));
  std::string gone;
  if (!dir.empty() && !std::filesystem::exists(dir))
    gone = " (removed)";
  else if (const auto owner =
               dir.empty() ? std::nullopt : harness::held_by_another_run(dir, store.path(), run.id))
    gone =
        fmt::format(" (removed; the folder now holds run {} of {})", owner->run_id, owner->store);
  fmt::print("  run dir:  {}{}\n", dir.empty() ? "-" : dir, gone);
  fmt::print("  started:  {}{}\n", run.started_at,
             run.ended_at.empty() ? "" : ", ended " + run.ended_at);
  fmt::print("  loss:     {} -> {} ({} step records{})\n", loss_text(summary.first_loss),
             loss_text(summary.last_loss), summary.steps,
             summary.skipped_steps > 0
                 ? fmt::format("; {} skipped by the loss scaler", summary.skipped_steps)
                 : "");
  if (!run.infra_detail.empty())
    fmt::print("  could not run: {}\n", run.infra_detail);
  else if (run.failures.empty())
    fmt::print("  failures: none\n");
  for (const auto& f : run.failures)
    fmt::print("  failure:  {} at step {} rank {}: {}\n", f.kind,
               f.step < 0 ? std::string("-") : std::to_string(f.step),
               f.rank < 0 ? std::string("-") : std::to_string(f.rank), f.detail);
  print_malformed(run.malformed);
  if (const auto gpu = report::gpu_shares(report::stored_gpu_steps(store, run.id).steps))
    fmt::print(
        "  gpu:      compute {:.0f}%, NCCL {:.0f}%, idle {:.0f}% over {} joined step(s) "
        "(CUPTI; per step: faultline report {})\n",
        100 * gpu->compute, 100 * gpu->nccl, 100 * gpu->idle, gpu->steps, run.id);
  fmt::print("  command:  {}\n", fmt::join(words, " "));
  if (harness::parse_verdict(run.verdict) == harness::Verdict::Fail)
    fmt::print("  next:     faultline isolate --run {}\n", run.id);
}

}  // namespace

store::RunInfo load_run(const store::Store& store, const std::string& given) {
  int64_t run_id = 0;
  size_t used = 0;
  try {
    run_id = std::stoll(given, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != given.size())
    throw UserError("'" + given + "' is not a run id", "RUN",
                    "give a run id (see `faultline runs`)");
  auto run = store.get_run(run_id);
  if (!run) throw UserError("no run " + given, store.path(), "see `faultline runs --all`");
  return *run;
}

void add_runs_commands(CLI::App& app) {
  auto args = std::make_shared<RunsArgs>();
  auto* runs = app.add_subcommand("runs", "stored runs, newest first (search trials with --all)");
  add_store_options(*runs);
  runs->add_option("-n,--limit", args->limit, "how many (default 20)")->check(at_least(1));
  runs->add_flag("--failed", args->failed, "only runs that failed (verdict fail or infra_error)");
  runs->add_option("--recipe", args->recipe,
                   "only runs of this recipe (a name such as tiny, or a path)");
  runs->add_option("--since", args->since,
                   "only runs started since a date (2026-12-01) or a duration back (12h, 3d)");
  runs->add_flag("--all", args->all, "also the trials isolate and bisect ran");
  runs->callback([args] { list_runs(*args); });

  RunContextOptions* show_args = &shared_context();
  auto reference = std::make_shared<std::string>();
  auto* show = app.add_subcommand("show", "one stored run (an id) or finding (F<id>)");
  show->add_option("ID", *reference, "run id, or finding id such as F3")->required();
  add_store_options(*show);
  show->callback([show_args, reference] {
    if (finding_reference(*reference)) {
      show_finding(show_args->db, *reference, show_args->json);
      return;
    }
    auto store = open_existing_store(show_args->db);
    const auto run = load_run(store, *reference);
    if (!show_args->json) {
      print_run(store, run);
      return;
    }
    auto doc = run_json(run, store.summarize(run.id));
    doc["config"] = run.config;
    doc["argv"] = json::parse(run.argv_json, nullptr, false);
    doc["run_dir"] = harness::run_directory(run, store.events(run.id, {kCheckpointEvent}));
    if (const auto gpu = report::gpu_shares(report::stored_gpu_steps(store, run.id).steps))
      doc["gpu"] = {{"steps", gpu->steps},
                    {"compute_share", gpu->compute},
                    {"nccl_share", gpu->nccl},
                    {"idle_share", gpu->idle}};
    fmt::print("{}\n", doc.dump());
  });
}

}  // namespace faultline::cli
