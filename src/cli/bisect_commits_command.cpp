// `faultline bisect commits`: parse the flags into a CommitBisectRequest, run it with a progress
// line per run on stderr, print the answer (or one JSON document) and set the exit code.
#include "cli/bisect_commits_command.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/error_output.hpp"
#include "cli/option_checks.hpp"
#include "cli/progress.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "harness/commits/commit_bisection.hpp"
#include "harness/isolate/isolate.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CommitsArgs {
  RunContextOptions& context = shared_context();
  harness::CommitBisectRequest request;
  std::string test, recipe;
  std::string kind;  // --kind, parsed into the judge's failure kind
  bool flaky = false;
  bool keep_worktrees = false;
};

const std::map<std::string, harness::RangeEnds> kRangeEnds = {{"check", harness::RangeEnds::Check},
                                                              {"trust", harness::RangeEnds::Trust}};

std::string short_id(const std::string& commit) {
  return commit.substr(0, 12);
}

void check_flaky_options(const bisect::FlakyOptions& options) {
  ErrorList errors;
  auto probability = [&](double value, const char* flag) {
    if (!(value >= 0 && value < 1))
      errors.add(std::string(flag) + " " + fmt::format("{}", value) + " is out of range", flag,
                 "give a probability in [0, 1)");
  };
  probability(options.p_bad_looks_good, "--p-bad-looks-good");
  probability(options.p_good_looks_bad, "--p-good-looks-bad");
  probability(options.prior_no_culprit, "--prior-no-culprit");
  if (options.p_bad_looks_good + options.p_good_looks_bad >= 1)
    errors.add("the two flake rates add up to 1 or more", "--p-bad-looks-good/--p-good-looks-bad",
               "a verdict must say something: keep their sum below 1");
  if (!(options.confidence > 0 && options.confidence <= 1))
    errors.add(fmt::format("--confidence {} is out of range", options.confidence), "--confidence",
               "give a probability in (0, 1]");
  if (options.max_executions < 1)
    errors.add(fmt::format("--max-executions {} is out of range", options.max_executions),
               "--max-executions", "give at least 1");
  errors.throw_if_any();
}

// Turns the flags into the request's judge; user errors for what cannot work.
void complete_request(CommitsArgs& args) {
  auto& request = args.request;
  auto& judge = request.judge;
  if (args.test.empty() == args.recipe.empty())
    throw UserError(args.test.empty() ? "nothing to judge a commit by" : "both --test and --recipe",
                    "--test/--recipe", "give exactly one: a shell command or a trainer recipe");
  if (!args.kind.empty()) {
    judge.failure_kind = detectors::parse_failure_kind(args.kind);
    if (!judge.failure_kind)
      throw UserError(
          "unknown failure kind '" + args.kind + "'", "--kind",
          fmt::format("give one of {}", fmt::join(detectors::failure_kind_names(), ", ")));
  }
  request.search = args.flaky ? harness::CommitSearch::Flaky : harness::CommitSearch::Plain;
  if (args.flaky) check_flaky_options(request.flaky);
  judge.kind = args.test.empty() ? harness::JudgeKind::Recipe : harness::JudgeKind::Test;
  judge.test = args.test;
  judge.recipe = args.recipe;
  judge.worktrees = args.keep_worktrees ? harness::WorktreeUse::Keep : harness::WorktreeUse::Remove;
  const auto& context = args.context;
  const std::string work_dir =
      fs::absolute(context.work_dir.empty() ? "faultline-runs" : context.work_dir).string();
  judge.work_dir = work_dir;
  judge.runner.work_dir = work_dir;
  judge.runner.supervise.step_timeout_s = context.step_timeout_s;
  judge.runner.supervise.startup_s = context.startup_s;
  if (!context.detectors.empty())
    judge.runner.thresholds = detectors::load_thresholds(context.detectors);
  judge.runner.interrupted = interrupt_flag();
  judge.judge_identity = judge_identity(context);
}

// One line per judged run, counting down as git does once the run is observed.
void print_progress(ProgressLine& out, const harness::CommitRun& run, int index,
                    std::size_t candidates, std::optional<std::size_t> left) {
  std::string countdown;
  if (left) {
    // git's estimate: each verdict halves what is left.
    const int steps = *left > 1 ? static_cast<int>(std::ceil(std::log2(*left))) : 0;
    countdown = fmt::format("; {} revision(s) left, roughly {} step(s)", *left, steps);
  }
  out.line(fmt::format(
      "run {} ({} candidates): {}{}: {} ({}){}{}", index, candidates, short_id(run.commit),
      run.run > 0 ? fmt::format(" #{}", run.run + 1) : std::string(),
      run.stage == harness::CommitStage::Baseline ? "baseline" : to_string(run.observation),
      run.detail, run.cached ? " [from the store]" : "", countdown));
}

