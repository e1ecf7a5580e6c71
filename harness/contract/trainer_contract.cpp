// Both sides of the contract: faultline-train's keys (docs/trainer.md) and a command trainer's
// asks, made as faultline.* keys that reach it as FAULTLINE_* variables and the recipe's argv
// fragments (docs/external-trainers.md). Exit codes mean the same for both
// (src/trainer/exit_codes.hpp; faultline_probe.py uses the same).
#include "harness/contract/trainer_contract.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/event_names.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "store/store.hpp"

namespace faultline::harness::contract {

namespace {

std::string key(std::string_view name, int64_t value) {
  return fmt::format("{}={}", name, value);
}

TrialSpec with(TrialSpec spec, std::vector<std::string> overrides) {
  spec.overrides.insert(spec.overrides.end(), overrides.begin(), overrides.end());
  return spec;
}

// A command trainer's ask: the key faultline.<name>, read back into FAULTLINE_<NAME>.
std::string ask_key(const char* name) {
  return fmt::format("faultline.{}", name);
}
std::string ask(const char* name, const std::string& value) {
  return fmt::format("{}={}", ask_key(name), value);
}

}  // namespace

const TrainerContract& TrainerContract::bundled() {
  static const TrainerContract contract;
  return contract;
}

TrainerContract TrainerContract::of(const std::string& recipe_path) {
  // Read once per file version: every trial asks, and a search runs hundreds.
  static std::mutex mutex;
  static std::map<std::string, std::pair<std::filesystem::file_time_type, TrainerContract>> known;
  std::error_code error;
  const auto stamp = std::filesystem::last_write_time(recipe_path, error);
  std::lock_guard<std::mutex> lock(mutex);
  if (!error) {
    auto it = known.find(recipe_path);
    if (it != known.end() && it->second.first == stamp) return it->second.second;
  }
  TrainerContract contract;
  if (!error) {
    const auto source = ConfigSource::from_file(recipe_path);
    if (has_trainer_section(source))
      contract.command_ = std::make_shared<const CommandTrainer>(load_command_trainer(source));
    known.insert_or_assign(recipe_path, std::make_pair(stamp, contract));
  }
  return contract;
}

bool TrainerContract::can(Capability capability) const {
  // A step costs the same whatever the data fraction: a smaller fraction is never cheaper.
  if (!command_) return capability != Capability::CheaperWithLessData;
  const auto& provides = command_->provides;
  return std::find(provides.begin(), provides.end(), capability) != provides.end();
}

namespace {

// The [trainer] keys that give a capability: the ask's own key where there is one, else provides.
std::string keys_giving(Capability capability, RecordSource records) {
  switch (capability) {
    case Capability::Resume:
      return "trainer.resume";
    case Capability::Prefix:
      return "trainer.stop_after";
    case Capability::Checkpoints:
      return records == RecordSource::Log ? "trainer.checkpoint_every and trainer.checkpoint_regex"
                                          : "trainer.checkpoint_every or trainer.provides";
    case Capability::DataFraction:
      return "trainer.data_fraction_key";
    default:
      return "trainer.provides";
  }
}

}  // namespace

std::string TrainerContract::skipped(const std::string& axis, Capability capability) const {
  const std::string needs =
      "skipped " + axis + ": it needs the trainer capability '" + to_string(capability) + "', ";
  if (!command_) return needs + "which " + name() + " does not declare";
  const std::string recipe = declared_in_.empty() ? command_->source : declared_in_;
  if (command_->records == RecordSource::Log && needs_metrics_protocol(capability))
    return needs + "which " + name() +
           " cannot have: a log-only trainer's records are the lines it prints (records = "
           "\"protocol\" with probes/python/faultline_probe.py gives it, in " +
           recipe + ")";
  return needs + "which " + name() + " does not declare (" +
         keys_giving(capability, command_->records) + " in " + recipe + ")";
}

TrainerContract TrainerContract::declared_in(const std::string& recipe) const {
  TrainerContract named = *this;
  named.declared_in_ = recipe;
  return named;
}

std::string TrainerContract::name() const {
  if (!command_) return "faultline-train";
  // "the trainer 'python3 train.py'": the program and its script, without the flags.
  const auto& argv = command_->command;
  std::string shown = std::filesystem::path(argv.front()).filename().string();
  if (argv.size() > 1 && argv[1].rfind("-", 0) != 0 && placeholders_of(argv[1]).empty())
    shown += " " + argv[1];
  return "the trainer '" + shown + "'";
}

RecordSource TrainerContract::records() const {
  return command_ ? command_->records : RecordSource::Protocol;
}

bool TrainerContract::starts_own_ranks() const {
  return command_ && command_->ranks_from == RanksFrom::Launcher;
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
  spec.resume_step = from ? from->step : 0;
  return spec;
}

TrialSpec TrainerContract::checkpoint_every(TrialSpec spec, int64_t every) const {
  return with(std::move(spec), {key(checkpoint_every_key(), every)});
}

std::string TrainerContract::checkpoint_every_key() const {
  return command_ ? ask_key("checkpoint_every") : "train.checkpoint_every";
}

// A command trainer is only asked for what it declares (a log-only script given FAULTLINE_PROBE
// would not read it, and the repro line would say it did).
TrialSpec TrainerContract::checkpoint_on_halt(TrialSpec spec, bool on) const {
  if (command_ && !can(Capability::Checkpoints)) return spec;
  if (command_) return with(std::move(spec), {ask("checkpoint_on_halt", on ? "true" : "false")});
  return with(std::move(spec),
              {std::string("probe.checkpoint_on_nonfinite=") + (on ? "true" : "false")});
}

TrialSpec TrainerContract::accumulate(TrialSpec spec, int ranks, int64_t accumulate) const {
  spec = with(std::move(spec), {command_ ? ask("accumulate", std::to_string(accumulate))
                                         : key("train.grad_accum", accumulate)});
  spec.ranks = ranks;
  if (ranks == 1) spec.hosts.clear();
  return spec;
}

TrialSpec TrainerContract::full_probes_from(TrialSpec spec, int64_t step) const {
  if (command_ && !can(Capability::FullProbes)) return spec;
  if (command_)
    return with(std::move(spec), {ask("probe", "full"), ask("probe_from", std::to_string(step))});
  return with(std::move(spec), {"probe.level=full", key("probe.full_from_step", step)});
}

TrialSpec TrainerContract::replay(TrialSpec spec, int64_t step,
                                  const std::vector<uint64_t>& samples) const {
  const std::string list = fmt::format("{}", fmt::join(samples, ","));
  // A quoted list stays text even when it is one number.
  if (command_)
    return with(std::move(spec), {ask("replay_step", std::to_string(step)),
                                  ask("replay_samples", "\"" + list + "\"")});
  return with(std::move(spec), {key("probe.replay_step", step), "probe.replay_samples=" + list});
}

TrialSpec TrainerContract::replica(TrialSpec spec) const {
  if (command_) return with(std::move(spec), {ask("replay_ranks", "all")});
  return with(std::move(spec), {"probe.replay_ranks=all"});
}

TrialSpec TrainerContract::fingerprints_every_step(TrialSpec spec) const {
  if (command_) return with(std::move(spec), {ask("fingerprint_every", "1")});
  return with(std::move(spec), {"probe.fingerprint_every=1"});
}

std::vector<std::string> TrainerContract::scale_overrides(const TrialSpec& spec) const {
  std::vector<std::string> overrides;
  if (command_) {
    // Without a way to stop early, a prefix is a shorter run (its schedule may differ).
    if (spec.stop_after > 0)
      overrides.push_back(can(Capability::Prefix)
                              ? ask("stop_after", std::to_string(spec.stop_after))
                              : key(command_->steps_key.c_str(), spec.stop_after));
    if (spec.data_fraction > 0 && !command_->data_fraction_key.empty())
      overrides.push_back(fmt::format("{}={}", command_->data_fraction_key, spec.data_fraction));
    overrides.push_back(key("trainer.ranks", spec.ranks));
    return overrides;
  }
  if (spec.stop_after > 0) overrides.push_back(key("train.stop_after", spec.stop_after));
  if (spec.data_fraction > 0)
    overrides.push_back(fmt::format("data.fraction={}", spec.data_fraction));
  overrides.push_back(key("dist.ranks", spec.ranks));
  return overrides;
}

bool TrainerContract::watches_only(const std::string& name) const {
  if (command_) return starts_with(name, "faultline.") || starts_with(name, "trainer.");
  static const std::vector<std::string> watching = {
      "train.stop_after", "train.log_every", "train.checkpoint_every",
      "dist.timeout_s",   "dist.ranks",      "data.fraction"};
  return starts_with(name, "probe.") ||
         std::find(watching.begin(), watching.end(), name) != watching.end();
}

int64_t TrainerContract::grad_accum(const TrialSpec& spec) const {
  return load_recipe(spec.config_path, trial_overrides(spec)).grad_accum;
}

int64_t TrainerContract::steps(const TrialSpec& spec) const {
  const auto recipe = load_recipe(spec.config_path, trial_overrides(spec));
  return spec.stop_after > 0 ? std::min(spec.stop_after, recipe.steps) : recipe.steps;
}

double TrainerContract::data_fraction(const TrialSpec& spec) const {
  return load_recipe(spec.config_path, trial_overrides(spec)).data_fraction;
}

std::vector<Checkpoint> named_checkpoints(const store::Store& store, int64_t run_id) {
  std::vector<Checkpoint> named;
  for (const auto& event : store.events(run_id, {kCheckpointEvent, kResumeEvent})) {
    const auto fields = nlohmann::json::parse(event.json, nullptr, false);
    if (fields.is_discarded() || !fields.contains("path") || !fields.contains("step") ||
        !fields["path"].is_string() || !fields["step"].is_number())
      continue;
    named.push_back({fields["step"].get<int64_t>(), fields["path"].get<std::string>()});
  }
  return named;
}

std::map<std::string, std::vector<int64_t>> saved_over(const std::vector<Checkpoint>& named) {
  std::map<std::string, std::vector<int64_t>> steps;
  for (const auto& checkpoint : named) {
    auto& of_path = steps[checkpoint.path];
    if (std::find(of_path.begin(), of_path.end(), checkpoint.step) == of_path.end())
      of_path.push_back(checkpoint.step);
  }
  for (auto it = steps.begin(); it != steps.end();) {
    std::sort(it->second.begin(), it->second.end());
    it = it->second.size() > 1 ? std::next(it) : steps.erase(it);
  }
  return steps;
}

std::vector<Checkpoint> checkpoints(const store::Store& store, int64_t run_id) {
  return replayable(named_checkpoints(store, run_id));
}

std::vector<Checkpoint> replayable(const std::vector<Checkpoint>& named) {
  const auto over = saved_over(named);
  std::vector<Checkpoint> found;
  for (const auto& checkpoint : named) {
    // A path saved over (nanoGPT's out/ckpt.pt) holds its last save only: an earlier step's
    // event names a state that is gone.
    if (const auto it = over.find(checkpoint.path);
        it != over.end() && checkpoint.step != it->second.back())
      continue;
    // A file, or a folder (a sharded or Hugging Face style checkpoint-500/).
    std::error_code error;
    if (!std::filesystem::exists(checkpoint.path, error)) continue;
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
