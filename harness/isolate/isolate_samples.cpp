// Phase 4: which samples of the failing step's batch the failure needs. Each test replays that
// one step from the state before it on a subset of its batch (probe.replay_samples). The forward
// probe's rows are tried first (two replays confirm them); otherwise the batch halves tell a
// data-independent failure apart, and ddmin finds a 1-minimal subset.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "bisect/ddmin.hpp"
#include "bisect/drive.hpp"
#include "harness/isolate/isolate_phases.hpp"
#include "harness/trial/run_facts.hpp"
#include "store/store.hpp"
#include "trainer/recipe_corpus.hpp"
#include "trainer/sampler.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness::isolate {

namespace {

using Samples = std::vector<uint64_t>;

Samples minus(const Samples& all, const Samples& removed) {
  Samples rest;
  for (uint64_t sample : all)
    if (std::find(removed.begin(), removed.end(), sample) == removed.end()) rest.push_back(sample);
  return rest;
}

class StepReplay {
 public:
  StepReplay(Context& context, const TrialSpec& local, const StepLocation& location,
             detectors::FailureKind kind)
      : context_(context), local_(local), location_(location), kind_(kind) {}

  // Bad: the subset alone shows the failure; Good: it trains cleanly; Skip: anything else.
  std::vector<bisect::Observation> judge(const std::vector<Samples>& subsets) {
    std::vector<TrialSpec> specs;
    for (const auto& subset : subsets) {
      const auto& trainer = context_.trainer;
      TrialSpec spec = trainer.checkpoint_on_halt(trainer.checkpoint_every(local_, 0), false);
      spec = trainer.replay(spec, location_.step, subset);
      spec.resume = location_.state_before;
      spec.resume_step = location_.state_before.empty() ? 0 : location_.step - 1;
      specs.push_back(trainer.prefix(spec, location_.step));
    }
    std::vector<bisect::Observation> observations;
    for (const auto& outcome : context_.run(specs)) {
      if (outcome.verdict == Verdict::InfraError)  // a replay that cannot run: nothing to learn
        throw_not_run(outcome, "the replay of step " + std::to_string(location_.step));
      observations.push_back(isolate::judge(outcome, kind_));
    }
    return observations;
  }

 private:
  Context& context_;
  const TrialSpec& local_;
  const StepLocation& location_;
  detectors::FailureKind kind_;
};

Samples ddmin_over(StepReplay& replay, const Samples& batch, int jobs) {
  bisect::Ddmin search(batch.size());
  bisect::drive(search, static_cast<size_t>(std::max(1, jobs)),
                [&](const std::vector<bisect::Subset>& proposals) {
                  std::vector<Samples> subsets;
                  for (const auto& subset : proposals) {
                    Samples samples;
                    for (size_t index : subset) samples.push_back(batch[index]);
                    subsets.push_back(samples);
                  }
                  return replay.judge(subsets);
                });
  Samples found;
  for (size_t index : search.failing_subset()) found.push_back(batch[index]);
  return found;
}

}  // namespace

SampleLocation locate_samples(Context& context, const TrialSpec& local_spec, const Outcome& local,
                              const StepLocation& location, detectors::FailureKind kind) {
  SampleLocation result;
  if (kind != detectors::FailureKind::Nonfinite || location.step <= 0) return result;
  const auto& trainer_contract = context.trainer;
  if (!trainer_contract.can(contract::Capability::ReplaySamples)) {
    context.skip(trainer_contract.skipped("samples", contract::Capability::ReplaySamples));
    return result;
  }
  if (location.step > 1 && location.state_before.empty()) return result;  // nothing to replay
  std::optional<trainer::TrainConfig> config;
  Samples batch;
  if (trainer_contract.is_command()) {
    batch = batch_event(context.store, location.shown_in ? location.shown_in : local.run_id,
                        location.step);
    if (batch.empty()) {
      context.skip("skipped samples: the trainer wrote no batch event for step " +
                   std::to_string(location.step) +
                   " (faultline_probe.py writes one at every "
                   "full-probe step)");
      return result;
    }
  } else {
    config = trainer::load_train_config(local_spec.config_path, trial_overrides(local_spec));
    // The batch as the trainer drew it: a pure function of (seed, step) over the samples used.
    trainer::BatchSampler sampler(static_cast<uint64_t>(config->train.seed),
                                  samples_used(context.store, local.run_id),
                                  static_cast<uint64_t>(config->train.batch_size));
    batch = sampler.global_batch(location.step);
  }
  StepReplay replay(context, local_spec, location, kind);
  using bisect::Observation;

  context.begin_phase("samples: step " + std::to_string(location.step) + " split", 2);
  const auto& hint = location.sample_hint;
  if (hint && !hint->empty() && hint->size() < batch.size()) {
    auto observed = replay.judge({*hint, minus(batch, *hint)});
    if (observed[0] == Observation::Bad && observed[1] == Observation::Good) result.samples = *hint;
  }
  if (!result.samples && batch.size() == 1) result.samples = batch;
  if (!result.samples) {
    const size_t half = batch.size() / 2;
    const Samples first(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(half));
    auto observed = replay.judge({first, minus(batch, first)});
    if (observed[0] == Observation::Bad && observed[1] == Observation::Bad)
      return result;  // either half alone fails: no sample is to blame
    context.begin_phase("samples: ddmin over " + std::to_string(batch.size()) + " samples",
                        static_cast<int64_t>(2 * batch.size()));
    Samples found = ddmin_over(replay, batch, context.jobs());
    // Confirm that the rest of the batch trains cleanly without them (else it is not the data).
    if (found.size() < batch.size() && replay.judge({minus(batch, found)})[0] == Observation::Bad)
      return result;
    result.samples = found;
  }
  if (!config) return result;  // a command trainer's shards are its own business
  const auto corpus = trainer::recipe_corpus(*config);
  for (uint64_t sample : *result.samples)
    result.shards.push_back(corpus.shards().at(corpus.locate(sample).shard_id).name);
  return result;
}

}  // namespace faultline::harness::isolate