json report_json(const harness::CommitBisectReport& report) {
  json verdicts = json::array();
  for (const auto& v : report.verdicts)
    verdicts.push_back({{"commit", v.commit}, {"good", v.good}, {"bad", v.bad}, {"skip", v.skip}});
  json runs = json::array();
  for (const auto& run : report.runs) {
    json entry = to_json(run);
    entry["cached"] = run.cached;
    runs.push_back(entry);
  }
  const bool found = report.answer == harness::CommitAnswer::Culprit;
  json doc = {
      {"answer", to_string(report.answer)},
      {"culprit", found ? json(report.culprit) : json(nullptr)},
      {"parent", found && !report.parents.empty() ? json(report.parents.front()) : json(nullptr)},
      {"parents", found ? json(report.parents) : json::array()},
      {"subject", found ? json(report.culprit_subject) : json(nullptr)},
      {"confidence", report.confidence ? json(*report.confidence) : json(nullptr)},
      {"executions", report.executions},
      {"executed", report.executed},
      {"reused", report.reused},
      {"skipped", report.skipped},
      {"possible", report.possible},
      {"verdicts", verdicts},
      {"runs", runs},
      {"candidates", report.candidates},
      {"good", report.good_commit},
      {"bad", report.bad_commit},
      {"search_id", report.search_id},
      {"resumed", report.resumed}};
  if (report.seed_flake_rate) doc["seed_flake_rate"] = *report.seed_flake_rate;
  if (report.p_good_looks_bad) doc["p_good_looks_bad"] = *report.p_good_looks_bad;
  if (report.answer == harness::CommitAnswer::Unsure && !report.culprit.empty())
    doc["best_guess"] = report.culprit;
  return doc;
}

void print_report(const harness::CommitBisectReport& report) {
  switch (report.answer) {
    case harness::CommitAnswer::Culprit:
      fmt::print("first bad commit: {} {}\n", report.culprit, report.culprit_subject);
      for (const auto& parent : report.parents) fmt::print("parent: {}\n", parent);
      break;
    case harness::CommitAnswer::NoCulprit:
      fmt::print("no culprit: the failure of {} was a flake\n", short_id(report.bad_commit));
      break;
    case harness::CommitAnswer::OnlySkipped:
      fmt::print("only skipped commits are left; the first bad commit is one of:\n");
      for (const auto& commit : report.possible) fmt::print("  {}\n", commit);
      break;
    case harness::CommitAnswer::Inconsistent:
      fmt::print("the verdicts contradict a single first bad commit\n");
      break;
    case harness::CommitAnswer::Unsure:
      fmt::print("no answer at the asked-for confidence; best guess: {}\n",
                 report.culprit.empty() ? "no culprit" : report.culprit);
      break;
  }
  if (report.confidence) fmt::print("confidence: {:.4f}\n", *report.confidence);
  if (report.seed_flake_rate)
    fmt::print("seed noise: {:.0f} % of the good commit's seeds fail against the others{}\n",
               100 * *report.seed_flake_rate,
               report.p_good_looks_bad
                   ? fmt::format(" (P(good looks bad) used: {})", *report.p_good_looks_bad)
                   : std::string());
  fmt::print("executions: {} ({} run now, {} from the store); {} candidates; {} skipped\n",
             report.executions, report.executed, report.reused, report.candidates,
             report.skipped.size());
  for (const auto& v : report.verdicts)
    fmt::print("  {}  good {}  bad {}  skip {}\n", short_id(v.commit), v.good, v.bad, v.skip);
}

int run_commits(CommitsArgs& args) {
  complete_request(args);
  auto store = open_store(args.context);
  harness::CommitBisectReport report;
  const auto error_format = args.context.json ? ErrorFormat::Json : ErrorFormat::Text;
  try {
    ProgressLine out(progress_style(args.context.quiet), "bisect commits");
    report =
        harness::bisect_commits(store, args.request,
                                [&out](const harness::CommitRun& run, int index,
                                       std::size_t candidates, std::optional<std::size_t> left) {
                                  print_progress(out, run, index, candidates, left);
                                });
  } catch (const harness::Interrupted&) {
    return report_stop(error_format, "bisect commits", StopKind::Interrupted, "",
                       "finished verdicts are stored, and running the same command again "
                       "resumes without repeating them");
  } catch (const harness::BisectAborted& error) {
    return report_stop(error_format, "bisect commits", StopKind::Aborted, error.what());
  } catch (const harness::InfraError& error) {
    return report_stop(error_format, "bisect commits", StopKind::Infra, error.what());
  }
  if (args.context.json)
    fmt::print("{}\n", report_json(report).dump());
  else
    print_report(report);
  return report.answer == harness::CommitAnswer::Culprit
             ? static_cast<int>(ExitCode::Ok)
             : static_cast<int>(ExitCode::NotReproduced);  // 3: no (single) culprit
}

}  // namespace

