// One run of one commit for `bisect commits`: a worktree of its own, the build, then the test or
// the recipe; builds and verdicts are cached in the store's trials table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/observation.hpp"
#include "harness/commits/git_repo.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/failure_kind.hpp"

namespace faultline::store {
class Store;
}

namespace faultline::harness {

enum class JudgeKind { Test, Recipe };         // --test CMD | --recipe FILE
enum class WorktreeUse { Remove, Keep };       // --keep-worktrees
enum class BuildMemory { PerRun, PerCommit };  // PerCommit: a built worktree serves every rerun

struct CommitJudgeOptions {
  JudgeKind kind = JudgeKind::Test;
  std::string build;  // a shell command line run in the worktree; "" : nothing to build
  std::string test;   // JudgeKind::Test: a shell command line, judged by its exit code
  double build_timeout_s = 3600;
  double test_timeout_s = 600;
  // JudgeKind::Recipe
  std::string recipe;  // relative: inside the worktree when it exists there, else from the cwd
  std::vector<std::string> overrides;
  int64_t steps = 0;  // 0: the recipe's whole run
  int ranks = 0;      // 0: the recipe's dist.ranks
  // nullopt: any failure is bad; Slow: against the good commit's tokens/s; LossRegression:
  // against `reference_seeds` runs of the good commit (train.seed + 1000 + k)
  std::optional<detectors::FailureKind> failure_kind;
  int reference_seeds = 4;
  std::string trainer_path = "build/src/trainer/faultline-train";  // inside the worktree
  RunnerOptions runner;        // supervision, thresholds, interrupt flag; trainer set per commit
  std::string judge_identity;  // thresholds and timeouts as text: part of every recipe verdict
  std::string work_dir;        // absolute; worktrees/ and commit-logs/ go under it
  WorktreeUse worktrees = WorktreeUse::Remove;
};

// Where a commit run's verdict came from: the commit's build (it failed), its --test command, a
// recipe trial; or the good commit's run as the --kind slow baseline or a loss reference.
enum class CommitStage { Build, Test, Trial, Baseline, Reference };
NLOHMANN_JSON_SERIALIZE_ENUM(CommitStage, {{CommitStage::Build, "build"},
                                           {CommitStage::Test, "test"},
                                           {CommitStage::Trial, "trial"},
                                           {CommitStage::Baseline, "baseline"},
                                           {CommitStage::Reference, "reference"}})

// What a run was for, in the trial cache's key: a verdict on a commit, or a run of the good
// commit that must pass (the baseline, a reference seed).
enum class RunRole { Verdict, Baseline, Reference };
NLOHMANN_JSON_SERIALIZE_ENUM(RunRole, {{RunRole::Verdict, "verdict"},
                                       {RunRole::Baseline, "baseline"},
                                       {RunRole::Reference, "reference"}})

// One judged run of a commit.
struct CommitRun {
  std::string commit;
  int run = 0;  // the n-th run of this commit (0-based); reruns come only with --flaky
  bisect::Observation observation = bisect::Observation::Skip;
  CommitStage stage = CommitStage::Trial;
  std::string detail;  // "exit 1", "build failed: exit 2", "fail: loss_spike at step 7", ...
  std::string log;     // the command's output, or the trial's run directory
  int64_t run_id = 0;  // recipe runs: the stored run
  double tokens_per_s = 0;
  bool cached = false;  // the verdict came from the store; nothing was run
};

// A --test command exited >= 128 or died of a signal: like `git bisect run`, the bisection
// stops; the worktree of that commit is kept for a look.
struct BisectAborted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CommitJudge {
 public:
  CommitJudge(store::Store& store, const GitRepo& repo, CommitJudgeOptions options,
              BuildMemory memory);
  ~CommitJudge();  // removes the worktrees still held (unless WorktreeUse::Keep)
  CommitJudge(const CommitJudge&) = delete;
  CommitJudge& operator=(const CommitJudge&) = delete;

  // Removes leftover worktrees of this repository under work_dir (a killed earlier run).
  void remove_leftovers();
  // --kind slow: runs the recipe at the good commit first and keeps its tokens/s.
  CommitRun measure_baseline(const std::string& good_commit);
  // --kind loss_regression: runs the recipe at the good commit on `reference_seeds` seeds; every
  // later run is judged against their losses. The share of them that fails against the others
  // (each against the rest) is the seed noise's flake rate.
  struct SeedReference {
    std::vector<CommitRun> runs;
    int flagged = 0;  // runs flagged loss_regression against the other seeds
  };
  SeedReference measure_reference(const std::string& good_commit);
  // The verdict of run `run` of `commit`: from the cache, or by building and testing it.
  // Throws BisectAborted, or Interrupted (harness/isolate.hpp) when the user interrupts.
  CommitRun judge(const std::string& commit, int run);

  // What decides every verdict besides the commit (build, test or recipe, judge): a search's
  // identity includes it.
  nlohmann::json identity() const;

  int executed() const { return executed_; }  // test commands and trials actually run
  int reused() const { return reused_; }      // verdicts taken from the store

 private:
  nlohmann::json verdict_identity(const std::string& commit, int run, RunRole role);
  std::optional<std::string> prepare(const std::string& commit);  // worktree path, or nullopt
  CommitRun run_test(const std::string& commit, int run, const std::string& tree);
  // `kind`: the failure kind that makes the run bad (nullopt: any).
  // `seed`: a train.seed override ("": the recipe's own).
  CommitRun run_recipe(const std::string& commit, int run, const std::string& tree,
                       std::optional<detectors::FailureKind> kind, const std::string& seed = "");
  // Run `run` of the good commit (the baseline, a reference seed), from the store when it ran
  // before; UserError (hint: `purpose`) when it does not build or pass. `seed_offset` >= 0:
  // on train.seed + seed_offset.
  CommitRun passing_good_run(const std::string& good_commit, int run, RunRole role,
                             int64_t seed_offset, const std::string& purpose);
  // The recipe's path at a commit's tree (a relative one inside it when it exists there).
  std::string recipe_in(const std::string& tree) const;
  // "train.seed=<the recipe's seed + offset>", "" when the recipe has none or does not load.
  std::string seed_override(const std::string& tree, int64_t offset) const;
  std::string worktree_path(const std::string& commit) const;
  std::string log_path(const std::string& commit, const std::string& what) const;
  void release(const std::string& commit);

  store::Store& store_;
  const GitRepo& repo_;
  CommitJudgeOptions options_;
  BuildMemory memory_;
  std::map<std::string, std::string> built_;  // commit -> worktree with a finished build
  // Why prepare() returned nothing, and whether that failure was remembered from an earlier run.
  std::string last_build_failure_;
  enum class FailureSource { Ran, Store } last_build_source_ = FailureSource::Ran;
  std::optional<double> baseline_tokens_per_s_;
  std::string reference_digest_;  // of the seed reference's losses, "" when none
  int executed_ = 0, reused_ = 0;
};

nlohmann::json to_json(const CommitRun& run);
CommitRun commit_run_from_json(const nlohmann::json& json);

}  // namespace faultline::harness
