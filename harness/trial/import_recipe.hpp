// Does a recipe describe a run faultline did not launch? `faultline import DIR -c RECIPE` stores
// the recipe as the run's config so that `isolate --run` can relaunch the user's own trainer; each
// flag that the recipe's command fills from a key is checked against what the run was started with.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/contract/command_recipe.hpp"

namespace faultline::harness {

// One key whose value in the recipe is not the one the run was started with.
struct RecipeMismatch {
  std::string key;           // the recipe's key, e.g. fault.nan_step
  std::string flag;          // the flag it fills, e.g. --nan-step
  std::string recipe_value;  // what the recipe would pass
  std::string run_value;     // what the run had
  std::string seen_in;       // where the run's value was read: its command or its config
};

// The keys of `recipe` whose value differs from the run's. Only `--flag {key}` pairs of
// trainer.command are compared: the run's value is read from its start event's `command` (the
// script's argv, `--flag value` or `--flag=value`), else from its `config` under the flag's name
// (`--nan-step` → `nan_step`, as argparse names it). The keys of trainer.config_file are compared
// with the run's `config` under their own names. A key the run shows nowhere is not compared.
std::vector<RecipeMismatch> recipe_mismatches(const contract::CommandRecipe& recipe,
                                              const nlohmann::json& start);

// "--set key=value" for each mismatch: what makes the recipe describe the run.
std::string mismatch_overrides(const std::vector<RecipeMismatch>& mismatches);

}  // namespace faultline::harness
