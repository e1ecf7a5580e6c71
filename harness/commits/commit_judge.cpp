// Checkout, build, cache: the parts of judging a commit that do not depend on how it is judged
// (commit_verdict.cpp runs the --test command or the recipe).
#include "harness/commits/commit_judge.hpp"

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/text.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/launch/subprocess.hpp"
#include "harness/trial/trial_cache.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;

namespace {

std::string digest_if_file(const std::string& path) {
  std::error_code error;
  if (path.empty() || !fs::is_regular_file(path, error)) return "";
  std::ifstream in(path, std::ios::binary);
  return hex64(hash_text(std::string((std::istreambuf_iterator<char>(in)), {})));
}

// The files outside the repository a test command names by absolute path (a script beside it,
// `--test /ci/check.sh`), with their digests: edited, the stored verdicts judged by the old one
// are not this test's (a fixed script repeated the old answer, every verdict from the store).
// A file in the repository is the commit's own, which the verdict's commit already names.
nlohmann::json outside_files_of(const std::string& command, const std::string& repo_top) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& word : split(command, ' ')) {
    const std::string path = trim(word);
    if (path.empty() || path.front() != '/' || starts_with(path, repo_top + "/")) continue;
    if (const std::string digest = digest_if_file(path); !digest.empty()) files[path] = digest;
  }
  return files;
}

}  // namespace

nlohmann::json to_json(const CommitRun& run) {
  return {{"commit", run.commit},
          {"run", run.run},
          {"verdict", to_string(run.observation)},
          {"stage", run.stage},
          {"detail", run.detail},
          {"log", run.log},
          {"run_id", run.run_id},
          {"tokens_per_s", run.tokens_per_s}};
}

CommitRun commit_run_from_json(const nlohmann::json& json) {
  CommitRun run;
  run.commit = json.at("commit").get<std::string>();
  run.run = json.at("run").get<int>();
  run.observation = bisect::observation_from_string(json.at("verdict").get<std::string>());
  run.stage = json.at("stage").get<CommitStage>();
  run.detail = json.at("detail").get<std::string>();
  run.log = json.at("log").get<std::string>();
  run.run_id = json.at("run_id").get<int64_t>();
  run.tokens_per_s = json.at("tokens_per_s").get<double>();
  return run;
}

CommitJudge::CommitJudge(store::Store& store, const GitRepo& repo, CommitJudgeOptions options,
                         BuildMemory memory)
    : store_(store), repo_(repo), options_(std::move(options)), memory_(memory) {}

CommitJudge::~CommitJudge() {
  while (!built_.empty()) {
    try {
      release(built_.begin()->first);
    } catch (...) {
      built_.erase(built_.begin());  // best effort: `git worktree prune` tidies up later
    }
  }
}

std::string CommitJudge::worktree_path(const std::string& commit) const {
  return options_.work_dir + "/worktrees/" + commit;
}

std::string CommitJudge::log_path(const std::string& commit, const std::string& what) const {
  fs::create_directories(options_.work_dir + "/commit-logs");
  return options_.work_dir + "/commit-logs/" + commit + "." + what + ".log";
}

void CommitJudge::release(const std::string& commit) {
  auto it = built_.find(commit);
  if (it == built_.end()) return;
  const std::string path = it->second;
  built_.erase(it);
  if (options_.worktrees == WorktreeUse::Remove) repo_.remove_worktree(path);
}

void CommitJudge::remove_leftovers() {
  std::error_code error;
  const fs::path mine = fs::weakly_canonical(options_.work_dir + "/worktrees", error);
  for (const auto& path : repo_.worktrees()) {
    const fs::path parent = fs::weakly_canonical(fs::path(path).parent_path(), error);
    if (!error && parent == mine) repo_.remove_worktree(path);
  }
}

nlohmann::json CommitJudge::identity() const {
  nlohmann::json identity = {{"repo", repo_.top()},
                             {"build", options_.build},
                             {"build_timeout_s", options_.build_timeout_s}};
  if (options_.kind == JudgeKind::Test) {
    identity["test"] = options_.test;
    identity["test_timeout_s"] = options_.test_timeout_s;
    // Only with such files: the identities of other tests, and their stored verdicts, stay.
    if (auto files = outside_files_of(options_.test, repo_.top()); !files.empty())
      identity["test_files"] = files;
    return identity;
  }
  identity["recipe"] = options_.recipe;
  identity["recipe_digest"] = digest_if_file(options_.recipe);  // a recipe from outside the repo
  identity["overrides"] = options_.overrides;
  identity["steps"] = options_.steps;
  identity["ranks"] = options_.ranks;
  identity["failure_kind"] = options_.failure_kind ? to_string(*options_.failure_kind) : "";
  identity["trainer_path"] = options_.trainer_path;
  identity["judge_digest"] = hex64(hash_text(options_.judge_identity));
  if (options_.failure_kind == detectors::FailureKind::LossRegression)
    identity["reference_seeds"] = options_.reference_seeds;
  return identity;
}

nlohmann::json CommitJudge::verdict_identity(const std::string& commit, int run, RunRole role) {
  nlohmann::json identity = {{"kind", "commit"}, {"v", 1},     {"role", role},
                             {"commit", commit}, {"run", run}, {"judge", this->identity()}};
  if (baseline_tokens_per_s_ && role != RunRole::Baseline)
    identity["baseline_tokens_per_s"] = *baseline_tokens_per_s_;
  if (!reference_digest_.empty() && role == RunRole::Verdict)
    identity["reference"] = reference_digest_;
  return identity;
}

