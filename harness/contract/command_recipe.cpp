// Reading a command trainer's recipe. Every problem is collected and reported at once; the
// trainer's own keys are whatever its recipe sets, so `--set` may only change those.
#include "harness/contract/command_recipe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/text.hpp"
#include "harness/contract/config_file.hpp"
#include "harness/contract/recipe_text.hpp"
#include "harness/launch/log_records.hpp"
#include "harness/launch/node_placeholders.hpp"

namespace faultline::harness::contract {

namespace fs = std::filesystem;
using namespace detail;  // guess, where

namespace {

bool executable_exists(const std::string& command, const std::string& workdir) {
  auto runnable = [](const fs::path& path) {
    std::error_code error;
    return fs::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
  };
  if (command.find('/') != std::string::npos) {
    fs::path path = command;
    return runnable(path.is_relative() ? fs::path(workdir) / path : path);
  }
  const char* path_env = std::getenv("PATH");
  for (const auto& dir : split(path_env ? path_env : "", ':'))
    if (!dir.empty() && runnable(fs::path(dir) / command)) return true;
  return false;
}

// An override's value in the type of the key it changes (a --set is typed by its spelling).
bool check_override_type(const ConfigValue& file, ConfigValue& given, const std::string& key,
                         ErrorList& errors) {
  using Type = ConfigValue::Type;
  if (file.type == given.type) return true;
  if (file.type == Type::String) {
    given.string = given.toml();
    given.type = Type::String;
  } else if (file.type == Type::Float && given.type == Type::Int) {
    given.real = static_cast<double>(given.integer);
    given.type = Type::Float;
  } else {
    errors.add("expected " + file.type_name() + " like the recipe's " + file.toml() + ", got " +
                   given.type_name() + " " + given.toml(),
               "--set " + key);
    return false;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& ask_names() {
  static const std::vector<std::string> names = {
      "stop_after",     "checkpoint_every",  "checkpoint_on_halt", "probe",
      "probe_from",     "fingerprint_every", "accumulate",         "replay_step",
      "replay_samples", "replay_ranks"};
  return names;
}

CommandRecipe load_command_recipe(ConfigSource source, const std::vector<std::string>& overrides,
                                  const std::vector<std::string>& cli_options) {
  // [launcher] is the harness's (harness/launch/launcher_config.hpp), never the trainer's.
  source = source.without("launcher");
  // The trainer's own config file: its keys are the recipe's too (a recipe key overrides one).
  std::vector<std::string> file_keys;
  if (auto it = source.values().find("trainer.config_file"); it != source.values().end()) {
    fs::path path = placeholder_text(it->second);
    if (path.is_relative()) path = fs::path(it->second.base_dir) / path;
    if (fs::exists(path))
      for (auto& [key, value] : read_config_file(path.string())) {
        file_keys.push_back(key);
        if (!source.values().count(key)) source.set(key, std::move(value));
      }
  }
  const auto file = source.values();
  source.apply_overrides(overrides);
  source = source.without("launcher");
  ErrorList errors;
  std::vector<std::string> own_keys;
  for (const auto& [key, value] : file)
    if (!starts_with(key, "trainer.")) own_keys.push_back(key);
  for (auto [key, value] : source.values()) {
    if (file.count(key)) {
      if (starts_with(value.origin, "--set")) {
        // A rejected value is reported once; the recipe's own stands in for it meanwhile.
        source.set(key,
                   check_override_type(file.at(key), value, key, errors) ? value : file.at(key));
      }
      continue;
    }
    if (starts_with(key, "trainer.")) continue;  // the [trainer] binder judges these
    if (starts_with(key, "faultline.")) {
      if (std::find(ask_names().begin(), ask_names().end(), key.substr(10)) == ask_names().end())
        errors.add("unknown key '" + key + "'", value.origin,
                   "faultline.* keys are what a search asks of the trainer: " +
                       fmt::format("{}", fmt::join(ask_names(), ", ")) +
                       guess(key.substr(10), ask_names()));
      continue;
    }
    std::string hint = "a command trainer's keys are those its recipe sets (" + source.name() +
                       "): add it there with its default" + guess(key, own_keys);
    if (auto option = option_named_by(key, cli_options); !option.empty())
      hint = "for that, use the option " + option + "; " + hint;
    errors.add("unknown key '" + key + "'", value.origin, hint);
  }

  CommandRecipe recipe;
  recipe.file_keys = file_keys;
  recipe.trainer = parse_command_trainer(source, errors);
  const auto& trainer = recipe.trainer;
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : source.values()) {
    if (starts_with(key, "trainer.")) continue;
    if (starts_with(key, "faultline.")) {
      recipe.asks[key.substr(10)] = value.type == ConfigValue::Type::Bool
                                        ? (value.boolean ? "1" : "0")
                                        : placeholder_text(value);
      continue;
    }
    recipe.config[key] = value;
    values[key] = placeholder_text(value);
  }

  // A key faultline reads (the steps, the warm-up): checked here, not by the trainer once launched.
  auto integer_key = [&](const std::string& key, const std::string& naming, int64_t& out,
                         int64_t least) {
    auto it = recipe.config.find(key);
    if (it == recipe.config.end()) {
      errors.add(naming + " names '" + key + "', which the recipe does not set",
                 where(naming, source),
                 "set it in the recipe, or name the trainer's own key in [trainer] " +
                     naming.substr(8) + " = \"...\"");
      return;
    }
    const ConfigValue& value = it->second;
    if (value.type != ConfigValue::Type::Int)
      errors.add("expected an integer, got " + value.type_name() + " " + value.toml(),
                 key + " at " + value.origin, naming + " names it: write it without quotes");
    else if (value.integer < least)
      errors.add(fmt::format("value {} is out of range", value.integer),
                 key + " at " + value.origin,
                 fmt::format("{} names it: expected an integer >= {}", naming, least));
    else
      out = value.integer;
  };
  integer_key(trainer.steps_key, "trainer.steps_key", recipe.steps, 1);
  if (!trainer.warmup_key.empty())
    integer_key(trainer.warmup_key, "trainer.warmup_key", recipe.warmup_steps, 0);
  if (!trainer.data_fraction_key.empty()) {
    auto it = recipe.config.find(trainer.data_fraction_key);
    if (it == recipe.config.end())
      errors.add("trainer.data_fraction_key names '" + trainer.data_fraction_key +
                     "', which the recipe does not set",
                 where("trainer.data_fraction_key", source));
    else
      recipe.data_fraction = it->second.type == ConfigValue::Type::Int
                                 ? static_cast<double>(it->second.integer)
                                 : it->second.real;
  }
  if (auto it = recipe.asks.find("accumulate"); it != recipe.asks.end())
    recipe.accumulate = std::max<int64_t>(1, std::atoll(it->second.c_str()));

  // Placeholders: the trainer's keys and {out} everywhere, each fragment's own trial value.
  values["out"] = "";
  values["ranks"] = values["master_port"] = "";
  // A launcher that starts its own ranks is told its node's place in the command itself.
  if (trainer.ranks_from == RanksFrom::Launcher)
    for (const auto& node : node_placeholders()) values[node] = "";
  auto is_node_placeholder = [](const std::string& placeholder) {
    const auto& names = node_placeholders();
    return std::find(names.begin(), names.end(), placeholder) != names.end();
  };
  if (!trainer.config_file.empty()) values["config_file"] = "";
  auto check = [&](const std::vector<std::string>& pattern, const std::string& name,
                   const std::string& own) {
    std::set<std::string> used;
    for (size_t index = 0; index < pattern.size(); ++index)
      for (const auto& placeholder : placeholders_of(pattern[index])) {
        const std::string element = "trainer." + name + "." + std::to_string(index);
        used.insert(placeholder);
        if (values.count(placeholder) || placeholder == own) continue;
        if (is_node_placeholder(placeholder)) {
          errors.add("placeholder {" + placeholder +
                         "} is filled only for a trainer that starts "
                         "its own ranks",
                     where(element, source),
                     "set ranks_from = \"torchrun\" in [trainer] (one launcher process per "
                     "node), or leave it out: each rank gets RANK, WORLD_SIZE, LOCAL_RANK, "
                     "MASTER_ADDR and MASTER_PORT");
          continue;
        }
        errors.add(
            "placeholder {" + placeholder + "} names no key of the recipe", where(element, source),
            "placeholders are {section.key} of the recipe, {out}" +
                (own.empty() ? std::string() : ", {" + own + "}") + guess(placeholder, own_keys));
      }
    if (!own.empty() && !pattern.empty() && !used.count(own))
      errors.add("trainer." + name + " does not use {" + own + "}",
                 where("trainer." + name + ".0", source),
                 "e.g. " + name + " = [\"--" + name + "\", \"{" + own + "}\"]");
  };
  check(trainer.command, "command", "");
  check(trainer.resume, "resume", "checkpoint");
  check(trainer.stop_after, "stop_after", "step");
  check(trainer.checkpoint_every, "checkpoint_every", "every");
  if (!trainer.command.empty() && placeholders_of(trainer.command[0]).empty() &&
      !executable_exists(trainer.command[0], trainer.workdir))
    errors.add("command not found: " + trainer.command[0], where("trainer.command.0", source),
               "give a path (relative to " + trainer.workdir +
                   ") or a program on PATH; Debian's python3 with torch is /usr/bin/python3");
  errors.throw_if_any();

  std::map<std::string, std::string> lines;
  for (const auto& [key, value] : source.values()) lines[key] = value.toml();
  // The folder it runs in, absolute: a recipe written back from a stored run runs in the same.
  ConfigValue workdir;
  workdir.string = trainer.workdir;
  lines["trainer.workdir"] = workdir.toml();
  for (const auto& [key, literal] : lines) recipe.canonical += key + " = " + literal + "\n";
  recipe.hash = hex64(hash_text(recipe.canonical));
  return recipe;
}

}  // namespace faultline::harness::contract
