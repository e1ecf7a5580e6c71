// One door to a recipe: a [trainer] section makes it a command trainer's, anything else is
// faultline-train's typed config.
#include "harness/contract/recipe.hpp"

#include "common/config.hpp"
#include "common/text.hpp"
#include "trainer/launch_check.hpp"

namespace faultline::harness::contract {

std::map<std::string, std::string> keys_of(const std::string& canonical) {
  std::map<std::string, std::string> keys;
  for (const auto& line : split(canonical, '\n')) {
    const auto equals = line.find(" = ");
    if (equals != std::string::npos) keys[line.substr(0, equals)] = line.substr(equals + 3);
  }
  return keys;
}

namespace {

Recipe from_bundled(trainer::TrainConfig config) {
  Recipe recipe;
  recipe.kind = TrainerKind::Bundled;
  recipe.source = config.source;
  recipe.canonical = config.canonical;
  recipe.hash = config.hash;
  recipe.steps = config.train.steps;
  recipe.warmup_steps = config.schedule.warmup_steps;
  recipe.ranks = config.dist.ranks;
  recipe.grad_accum = config.train.grad_accum;
  recipe.data_fraction = config.data.fraction;
  recipe.keys = keys_of(config.canonical);
  recipe.bundled = std::move(config);
  return recipe;
}

Recipe from_command(CommandRecipe command) {
  Recipe recipe;
  recipe.kind = TrainerKind::Command;
  recipe.source = command.trainer.source;
  recipe.canonical = command.canonical;
  recipe.hash = command.hash;
  recipe.steps = command.steps;
  recipe.warmup_steps = command.warmup_steps;
  recipe.ranks = command.trainer.ranks;
  recipe.grad_accum = command.accumulate;
  recipe.data_fraction = command.data_fraction;
  recipe.keys = keys_of(command.canonical);
  recipe.command = std::move(command);
  return recipe;
}

}  // namespace

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& cli_options) {
  auto source = ConfigSource::from_file(path);
  if (has_trainer_section(source))
    return from_command(load_command_recipe(std::move(source), overrides, cli_options));
  return from_bundled(trainer::load_train_config(path, overrides, cli_options));
}

Recipe parse_recipe(const std::string& toml_text, const std::string& name) {
  auto source = ConfigSource::from_string(toml_text, name);
  if (has_trainer_section(source)) return from_command(load_command_recipe(std::move(source), {}));
  return from_bundled(trainer::parse_train_config(toml_text, name, {}));
}

bool is_command_recipe(const std::string& path) {
  return has_trainer_section(ConfigSource::from_file(path));
}

void check_launchable(const Recipe& recipe, int ranks) {
  if (recipe.bundled) trainer::check_launchable(*recipe.bundled, ranks);
}

}  // namespace faultline::harness::contract