std::optional<std::string> CommitJudge::prepare(const std::string& commit) {
  if (auto it = built_.find(commit); it != built_.end()) return it->second;
  const nlohmann::json build_identity = {
      {"kind", "commit-build"},  {"v", 1},
      {"repo", repo_.top()},     {"commit", commit},
      {"build", options_.build}, {"build_timeout_s", options_.build_timeout_s}};
  const std::string build_hash = trial_hash(build_identity);
  if (!options_.build.empty()) {
    // Only a failed build is worth remembering: a good one's files go with its worktree.
    if (auto stored = store_.find_trial(build_hash); stored && stored->outcome_json) {
      const auto outcome = nlohmann::json::parse(*stored->outcome_json);
      if (!outcome.at("ok").get<bool>()) {
        last_build_failure_ = "build failed (stored): " + outcome.at("detail").get<std::string>();
        last_build_source_ = FailureSource::Store;
        return std::nullopt;
      }
    }
  }
  const std::string path = worktree_path(commit);
  repo_.add_worktree(path, commit);
  built_[commit] = path;
  if (options_.build.empty()) return path;

  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", options_.build};
  spec.cwd = path;
  spec.env = {{"FAULTLINE_BISECT_COMMIT", commit}, {"FAULTLINE_BISECT_REPO", repo_.top()}};
  spec.output_path = log_path(commit, "build");
  spec.timeout_s = options_.build_timeout_s;
  spec.interrupted = options_.runner.interrupted;
  const CommandResult result = run_command(spec);
  if (result.end == CommandEnd::Interrupted) throw Interrupted();
  const bool ok = result.end == CommandEnd::Exited && result.exit_code == 0;
  const std::string detail = describe(result, spec) + " (log: " + spec.output_path + ")";
  store_.put_trial(build_hash, build_identity.dump(),
                   nlohmann::json{{"ok", ok}, {"detail", detail}}.dump(), std::nullopt);
  if (ok) return path;
  last_build_failure_ = "build failed: " + detail;
  last_build_source_ = FailureSource::Ran;
  release(commit);
  return std::nullopt;
}

CommitRun CommitJudge::judge(const std::string& commit, int run) {
  const nlohmann::json identity = verdict_identity(commit, run, RunRole::Verdict);
  const std::string hash = trial_hash(identity);
  if (auto stored = store_.find_trial(hash); stored && stored->outcome_json) {
    CommitRun cached = commit_run_from_json(nlohmann::json::parse(*stored->outcome_json));
    cached.cached = true;
    ++reused_;
    return cached;
  }
  CommitRun result;
  if (auto tree = prepare(commit)) {
    // Against seeds of the good commit, each rerun of a commit is another seed: seed noise is
    // what --flaky's reruns sample.
    const bool reseed = options_.failure_kind == detectors::FailureKind::LossRegression && run > 0;
    result = options_.kind == JudgeKind::Test
                 ? run_test(commit, run, *tree)
                 : run_recipe(commit, run, *tree, options_.failure_kind,
                              reseed ? seed_override(*tree, run) : "");
  } else {
    result.commit = commit;
    result.run = run;
    result.observation = bisect::Observation::Skip;
    result.stage = CommitStage::Build;
    result.detail = last_build_failure_;
    if (last_build_source_ == FailureSource::Store) {
      result.cached = true;
      ++reused_;
    } else {
      ++executed_;
    }
  }
  store_.put_trial(hash, identity.dump(), to_json(result).dump(),
                   result.run_id > 0 ? std::optional<int64_t>(result.run_id) : std::nullopt);
  if (memory_ == BuildMemory::PerRun) release(commit);
  return result;
}

CommitRun CommitJudge::passing_good_run(const std::string& good_commit, int run, RunRole role,
                                        int64_t seed_offset, const std::string& purpose) {
  const nlohmann::json identity = verdict_identity(good_commit, run, role);
  const std::string hash = trial_hash(identity);
  if (auto stored = store_.find_trial(hash); stored && stored->outcome_json) {
    CommitRun result = commit_run_from_json(nlohmann::json::parse(*stored->outcome_json));
    result.cached = true;
    ++reused_;
    return result;
  }
  const std::string where = "--good " + good_commit;
  auto tree = prepare(good_commit);
  if (!tree)
    throw UserError("the good commit does not build: " + last_build_failure_, where, purpose);
  std::string seed;
  if (seed_offset >= 0) {
    seed = seed_override(*tree, seed_offset);
    if (seed.empty())
      throw UserError("the recipe has no train.seed at the good commit", where,
                      purpose + " on several seeds");
  }
  CommitRun result = run_recipe(good_commit, run, *tree, std::nullopt, seed);  // must simply pass
  if (result.observation != bisect::Observation::Good)
    throw UserError("the good commit does not pass the recipe" +
                        (seed.empty() ? std::string() : " (" + seed + ")") + ": " + result.detail,
                    where, purpose + ", which must pass");
  store_.put_trial(hash, identity.dump(), to_json(result).dump(), result.run_id);
  return result;
}

CommitRun CommitJudge::measure_baseline(const std::string& good_commit) {
  CommitRun result = passing_good_run(good_commit, 0, RunRole::Baseline, -1,
                                      "--kind slow compares against a run of the good commit");
  release(good_commit);
  if (result.tokens_per_s <= 0)
    throw UserError("the good commit's run reports no tokens/s", "--good " + good_commit,
                    "--kind slow compares throughput: the trainer must report it");
  result.stage = CommitStage::Baseline;
  baseline_tokens_per_s_ = result.tokens_per_s;
  return result;
}

}  // namespace faultline::harness
