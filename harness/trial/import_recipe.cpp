// Compares a command recipe with the start event of a run it is said to describe: the recipe's
// `--flag {key}` pairs against the run's own argv and config, its config file's keys against the
// run's config.
#include "harness/trial/import_recipe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/text.hpp"

namespace faultline::harness {

namespace {

using nlohmann::json;

// "0.01" and "1e-2" are one value, and so are Python's "True" and TOML's "true".
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const auto x = parse_number(a), y = parse_number(b);
  if (x && y) return *x == *y;
  const std::string la = lowercase(a), lb = lowercase(b);
  return (la == "true" || la == "false") && la == lb;
}

std::string json_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The value the run's argv gives `flag`: `--flag value` or `--flag=value`, the last one winning
// as in argparse.
std::optional<std::string> argv_value(const json& argv, const std::string& flag) {
  std::optional<std::string> found;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (!argv[i].is_string()) continue;
    const std::string part = argv[i].get<std::string>();
    if (part == flag && i + 1 < argv.size() && argv[i + 1].is_string())
      found = argv[i + 1].get<std::string>();
    else if (part.rfind(flag + "=", 0) == 0)
      found = part.substr(flag.size() + 1);
  }
  return found;
}

// argparse's name for a flag: "--nan-step" → "nan_step".
std::string dest_of(const std::string& flag) {
  std::string dest = flag.substr(flag.find_first_not_of('-'));
  std::replace(dest.begin(), dest.end(), '-', '_');
  return dest;
}

bool is_flag(const std::string& part) {
  return part.size() > 1 && part[0] == '-' && part.find_first_not_of('-') != std::string::npos &&
         !parse_number(part) && contract::placeholders_of(part).empty();
}

}  // namespace

std::vector<RecipeMismatch> recipe_mismatches(const contract::CommandRecipe& recipe,
                                              const json& start) {
  std::vector<RecipeMismatch> mismatches;
  const json argv = start.value("command", json::array());
  const json config = start.value("config", json::object());
  const auto& command = recipe.trainer.command;
  for (size_t i = 0; i < command.size(); ++i) {
    // `--flag {key}` or `--flag={key}`: a flag whose value is exactly one key of the recipe.
    std::string flag, value;
    const auto equals = command[i].find('=');
    if (equals != std::string::npos && is_flag(command[i].substr(0, equals))) {
      flag = command[i].substr(0, equals);
      value = command[i].substr(equals + 1);
    } else if (is_flag(command[i]) && i + 1 < command.size()) {
      flag = command[i];
      value = command[i + 1];
    } else {
      continue;
    }
    const auto names = contract::placeholders_of(value);
    if (names.size() != 1 || value != "{" + names[0] + "}") continue;
    const auto key = recipe.config.find(names[0]);
    if (key == recipe.config.end()) continue;  // {out}, {ranks}: the trial's, not the run's
    RecipeMismatch mismatch{key->first, flag, contract::placeholder_text(key->second), "", ""};
    const std::string dest = dest_of(flag);
    if (auto given = argv.is_array() ? argv_value(argv, flag) : std::nullopt) {
      mismatch.run_value = *given;
      mismatch.seen_in = "its command";
    } else if (config.is_object() && config.contains(dest) && !config[dest].is_structured()) {
      mismatch.run_value = json_text(config[dest]);
      mismatch.seen_in = "its config's " + dest;
    } else {
      continue;
    }
    if (!same_value(mismatch.recipe_value, mismatch.run_value))
      mismatches.push_back(std::move(mismatch));
  }
  // The trainer's own config file: its keys are the script's own names, so each is read from the
  // run's config under that name.
  const std::string file =
      std::filesystem::path(recipe.trainer.config_file).filename().string() + "'s ";
  for (const auto& key : recipe.file_keys) {
    if (!config.is_object() || !config.contains(key) || config[key].is_structured()) continue;
    RecipeMismatch mismatch{key, file + key, contract::placeholder_text(recipe.config.at(key)),
                            json_text(config[key]), "its config's " + key};
    if (!same_value(mismatch.recipe_value, mismatch.run_value))
      mismatches.push_back(std::move(mismatch));
  }
  return mismatches;
}

std::string mismatch_overrides(const std::vector<RecipeMismatch>& mismatches) {
  std::vector<std::string> sets;
  for (const auto& mismatch : mismatches)
    sets.push_back(fmt::format("--set {}={}", mismatch.key, mismatch.run_value));
  return fmt::format("{}", fmt::join(sets, " "));
}

}  // namespace faultline::harness
