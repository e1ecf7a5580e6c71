// --kind loss_regression: the good commit run on several seeds is the reference every commit's
// loss curve is judged against, and how often one seed fails against the others is the flake
// rate of a verdict (the seed noise).
#include <memory>

#include "common/error.hpp"
#include "harness/commits/commit_judge.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/trial/trial_cache.hpp"
#include "probes/detectors/reference.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

// Seeds of the reference are far from the runs' own (seed + run): no run is its own reference.
constexpr int64_t kReferenceSeedOffset = 1000;

}  // namespace

std::string CommitJudge::seed_override(const std::string& tree, int64_t offset) const {
  try {
    const auto keys = contract::load_recipe(recipe_in(tree), options_.overrides).keys;
    auto it = keys.find("train.seed");
    if (it == keys.end()) return "";
    return "train.seed=" + std::to_string(std::stoll(it->second) + offset);
  } catch (const std::exception&) {
    return "";  // a recipe this commit cannot read: run_recipe says why
  }
}

CommitJudge::SeedReference CommitJudge::measure_reference(const std::string& good_commit) {
  if (options_.reference_seeds < 2)
    throw UserError("--reference-seeds " + std::to_string(options_.reference_seeds) + " is too few",
                    "--reference-seeds", "the seed noise needs at least 2 runs of the good commit");
  SeedReference reference;
  auto runs = std::make_shared<std::vector<std::vector<StepRecord>>>();
  for (int k = 0; k < options_.reference_seeds; ++k) {
    CommitRun result =
        passing_good_run(good_commit, k, RunRole::Reference, kReferenceSeedOffset + k,
                         "--kind loss_regression runs the good commit as the reference");
    result.stage = CommitStage::Reference;
    runs->push_back(store_.steps(result.run_id));
    reference.runs.push_back(result);
  }
  if (memory_ == BuildMemory::PerRun) release(good_commit);
  // Each seed against the others: how often a good commit's run reads as a regression.
  for (size_t i = 0; i < runs->size(); ++i) {
    std::vector<std::vector<StepRecord>> others;
    for (size_t j = 0; j < runs->size(); ++j)
      if (j != i) others.push_back((*runs)[j]);
    if (detectors::compare_to_reference((*runs)[i], others,
                                        options_.runner.thresholds.loss_regression))
      ++reference.flagged;
  }
  reference_digest_ = reference_digest(*runs);
  options_.runner.reference = runs;
  return reference;
}

}  // namespace faultline::harness