void add_bisect_commits_command(CLI::App& bisect, int& exit_code) {
  auto args = std::make_shared<CommitsArgs>();
  auto& request = args->request;
  auto& judge = request.judge;
  auto* command = bisect.add_subcommand(
      "commits", "the first bad commit between --good and --bad, by a test command or a recipe");
  command->add_option("--repo", request.repo, "a git work tree (left untouched)")->required();
  command->add_option("--good", request.good, "a commit known good (repeatable)")
      ->required()
      ->allow_extra_args(false);  // `--good A --good B`: one revision per flag
  command->add_option("--bad", request.bad, "a commit known bad")->required();
  command->add_option("--test", args->test,
                      "shell command run in each commit's worktree: 0 good, 125 skip, "
                      "1-127 bad, >= 128 aborts");
  auto* recipe = command->add_option("--recipe", args->recipe,
                                     "trainer recipe run on the trainer built at each commit");
  command->add_option("--build", judge.build, "shell command that builds a worktree; fails: skip");
  command->add_option("--build-timeout", judge.build_timeout_s, "seconds (default 3600)")
      ->check(above_zero());
  command
      ->add_option("--test-timeout", judge.test_timeout_s,
                   "seconds per --test run; a timeout is bad (default 600)")
      ->check(above_zero());
  command
      ->add_option("--trainer-path", judge.trainer_path,
                   "the trainer inside a built worktree (default "
                   "build/src/trainer/faultline-train)")
      ->needs(recipe);
  command->add_option("--set", judge.overrides, "override a recipe key: section.key=value")
      ->needs(recipe);
  command->add_option("--steps", judge.steps, "run only the first N steps")
      ->check(at_least(1))
      ->needs(recipe);
  command->add_option("--ranks", judge.ranks, "ranks (default: the recipe's dist.ranks)")
      ->check(at_least(1))
      ->needs(recipe);
  command
      ->add_option("--kind", args->kind,
                   "only this failure kind is bad (slow: against the good commit's tokens/s)")
      ->needs(recipe);
  command
      ->add_option("--reference-seeds", judge.reference_seeds,
                   "--kind loss_regression: runs of the good commit (seeds) that are the "
                   "reference (default 4)")
      ->check(at_least(1))
      ->needs(recipe);
  auto* flaky = command->add_flag("--flaky", args->flaky,
                                  "flake-aware Bayesian bisection with a no-culprit answer");
  command
      ->add_option("--p-bad-looks-good", request.flaky.p_bad_looks_good,
                   "P(a bad commit passes a run) (default 0.1)")
      ->needs(flaky);
  command
      ->add_option("--p-good-looks-bad", request.flaky.p_good_looks_bad,
                   "P(a good commit fails a run) (default 0.025)")
      ->needs(flaky);
  command
      ->add_option("--prior-no-culprit", request.flaky.prior_no_culprit,
                   "prior P(the bad commit's failure was a flake) (default 0.1)")
      ->needs(flaky);
  command
      ->add_option("--confidence", request.flaky.confidence,
                   "stop at this posterior (default 0.99)")
      ->needs(flaky);
  command
      ->add_option("--max-executions", request.flaky.max_executions,
                   "stop after this many runs (default 100)")
      ->needs(flaky);
  command
      ->add_option_function<std::string>(
          "--ends", [&request](const std::string& ends) { request.ends = kRangeEnds.at(ends); },
          "check (default): judge the bad and good commits first; trust: take them as given, as "
          "git does")
      ->check(CLI::IsMember({"check", "trust"}));
  command->add_option("--jobs", request.jobs, "commits proposed per round (judged in turn)")
      ->check(at_least(1));
  command->add_flag("--keep-worktrees", args->keep_worktrees, "leave every worktree on disk");
  add_context_options(*command);
  command->callback([args, &exit_code] { exit_code = run_commits(*args); });
}

}  // namespace faultline::cli
