// Reading a command trainer's recipe. Every problem is collected and reported at once; the
// trainer's own keys are whatever its recipe sets, so `--set` may only change those.
#include "harness/contract/command_recipe.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/text.hpp"
#include "harness/launch/log_records.hpp"

namespace faultline::harness::contract {

namespace {

// "; did you mean 'x'?", or "" when nothing is close: ready to append to a hint.
std::string guess(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = did_you_mean(word, candidates);
  return match.empty() ? "" : "; " + match;
}

namespace fs = std::filesystem;

const std::vector<std::string> kArrays = {"command", "resume", "stop_after", "checkpoint_every",
                                          "provides"};
// provides = ["faultline_probe"]: everything the Python helper does.
constexpr const char* kHelper = "faultline_probe";

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

std::string where(const std::string& key, const ConfigSource& source) {
  auto it = source.values().find(key);
  return it == source.values().end() ? key + " in " + source.name()
                                     : key + " at " + it->second.origin;
}

bool is_array_element(const std::string& key) {
  for (const auto& name : kArrays)
    if (starts_with(key, "trainer." + name + ".")) return true;
  return false;
}

std::vector<std::string> array_at(const ConfigSource& source, const std::string& name,
                                  ErrorList& errors) {
  const std::string key = "trainer." + name;
  std::vector<std::string> out;
  if (source.values().count(key)) {
    errors.add("expected an array of strings", where(key, source),
               "write it as " + name + " = [\"python3\", \"train.py\"]");
    return out;
  }
  for (size_t i = 0;; ++i) {
    auto it = source.values().find(key + "." + std::to_string(i));
    if (it == source.values().end()) break;
    if (it->second.type != ConfigValue::Type::String)
      errors.add("expected a string, got " + it->second.type_name() + " " + it->second.toml(),
                 where(it->first, source), "quote every element of trainer." + name);
    out.push_back(placeholder_text(it->second));
  }
  return out;
}

void add_capability(std::vector<Capability>& provides, Capability capability) {
  if (std::find(provides.begin(), provides.end(), capability) == provides.end())
    provides.push_back(capability);
}

// The [trainer] section; problems go to `errors`.
CommandTrainer parse_trainer(const ConfigSource& source, ErrorList& errors) {
  CommandTrainer trainer;
  trainer.source = source.name();
  ConfigSource scalars = ConfigSource::from_string("", source.name());
  for (const auto& [key, value] : source.values())
    if (starts_with(key, "trainer.") && !is_array_element(key) &&
        std::find(kArrays.begin(), kArrays.end(), key.substr(8)) == kArrays.end())
      scalars.set(key, value);
  ConfigBinder binder(scalars);
  std::string records = "protocol", ranks_from = "faultline";
  binder.bind("trainer.records", records, {"protocol", "log"});
  binder.bind("trainer.log_regex", trainer.log_regex);
  binder.bind("trainer.checkpoint_regex", trainer.checkpoint_regex);
  binder.bind("trainer.steps_key", trainer.steps_key);
  binder.bind("trainer.warmup_key", trainer.warmup_key);
  binder.bind("trainer.data_fraction_key", trainer.data_fraction_key);
  binder.bind_path("trainer.workdir", trainer.workdir, PathCheck::MustExist);
  binder.bind("trainer.ranks", trainer.ranks, {1, 4096});
  binder.bind("trainer.ranks_from", ranks_from);
  if (ranks_from != "faultline")
    binder.fail("trainer.ranks_from", "ranks_from = \"" + ranks_from + "\" is not supported yet",
                "leave it out: faultline starts each rank itself and gives it the torchrun "
                "environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)");
  try {
    binder.finish();
  } catch (const UserError& error) {
    for (const auto& item : error.items()) errors.add(item.what, item.where, item.hint);
  }
  trainer.records = records == "log" ? RecordSource::Log : RecordSource::Protocol;
  if (trainer.workdir.empty())
    trainer.workdir = fs::absolute(source.name()).parent_path().lexically_normal().string();

  trainer.command = array_at(source, "command", errors);
  trainer.resume = array_at(source, "resume", errors);
  trainer.stop_after = array_at(source, "stop_after", errors);
  trainer.checkpoint_every = array_at(source, "checkpoint_every", errors);
  if (trainer.command.empty())
    errors.add("a [trainer] section needs a command", where("trainer.command", source),
               "command = [\"/usr/bin/python3\", \"train.py\", \"--lr\", \"{optim.lr}\"]");
  for (const auto& name : array_at(source, "provides", errors)) {
    if (name == kHelper) {
      // The data is the script's own: a fraction of it needs trainer.data_fraction_key.
      for (auto capability : all_capabilities())
        if (capability != Capability::DataFraction && capability != Capability::CheaperWithLessData)
          add_capability(trainer.provides, capability);
    } else if (auto capability = parse_capability(name)) {
      add_capability(trainer.provides, *capability);
    } else {
      auto names = capability_names();
      names.push_back(kHelper);
      errors.add("unknown capability '" + name + "'", where("trainer.provides", source),
                 "valid: " + join(names, ", ") + guess(name, names));
    }
  }
  if (!trainer.resume.empty()) add_capability(trainer.provides, Capability::Resume);
  if (!trainer.stop_after.empty()) add_capability(trainer.provides, Capability::Prefix);
  if (!trainer.checkpoint_every.empty()) add_capability(trainer.provides, Capability::Checkpoints);
  if (!trainer.data_fraction_key.empty())
    add_capability(trainer.provides, Capability::DataFraction);

  if (trainer.records == RecordSource::Log) {
    if (trainer.log_regex.empty())
      errors.add("records = \"log\" needs a log_regex", where("trainer.records", source),
                 "log_regex = 'step (?P<step>\\d+) .*loss (?P<loss>\\S+)'");
    for (auto capability : {Capability::FullProbes, Capability::Fingerprints,
                            Capability::ReplaySamples, Capability::ReplicaMode})
      if (std::find(trainer.provides.begin(), trainer.provides.end(), capability) !=
          trainer.provides.end())
        errors.add(std::string("records = \"log\" cannot carry '") + to_string(capability) + "'",
                   where("trainer.provides", source),
                   "probes and fingerprints need the metrics protocol: records = \"protocol\" "
                   "with probes/python/faultline_probe.py");
    const bool checkpoints = std::find(trainer.provides.begin(), trainer.provides.end(),
                                       Capability::Checkpoints) != trainer.provides.end();
    if (checkpoints && trainer.checkpoint_regex.empty())
      errors.add("a log-only trainer that writes checkpoints needs a checkpoint_regex",
                 where("trainer.checkpoint_every", source),
                 "checkpoint_regex = 'saved (?P<path>\\S+) at step (?P<step>\\d+)': faultline "
                 "learns checkpoints from the trainer's own words, never from file names");
  } else if (!trainer.log_regex.empty() || !trainer.checkpoint_regex.empty()) {
    errors.add("log_regex is only read with records = \"log\"", where("trainer.log_regex", source),
               "set records = \"log\", or leave log_regex out");
  }
  if (trainer.records == RecordSource::Log && !trainer.log_regex.empty()) {
    try {
      LogRecords::compile(trainer.log_regex, trainer.checkpoint_regex, " in " + source.name(),
                          trainer.workdir);
    } catch (const UserError& error) {
      for (const auto& item : error.items()) errors.add(item.what, item.where, item.hint);
    }
  }
  return trainer;
}

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

const char* to_string(RecordSource source) {
  return source == RecordSource::Log ? "log" : "protocol";
}

const std::vector<std::string>& ask_names() {
  static const std::vector<std::string> names = {
      "stop_after",     "checkpoint_every",  "checkpoint_on_halt", "probe",
      "probe_from",     "fingerprint_every", "accumulate",         "replay_step",
      "replay_samples", "replay_ranks"};
  return names;
}

bool has_trainer_section(const ConfigSource& source) {
  for (const auto& [key, value] : source.values())
    if (starts_with(key, "trainer.")) return true;
  return false;
}

CommandTrainer load_command_trainer(const ConfigSource& source) {
  ErrorList errors;
  auto trainer = parse_trainer(source, errors);
  errors.throw_if_any();
  return trainer;
}

std::string placeholder_text(const ConfigValue& value) {
  return value.type == ConfigValue::Type::String ? value.string : value.toml();
}

std::vector<std::string> placeholders_of(const std::string& pattern) {
  std::vector<std::string> names;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{{") == 0 || pattern.compare(i, 2, "}}") == 0) {
      ++i;
      continue;
    }
    if (pattern[i] != '{') continue;
    const size_t end = pattern.find('}', i);
    if (end == std::string::npos) break;
    names.push_back(pattern.substr(i + 1, end - i - 1));
    i = end;
  }
  return names;
}

