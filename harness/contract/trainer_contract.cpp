// The bundled trainer's side of the contract: the keys of faultline-train (docs/trainer.md) and
// the meaning of its exit codes (src/trainer/exit_codes.hpp).
#include "harness/contract/trainer_contract.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/store.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness::contract {

namespace {

std::string key(const char* name, int64_t value) {
  return fmt::format("{}={}", name, value);
}

TrialSpec with(TrialSpec spec, std::vector<std::string> overrides) {
  spec.overrides.insert(spec.overrides.end(), overrides.begin(), overrides.end());
  return spec;
}

}  // namespace

const char* to_string(Capability capability) {
  switch (capability) {
    case Capability::Prefix:
      return "prefix";
    case Capability::Resume:
      return "resume";
    case Capability::Checkpoints:
      return "checkpoints";
    case Capability::DataFraction:
      return "data_fraction";
    case Capability::CheaperWithLessData:
      return "cheaper_with_less_data";
    case Capability::Accumulate:
      return "accumulate";
    case Capability::FullProbes:
      return "full_probes";
    case Capability::ReplaySamples:
      return "replay_samples";
    case Capability::ReplicaMode:
      return "replica";
    case Capability::Fingerprints:
      return "fingerprints";
  }
  return "?";
}

const TrainerContract& TrainerContract::bundled() {
  static const TrainerContract contract;
  return contract;
}

bool TrainerContract::can(Capability capability) const {
  // A step costs the same whatever the data fraction: a smaller fraction is never cheaper.
  return capability != Capability::CheaperWithLessData;
}

std::string TrainerContract::skipped(const std::string& axis, Capability capability) const {
  return "skipped " + axis + ": it needs the trainer capability '" + to_string(capability) +
         "', which the trainer does not declare";
}

ExitMeaning TrainerContract::exit_meaning(int exit_code) const {
  switch (exit_code) {
    case 0:
      return ExitMeaning::Finished;
    case 2:
      return ExitMeaning::BadUsage;
    case 3:
      return ExitMeaning::HaltedNonfinite;
    case 4:
      return ExitMeaning::HaltedData;
    case 5:
      return ExitMeaning::OutOfMemory;
    case 127:
      return ExitMeaning::NotRunnable;
    default:
      return ExitMeaning::Failed;
  }
}

TrialSpec TrainerContract::prefix(TrialSpec spec, int64_t last_step) const {
  spec.stop_after = last_step;
  return spec;
}

TrialSpec TrainerContract::resume(TrialSpec spec, const std::optional<Checkpoint>& from) const {
  spec.resume = from ? from->path : "";
  return spec;
}

TrialSpec TrainerContract::checkpoint_every(TrialSpec spec, int64_t every) const {
  return with(std::move(spec), {key("train.checkpoint_every", every)});
}

TrialSpec TrainerContract::checkpoint_on_halt(TrialSpec spec, bool on) const {
  return with(std::move(spec),
              {std::string("probe.checkpoint_on_nonfinite=") + (on ? "true" : "false")});
}

TrialSpec TrainerContract::accumulate(TrialSpec spec, int ranks, int64_t accumulate) const {
  spec = with(std::move(spec), {key("train.grad_accum", accumulate)});
  spec.ranks = ranks;
  if (ranks == 1) spec.hosts.clear();
  return spec;
}

TrialSpec TrainerContract::full_probes_from(TrialSpec spec, int64_t step) const {
  return with(std::move(spec), {"probe.level=full", key("probe.full_from_step", step)});
}

TrialSpec TrainerContract::replay(TrialSpec spec, int64_t step,
                                  const std::vector<uint64_t>& samples) const {
  return with(std::move(spec), {key("probe.replay_step", step),
                                fmt::format("probe.replay_samples={}", fmt::join(samples, ","))});
}

TrialSpec TrainerContract::replica(TrialSpec spec) const {
  return with(std::move(spec), {"probe.replay_ranks=all"});
}

TrialSpec TrainerContract::fingerprints_every_step(TrialSpec spec) const {
  return with(std::move(spec), {"probe.fingerprint_every=1"});
}

std::vector<std::string> TrainerContract::scale_overrides(const TrialSpec& spec) const {
  std::vector<std::string> overrides;
  if (spec.stop_after > 0) overrides.push_back(key("train.stop_after", spec.stop_after));
  if (spec.data_fraction > 0)
    overrides.push_back(fmt::format("data.fraction={}", spec.data_fraction));
  overrides.push_back(key("dist.ranks", spec.ranks));
  return overrides;
}

bool TrainerContract::watches_only(const std::string& name) const {
  static const std::vector<std::string> watching = {
      "train.stop_after", "train.log_every", "train.checkpoint_every",
      "dist.timeout_s",   "dist.ranks",      "data.fraction"};
  return name.rfind("probe.", 0) == 0 ||
         std::find(watching.begin(), watching.end(), name) != watching.end();
}

int64_t TrainerContract::grad_accum(const TrialSpec& spec) const {
  return trainer::load_train_config(spec.config_path, trial_overrides(spec)).train.grad_accum;
}

int64_t TrainerContract::steps(const TrialSpec& spec) const {
  const auto config = trainer::load_train_config(spec.config_path, trial_overrides(spec));
  return spec.stop_after > 0 ? std::min(spec.stop_after, config.train.steps) : config.train.steps;
}

double TrainerContract::data_fraction(const TrialSpec& spec) const {
  return trainer::load_train_config(spec.config_path, trial_overrides(spec)).data.fraction;
}

std::vector<Checkpoint> checkpoints(const store::Store& store, int64_t run_id) {
  std::vector<Checkpoint> found;
  for (const auto& event : store.events(run_id)) {
    if (event.name != "checkpoint" && event.name != "resume") continue;
    const auto fields = nlohmann::json::parse(event.json, nullptr, false);
    if (fields.is_discarded() || !fields.contains("path") || !fields.contains("step")) continue;
    Checkpoint checkpoint{fields["step"].get<int64_t>(), fields["path"].get<std::string>()};
    std::error_code error;
    if (!std::filesystem::is_regular_file(checkpoint.path, error)) continue;
    if (at_step(found, checkpoint.step)) continue;
    found.push_back(checkpoint);
  }
  std::sort(found.begin(), found.end(),
            [](const Checkpoint& a, const Checkpoint& b) { return a.step < b.step; });
  return found;
}

std::optional<Checkpoint> last_before(const std::vector<Checkpoint>& checkpoints, int64_t step) {
  std::optional<Checkpoint> last;
  for (const auto& checkpoint : checkpoints)
    if (checkpoint.step < step && checkpoint.step > 0) last = checkpoint;
  return last;
}

std::optional<Checkpoint> at_step(const std::vector<Checkpoint>& checkpoints, int64_t step) {
  for (const auto& checkpoint : checkpoints)
    if (checkpoint.step == step) return checkpoint;
  return std::nullopt;
}

}  // namespace faultline::harness::contract
