// A trainer recipe resolved for one trial, whatever trains it: faultline-train's typed config or
// a command trainer's [trainer] section and own keys. What the harness reads from a recipe (its
// length, ranks, hash, keys) it reads here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/command_recipe.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness::contract {

enum class TrainerKind { Bundled, Command };

struct Recipe {
  TrainerKind kind = TrainerKind::Bundled;
  std::string source;           // the file
  std::string canonical, hash;  // every key with its value, sorted; its XXH64
  int64_t steps = 0;            // the run's length, before any prefix
  int64_t warmup_steps = 0;
  int64_t ranks = 1;       // what the recipe is launched on unless told otherwise
  int64_t grad_accum = 1;  // per-rank micro-batches (a command trainer: the multiplier asked)
  double data_fraction = 1;
  std::map<std::string, std::string> keys;  // key → TOML literal, from the canonical text
  std::optional<trainer::TrainConfig> bundled;
  std::optional<CommandRecipe> command;
};

// Reads FILE with `overrides`; every problem in one UserError. `cli_options` are suggested for
// an unknown key that names one.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& cli_options = {});
// The same from a stored config's text (an imported run's start event).
Recipe parse_recipe(const std::string& toml_text, const std::string& name);
// Key -> TOML literal of a canonical config text ("key = value" lines), as a stored run has.
std::map<std::string, std::string> keys_of(const std::string& canonical);
bool is_command_recipe(const std::string& path);

// What must hold to launch it on `ranks` ranks (faultline-train: the batch splits, shards fit).
void check_launchable(const Recipe& recipe, int ranks);

}  // namespace faultline::harness::contract
