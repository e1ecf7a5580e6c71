// The verdict on a built commit: the --test command's exit code as `git bisect run` reads it, or
// the recipe run on the trainer built at that commit and judged by the stream detectors.
#include <unistd.h>

#include <filesystem>

#include "common/error.hpp"
#include "harness/commits/commit_judge.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/launch/local_launcher.hpp"
#include "harness/launch/subprocess.hpp"
#include "probes/detectors/compare.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using bisect::Observation;

namespace {

// Failures that end a run early: a run with one of them says nothing about any other kind.
bool ends_run(const detectors::Failure& failure) {
  using detectors::FailureKind;
  for (FailureKind kind : {FailureKind::Crash, FailureKind::Hang, FailureKind::Oom,
                           FailureKind::Nonfinite, FailureKind::Data})
    if (failure.kind == kind) return true;
  return false;
}

std::string describe(const detectors::Failure& failure) {
  std::string text = to_string(failure.kind);
  if (failure.step >= 0) text += " at step " + std::to_string(failure.step);
  if (!failure.detail.empty()) text += ": " + failure.detail;
  return text;
}

std::string first_line(const std::string& text) {
  const auto start = text.find_first_not_of("\n ");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

// Pass/Fail/InfraError -> good/bad/skip; with a failure kind, only that kind is bad.
void classify(const Outcome& outcome, std::optional<detectors::FailureKind> kind,
              std::optional<double> baseline, double min_ratio, CommitRun& run) {
  if (outcome.verdict == Verdict::InfraError || outcome.verdict == Verdict::Skip) {
    run.observation = Observation::Skip;
    run.detail = std::string(to_string(outcome.verdict)) + ": " + first_line(outcome.infra_detail);
    return;
  }
  const detectors::Failure* hiding = nullptr;
  for (const auto& failure : outcome.failures) {
    const bool warning = detectors::severity(failure.kind) == detectors::Severity::Warning;
    if (kind ? failure.kind == *kind : !warning) {
      run.observation = Observation::Bad;
      run.detail = "fail: " + describe(failure);
      return;
    }
    if (ends_run(failure) && !hiding) hiding = &failure;
  }
  if (hiding) {
    run.observation = Observation::Skip;
    run.detail = std::string("cannot judge ") + to_string(*kind) + ": " + describe(*hiding);
    return;
  }
  run.observation = Observation::Good;
  run.detail = "pass";
  if (kind == detectors::FailureKind::Slow && baseline) {
    if (auto slow = detectors::compare_throughput(*baseline, outcome.tokens_per_s, min_ratio)) {
      run.observation = Observation::Bad;
      run.detail = "fail: " + describe(*slow);
    } else {
      run.detail = "pass: " + std::to_string(static_cast<int64_t>(outcome.tokens_per_s)) +
                   " tokens/s, baseline " + std::to_string(static_cast<int64_t>(*baseline));
    }
  }
}

}  // namespace

CommitRun CommitJudge::run_test(const std::string& commit, int run, const std::string& tree) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", options_.test};
  spec.cwd = tree;
  spec.env = {{"FAULTLINE_BISECT_COMMIT", commit},
              {"FAULTLINE_BISECT_RUN", std::to_string(run)},
              {"FAULTLINE_BISECT_REPO", repo_.top()}};
  spec.output_path = log_path(commit, "run" + std::to_string(run) + ".test");
  spec.timeout_s = options_.test_timeout_s;
  spec.interrupted = options_.runner.interrupted;
  const CommandResult result = run_command(spec);
  if (result.end == CommandEnd::Interrupted) throw Interrupted();
  ++executed_;
  CommitRun verdict;
  verdict.commit = commit;
  verdict.run = run;
  verdict.stage = CommitStage::Test;
  verdict.log = spec.output_path;
  verdict.detail = describe(result, spec);
  // git bisect run: 0 good, 125 skip, 1..127 bad, anything else aborts. A timeout is bad, as
  // the usual `timeout 600 CMD` (exit 124) would make it.
  const bool aborts = result.end == CommandEnd::Signaled ||
                      (result.end == CommandEnd::Exited && result.exit_code >= 128);
  if (aborts) {
    built_.erase(commit);  // keep its worktree to look at
    throw BisectAborted("the test command at commit " + commit + ": " + verdict.detail +
                        ", which aborts the bisection as in git bisect run (log: " +
                        spec.output_path + "; worktree kept at " + tree + ")");
  }
  if (result.end == CommandEnd::TimedOut || result.exit_code != 0)
    verdict.observation = result.exit_code == 125 && result.end == CommandEnd::Exited
                              ? Observation::Skip
                              : Observation::Bad;
  else
    verdict.observation = Observation::Good;
  return verdict;
}

std::string CommitJudge::recipe_in(const std::string& tree) const {
  fs::path recipe = options_.recipe;
  if (recipe.is_relative() && fs::exists(tree / recipe)) recipe = tree / recipe;
  return fs::absolute(recipe).string();
}

CommitRun CommitJudge::run_recipe(const std::string& commit, int run, const std::string& tree,
                                  std::optional<detectors::FailureKind> kind,
                                  const std::string& seed) {
  CommitRun verdict;
  verdict.commit = commit;
  verdict.run = run;
  verdict.stage = CommitStage::Trial;
  verdict.observation = Observation::Skip;
  const std::string trainer = tree + "/" + options_.trainer_path;
  const fs::path recipe = recipe_in(tree);
  // A command trainer's recipe names its own program, run in the commit's tree.
  bool command_trainer = false;
  try {
    command_trainer = fs::exists(recipe) && contract::is_command_recipe(recipe.string());
  } catch (const UserError&) {
    // judged below, with the recipe's errors
  }
  if (!command_trainer && access(trainer.c_str(), X_OK) != 0) {
    verdict.detail = "no trainer at " + trainer + " (--trainer-path) after the build";
    ++executed_;
    return verdict;
  }
  TrialSpec spec;
  spec.config_path = recipe.string();
  spec.overrides = options_.overrides;
  if (!seed.empty()) spec.overrides.push_back(seed);
  spec.stop_after = options_.steps;
  spec.parent = "bisect-commits:" + commit;
  Outcome outcome;
  try {
    spec.ranks =
        options_.ranks > 0
            ? options_.ranks
            : static_cast<int>(contract::load_recipe(spec.config_path, spec.overrides).ranks);
    RunnerOptions runner_options = options_.runner;
    runner_options.trainer = trainer;
    LocalLauncher launcher;
    TrialRunner runner(store_, launcher, runner_options);
    outcome = runner.run(spec);
  } catch (const UserError& error) {
    // The recipe does not fit the code of this commit (a key it does not know yet): unjudgeable.
    const auto& item = error.items().front();
    verdict.detail = "the recipe is invalid at this commit: " + item.what +
                     (item.where.empty() ? "" : " (" + item.where + ")") +
                     (item.hint.empty() ? "" : "; " + item.hint);
    ++executed_;
    return verdict;
  }
  if (outcome.interrupted) throw Interrupted();
  ++executed_;
  verdict.run_id = outcome.run_id;
  verdict.log = outcome.out_dir;
  verdict.tokens_per_s = outcome.tokens_per_s;
  classify(outcome, kind, baseline_tokens_per_s_, options_.runner.thresholds.slow.min_ratio,
           verdict);
  return verdict;
}

}  // namespace faultline::harness
