// A command trainer's [trainer] section: its command and fragments, how its records arrive, and
// what it provides. Problems are collected for the caller to report with the others.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <filesystem>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/contract/command_recipe.hpp"
#include "harness/contract/recipe_text.hpp"
#include "harness/launch/log_records.hpp"

namespace faultline::harness::contract {

namespace {

using detail::guess;
using detail::where;
namespace fs = std::filesystem;

const std::vector<std::string> kArrays = {"command", "resume", "stop_after", "checkpoint_every",
                                          "provides"};
constexpr std::pair<RecordSource, const char*> kRecordSources[] = {
    {RecordSource::Protocol, "protocol"}, {RecordSource::Log, "log"}};
constexpr std::pair<RanksFrom, const char*> kRanksFrom[] = {{RanksFrom::Faultline, "faultline"},
                                                            {RanksFrom::Launcher, "torchrun"}};

// provides = ["faultline_probe"]: everything the Python helper does.
constexpr const char* kHelper = "faultline_probe";

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
}  // namespace

CommandTrainer parse_command_trainer(const ConfigSource& source, ErrorList& errors) {
  CommandTrainer trainer;
  trainer.source = source.name();
  ConfigSource scalars = ConfigSource::from_string("", source.name());
  for (const auto& [key, value] : source.values())
    if (starts_with(key, "trainer.") && !is_array_element(key) &&
        std::find(kArrays.begin(), kArrays.end(), key.substr(8)) == kArrays.end())
      scalars.set(key, value);
  ConfigBinder binder(scalars);
  binder.bind_enum("trainer.records", trainer.records, kRecordSources);
  binder.bind("trainer.log_regex", trainer.log_regex);
  binder.bind("trainer.checkpoint_regex", trainer.checkpoint_regex);
  binder.bind("trainer.steps_key", trainer.steps_key);
  binder.bind("trainer.warmup_key", trainer.warmup_key);
  binder.bind("trainer.data_fraction_key", trainer.data_fraction_key);
  binder.bind_path("trainer.workdir", trainer.workdir, PathCheck::MustExist);
  binder.bind_path("trainer.config_file", trainer.config_file, PathCheck::MustExist);
  binder.bind("trainer.ranks", trainer.ranks, {1, 4096});
  binder.bind_enum("trainer.ranks_from", trainer.ranks_from, kRanksFrom);
  try {
    binder.finish();
  } catch (const UserError& error) {
    for (const auto& item : error.items()) errors.add(item.what, item.where, item.hint);
  }
  if (trainer.ranks_from == RanksFrom::Launcher && trainer.records == RecordSource::Log)
    errors.add("ranks_from = \"torchrun\" needs records = \"protocol\"",
               where("trainer.ranks_from", source),
               "one output holds every rank's lines: each rank writes its own metrics file "
               "instead (FAULTLINE_METRICS names it with {rank})");
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
                 "valid: " + fmt::format("{}", fmt::join(names, ", ")) + guess(name, names));
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
    for (auto capability : trainer.provides)
      if (needs_metrics_protocol(capability))
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

const char* to_string(RecordSource source) {
  return name_of(kRecordSources, source);
}

bool has_trainer_section(const ConfigSource& source) {
  for (const auto& [key, value] : source.values())
    if (starts_with(key, "trainer.")) return true;
  return false;
}

CommandTrainer load_command_trainer(const ConfigSource& source) {
  ErrorList errors;
  auto trainer = parse_command_trainer(source, errors);
  errors.throw_if_any();
  return trainer;
}

}  // namespace faultline::harness::contract
