// A recipe whose [trainer] section names the user's own program instead of faultline-train
// (docs/external-trainers.md): the command and its placeholders, how records arrive, what the
// trainer can do, and the trainer's own config (every other section).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "harness/contract/capability.hpp"

namespace faultline::harness::contract {

// How a command trainer's records reach faultline.
enum class RecordSource {
  Protocol,  // it writes FAULTLINE_METRICS (e.g. with probes/python/faultline_probe.py)
  Log,       // its output lines, read with trainer.log_regex
};
const char* to_string(RecordSource source);

// Who starts the ranks of a trial.
enum class RanksFrom {
  Faultline,  // one process per rank, each given the torchrun environment
  Launcher,   // one process (torchrun) that starts them itself: {ranks} says how many
};

struct CommandTrainer {
  std::vector<std::string> command;  // argv with {section.key} and {out} placeholders
  // Fragments appended when a trial asks: {checkpoint}, {step}, {every} are the trial's.
  std::vector<std::string> resume, stop_after, checkpoint_every;
  RecordSource records = RecordSource::Protocol;
  std::string log_regex, checkpoint_regex;
  std::vector<Capability> provides;       // declared in trainer.provides, and implied by fragments
  std::string steps_key = "train.steps";  // the key that holds the run's length
  std::string warmup_key, data_fraction_key;  // "" when the trainer has none
  std::string workdir;                        // absolute: where the command runs
  std::string config_file;  // absolute; "": none (the trainer's own JSON or TOML config)
  int64_t ranks = 1;        // ranks a recipe is launched on by default
  RanksFrom ranks_from = RanksFrom::Faultline;
  std::string source;  // the recipe file
};

// The recipe resolved for one trial.
struct CommandRecipe {
  CommandTrainer trainer;
  std::map<std::string, ConfigValue> config;  // the trainer's own keys, after --set
  std::map<std::string, std::string> asks;    // faultline.<ask> of the trial → its text
  std::vector<std::string> file_keys;         // the keys read from trainer.config_file
  std::string canonical, hash;                // every key with its value, sorted; its XXH64
  int64_t steps = 0, warmup_steps = 0;
  double data_fraction = 1;
  int64_t accumulate = 1;  // faultline.accumulate: the micro-batch multiplier asked
};

// The asks a trial may make of a command trainer (faultline.<name>, FAULTLINE_<NAME>).
const std::vector<std::string>& ask_names();

bool has_trainer_section(const ConfigSource& source);
// Reads the [trainer] section only (what the trainer can do does not depend on --set).
CommandTrainer load_command_trainer(const ConfigSource& source);
// The same, its problems added to `errors` (to be reported with the recipe's others).
CommandTrainer parse_command_trainer(const ConfigSource& source, ErrorList& errors);
// The whole recipe with `overrides` applied; throws one UserError listing every problem: an
// unknown key (with a did-you-mean, also over `cli_options`), a placeholder naming no key, a
// regular expression without a step group, a command that is not found.
CommandRecipe load_command_recipe(ConfigSource source, const std::vector<std::string>& overrides,
                                  const std::vector<std::string>& cli_options = {});

// The text a placeholder stands for: a string as it is, a number or boolean as TOML writes it.
std::string placeholder_text(const ConfigValue& value);
// `pattern` with every {name} replaced from `values`; "{{" and "}}" are braces. Throws
// std::out_of_range naming the first placeholder `values` lacks.
std::string fill_placeholders(const std::string& pattern,
                              const std::map<std::string, std::string>& values);
// The names a pattern's placeholders use, in order.
std::vector<std::string> placeholders_of(const std::string& pattern);

}  // namespace faultline::harness::contract