std::string fill_placeholders(const std::string& pattern,
                              const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{{") == 0 || pattern.compare(i, 2, "}}") == 0) {
      out += pattern[i++];
      continue;
    }
    const size_t end = pattern[i] == '{' ? pattern.find('}', i) : std::string::npos;
    if (end == std::string::npos) {
      out += pattern[i];
      continue;
    }
    const std::string name = pattern.substr(i + 1, end - i - 1);
    auto it = values.find(name);
    if (it == values.end()) throw std::out_of_range(name);
    out += it->second;
    i = end;
  }
  return out;
}

CommandRecipe load_command_recipe(ConfigSource source, const std::vector<std::string>& overrides,
                                  const std::vector<std::string>& cli_options) {
  const auto file = source.values();
  source.apply_overrides(overrides);
  ErrorList errors;
  std::vector<std::string> own_keys;
  for (const auto& [key, value] : file)
    if (!starts_with(key, "trainer.")) own_keys.push_back(key);
  for (auto [key, value] : source.values()) {
    if (file.count(key)) {
      if (value.origin.rfind("--set", 0) == 0) {
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
                       join(ask_names(), ", ") + guess(key.substr(10), ask_names()));
      continue;
    }
    std::string hint = "a command trainer's keys are those its recipe sets (" + source.name() +
                       "): add it there with its default" + guess(key, own_keys);
    if (auto option = option_named_by(key, cli_options); !option.empty())
      hint = "for that, use the option " + option + "; " + hint;
    errors.add("unknown key '" + key + "'", value.origin, hint);
  }

  CommandRecipe recipe;
  recipe.trainer = parse_trainer(source, errors);
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

  auto integer_key = [&](const std::string& key, const std::string& naming, int64_t& out) {
    auto it = recipe.config.find(key);
    if (it == recipe.config.end() || it->second.type != ConfigValue::Type::Int) {
      errors.add(naming + " names '" + key + "', which the recipe does not set to an integer",
                 where(naming, source),
                 "name the trainer's own key in [trainer] " + naming.substr(8) + " = \"...\"");
      return;
    }
    out = it->second.integer;
  };
  integer_key(trainer.steps_key, "trainer.steps_key", recipe.steps);
  if (!trainer.warmup_key.empty())
    integer_key(trainer.warmup_key, "trainer.warmup_key", recipe.warmup_steps);
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
  auto check = [&](const std::vector<std::string>& pattern, const std::string& name,
                   const std::string& own) {
    std::set<std::string> used;
    for (const auto& part : pattern)
      for (const auto& placeholder : placeholders_of(part)) {
        used.insert(placeholder);
        if (values.count(placeholder) || placeholder == own) continue;
        errors.add("placeholder {" + placeholder + "} names no key of the recipe",
                   where("trainer." + name + ".0", source),
                   "placeholders are {section.key} of the recipe, {out}" +
                       (own.empty() ? std::string() : ", {" + own + "}") +
                       guess(placeholder, own_keys));
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
