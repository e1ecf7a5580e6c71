// Phase 5: with a setup known to be good, ddmin over the config keys where the failing setup
// differs from it: the 1-minimal set of changes that, applied to the baseline, brings the
// failure back. Trials run at the minimal scale found before.
#include <algorithm>
#include <map>
#include <memory>

#include "bisect/ddmin.hpp"
#include "bisect/drive.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/isolate/isolate_phases.hpp"

namespace faultline::harness::isolate {

namespace {

std::map<std::string, std::string> resolved_keys(const TrialSpec& spec) {
  return contract::load_recipe(spec.config_path, spec.overrides).keys;
}

}  // namespace

std::optional<Reproduction> reproduce_against_baseline(Context& context, const TrialSpec& failing,
                                                       const TrialSpec& baseline,
                                                       std::string& why_not, Outcome& ran) {
  context.begin_phase("reproduce: the baseline as the loss reference", 1);
  TrialSpec reference_spec = baseline;
  reference_spec.ranks = failing.ranks;
  reference_spec.stop_after = failing.stop_after;
  reference_spec.data_fraction = failing.data_fraction;
  const Outcome base = context.run(reference_spec);
  if (base.verdict != Verdict::Pass) {
    why_not += "; the baseline (run " + std::to_string(base.run_id) + ": " +
               to_string(base.verdict) + ") is no loss reference";
    return std::nullopt;
  }
  context.judge_against(base.run_id);
  std::string against;
  auto reproduction =
      reproduce(context, failing, detectors::FailureKind::LossRegression, against, ran);
  if (!reproduction)
    why_not +=
        "; nor does it train worse than the baseline (run " + std::to_string(base.run_id) + ")";
  return reproduction;
}

std::vector<ConfigChange> config_differences(const Context& context, const TrialSpec& failing,
                                             const TrialSpec& baseline) {
  const auto bad = resolved_keys(failing);
  const auto good = resolved_keys(baseline);
  std::vector<ConfigChange> differences;
  for (const auto& [key, value] : bad) {
    if (context.trainer.watches_only(key)) continue;
    auto it = good.find(key);
    if (it != good.end() && it->second != value) differences.push_back({key, it->second, value});
  }
  if (differences.empty()) {
    throw UserError("the baseline computes the same thing as the failing setup",
                    baseline.config_path,
                    "a baseline must differ in a config key (--baseline-set optim.lr=3e-3)");
  }
  return differences;
}

std::vector<ConfigChange> config_culprit(Context& context, const TrialSpec& failing,
                                         const TrialSpec& baseline, const Scale& scale,
                                         const detectors::Failure& failure) {
  const auto differences = config_differences(context, failing, baseline);
  const auto full = contract::load_recipe(failing.config_path, failing.overrides);
  const int64_t shown = detectors::evidence_step(failure);
  const int64_t horizon =
      shown > 0 ? std::min(full.steps, std::max(2 * shown, shown + 10)) : full.steps;
  const int accumulate = std::max(1, failing.ranks / std::max(1, scale.ranks));

  // The baseline with `changes` applied, at the minimal scale.
  auto trial = [&](const std::vector<size_t>& changes) {
    TrialSpec spec = baseline;
    for (size_t index : changes)
      spec.overrides.push_back(differences[index].key + "=" + differences[index].failing);
    if (accumulate > 1)
      spec = context.trainer.accumulate(spec, scale.ranks,
                                        context.trainer.grad_accum(spec) * accumulate);
    spec.ranks = scale.ranks;
    spec.data_fraction = scale.data_fraction;
    spec.stop_after = horizon;
    return spec;
  };
  auto observe = [&](const Outcome& outcome) { return judge(outcome, failure.kind); };

  context.begin_phase(kBaselinePhase, 1);
  const Outcome base = context.run(trial({}));
  if (observe(base) != bisect::Observation::Good) {
    throw UserError("the baseline does not pass at the minimal scale (run " +
                        std::to_string(base.run_id) + ": " + to_string(base.verdict) + ")",
                    baseline.config_path, "give a baseline known to train cleanly");
  }
  context.begin_phase("config: ddmin over " + std::to_string(differences.size()) + " keys",
                      static_cast<int64_t>(2 * differences.size()));
  bisect::Ddmin search(differences.size());
  bisect::drive(search, static_cast<size_t>(std::max(1, context.jobs())),
                [&](const std::vector<bisect::Subset>& proposals) {
                  std::vector<bisect::Observation> observed(proposals.size(),
                                                            bisect::Observation::Skip);
                  std::vector<size_t> runnable;
                  std::vector<TrialSpec> specs;
                  for (size_t i = 0; i < proposals.size(); ++i) {
                    try {
                      TrialSpec spec = trial(proposals[i]);
                      contract::load_recipe(spec.config_path, trial_overrides(spec));
                      specs.push_back(spec);
                      runnable.push_back(i);
                    } catch (const UserError&) {
                      // Some keys only make sense together (n_embd with n_head): no recipe.
                    }
                  }
                  auto outcomes = context.run(specs);
                  for (size_t i = 0; i < runnable.size(); ++i)
                    observed[runnable[i]] = observe(outcomes[i]);
                  return observed;
                });
  std::vector<ConfigChange> culprit;
  for (size_t index : search.failing_subset()) culprit.push_back(differences[index]);
  return culprit;
}

}  // namespace faultline::harness::isolate
