// The reference commands: check the runs (stored, passed, one config but the seed), store the
// reference, list and show references. The judging itself is probes/detectors/reference.hpp.
#include "cli/reference_command.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/trial/trial.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct ReferenceArgs {
  RunContextOptions& context = shared_context();
  std::string name;
  std::vector<std::string> runs;
};

// Keys that do not make two runs different configs: the seed (that is the point of several
// runs), how far a run went and what it probed.
bool ignored_key(const std::string& key) {
  return key == "train.seed" || key == "train.stop_after" || starts_with(key, "probe.");
}

// "a = 1 vs 2" for each key whose values differ, or that one config lacks.
std::vector<std::string> config_differences(const std::string& first, const std::string& other) {
  auto a = harness::contract::keys_of(first);
  auto b = harness::contract::keys_of(other);
  std::set<std::string> keys;
  for (const auto& [key, value] : a) keys.insert(key);
  for (const auto& [key, value] : b) keys.insert(key);
  std::vector<std::string> out;
  for (const auto& key : keys) {
    if (ignored_key(key)) continue;
    auto x = a.find(key), y = b.find(key);
    const std::string left = x == a.end() ? "(unset)" : x->second;
    const std::string right = y == b.end() ? "(unset)" : y->second;
    if (left != right) out.push_back(key + " = " + right + " (the first run has " + left + ")");
  }
  return out;
}

json reference_json(const store::ReferenceInfo& reference) {
  return {{"name", reference.name},
          {"runs", reference.run_ids},
          {"config_path", reference.config_path},
          {"config_hash", reference.config_hash},
          {"created_at", reference.created_at}};
}

int add_reference(const ReferenceArgs& args) {
  require_store(args.context.db);
  auto store = open_store(args.context);
  const std::string db = resolve_db_path(args.context.db);
  ErrorList errors;
  if (store.get_reference(args.name))
    errors.add("a reference named '" + args.name + "' exists already", db,
               "pick another name, or see `faultline reference show " + args.name + "`");
  std::vector<store::RunInfo> runs;
  std::set<int64_t> seen;
  for (const auto& text : args.runs) {
    int64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
      errors.add("'" + text + "' is not a run id", "RUN", "see `faultline runs`");
      continue;
    }
    auto run = store.get_run(id);
    if (!run) {
      errors.add("no run " + text, db, "see `faultline runs`");
      continue;
    }
    if (!seen.insert(id).second) {
      errors.add("run " + text + " is given twice", "RUN", "give each run once");
      continue;
    }
    if (harness::parse_verdict(run->verdict) != harness::Verdict::Pass) {
      errors.add("run " + text + " did not pass (verdict '" + run->verdict + "')", "RUN",
                 "a reference is made of healthy runs: see `faultline show " + text + "`");
      continue;
    }
    runs.push_back(*run);
  }
  for (size_t i = 1; i < runs.size(); ++i) {
    auto differences = config_differences(runs[0].config, runs[i].config);
    if (!differences.empty())
      errors.add("run " + std::to_string(runs[i].id) + " is not the config of run " +
                     std::to_string(runs[0].id) +
                     " but for its seed: " + fmt::format("{}", fmt::join(differences, "; ")),
                 "RUN", "a reference holds seeds of one config (train.seed may differ)");
  }
  errors.throw_if_any();
  store::ReferenceInfo reference;
  reference.name = args.name;
  for (const auto& run : runs) reference.run_ids.push_back(run.id);
  reference.config_path = runs.at(0).config_path;
  reference.config_hash = runs.at(0).config_hash;
  store.add_reference(reference);
  auto stored = store.get_reference(args.name);
  if (args.context.json)
    fmt::print("{}\n", reference_json(*stored).dump());
  else
    fmt::print("reference '{}': {} run(s) of {}\n", stored->name, stored->run_ids.size(),
               stored->config_path);
  return 0;
}

store::ReferenceInfo find_reference(const store::Store& store, const std::string& name) {
  if (auto reference = store.get_reference(name)) return *reference;
  std::vector<std::string> names;
  for (const auto& each : store.list_references()) names.push_back(each.name);
  throw UserError("no reference named '" + name + "'", store.path(),
                  names.empty()
                      ? "store one with `faultline reference add NAME RUN...`"
                      : "stored references: " + fmt::format("{}", fmt::join(names, ", ")));
}

}  // namespace

std::shared_ptr<const std::vector<std::vector<StepRecord>>> load_reference(
    const store::Store& store, const std::string& name) {
  auto runs = std::make_shared<std::vector<std::vector<StepRecord>>>();
  for (int64_t id : find_reference(store, name).run_ids) runs->push_back(store.steps(id));
  return runs;
}

void add_reference_commands(CLI::App& app, int& exit_code) {
  auto* reference =
      app.add_subcommand("reference", "named references of healthy runs (loss_regression)");
  reference->require_subcommand(1);
  auto args = std::make_shared<ReferenceArgs>();

  auto* add = reference->add_subcommand("add", "store runs (seeds of one config) as a reference");
  add->add_option("NAME", args->name, "the reference's name")->required();
  add->add_option("RUN", args->runs, "stored runs that passed")->required();
  add_store_options(*add);
  add->callback([args, &exit_code] { exit_code = add_reference(*args); });

  auto* list = reference->add_subcommand("list", "stored references");
  add_store_options(*list);
  list->callback([args] {
    auto store = open_existing_store(args->context.db);
    json out = json::array();
    for (const auto& each : store.list_references()) {
      if (args->context.json) {
        out.push_back(reference_json(each));
        continue;
      }
      fmt::print("{}  runs {}  {}  {}\n", each.name, fmt::join(each.run_ids, ","), each.created_at,
                 each.config_path);
    }
    if (args->context.json) fmt::print("{}\n", json{{"references", out}}.dump());
  });

  auto* show = reference->add_subcommand("show", "one reference: its runs and their losses");
  show->add_option("NAME", args->name, "the reference's name")->required();
  add_store_options(*show);
  show->callback([args] {
    auto store = open_existing_store(args->context.db);
    const auto stored = find_reference(store, args->name);
    auto doc = reference_json(stored);
    json runs = json::array();
    for (int64_t id : stored.run_ids) {
      auto summary = store.summarize(id);
      runs.push_back({{"run_id", id},
                      {"steps", summary.last_step},
                      {"first_loss", summary.first_loss.value_or(NAN)},
                      {"last_loss", summary.last_loss.value_or(NAN)}});
    }
    doc["run_summaries"] = runs;
    if (args->context.json) {
      fmt::print("{}\n", doc.dump());
      return;
    }
    fmt::print("reference '{}' ({}), created {}\n", stored.name, stored.config_path,
               stored.created_at);
    for (const auto& run : runs)
      fmt::print("  run {}: {} steps, loss {} -> {}\n", run.at("run_id").get<int64_t>(),
                 run.at("steps").get<int64_t>(), run.at("first_loss").dump(),
                 run.at("last_loss").dump());
  });
}

}  // namespace faultline::cli
