// How the contract starts a trainer: faultline-train's argv with its keys, or a command
// trainer's argv filled from its recipe, its asks as FAULTLINE_* variables, and its folder.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "common/resources.hpp"
#include "common/text.hpp"
#include "harness/contract/config_file.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/node_placeholders.hpp"

namespace faultline::harness::contract {

namespace {

std::string upper(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The folder of faultline_probe.py, for PYTHONPATH; "" when faultline has no share folder.
std::string helper_dir() {
  try {
    return share_file("python/faultline_probe.py").parent_path().string();
  } catch (const UserError&) {
    return "";
  }
}

std::vector<std::string> bundled_argv(const TrialSpec& spec, const std::string& trainer) {
  std::vector<std::string> argv = {trainer, "-c", spec.config_path};
  for (const auto& assignment : trial_overrides(spec)) {
    argv.push_back("--set");
    argv.push_back(assignment);
  }
  if (!spec.resume.empty()) {
    argv.push_back("--resume");
    argv.push_back(spec.resume);
  }
  return argv;
}

}  // namespace

std::vector<std::string> trial_variables() {
  std::vector<std::string> names = {"FAULTLINE_METRICS", "FAULTLINE_OUT", "FAULTLINE_RESUME",
                                    "FAULTLINE_STACKS", "FAULTLINE_HOST"};
  for (const auto& ask : ask_names()) names.push_back("FAULTLINE_" + upper(ask));
  return names;
}

void forget_inherited_trial_variables() {
  for (const auto& name : trial_variables()) unsetenv(name.c_str());
}

std::vector<std::string> TrainerContract::argv(const TrialSpec& spec,
                                               const std::string& trainer) const {
  if (!command_) return bundled_argv(spec, trainer);
  // A command line a person can paste: env runs it in its folder with the asks set, and what
  // it writes (checkpoints) goes to a folder of its own there, not among the script's files.
  // {master_port} is torchrun's default port, as the pasted loop's MASTER_PORT is.
  const auto command = rank_command(spec, trainer, kPastedOutDir, 29500);
  std::vector<std::string> argv = {"env", "-C", command.cwd};
  for (const auto& [name, value] : command.env)
    if (name != "PYTHONUNBUFFERED") argv.push_back(name + "=" + value);
  // A launcher that starts its own ranks runs them all here, on one node.
  const auto filled =
      fill_node_placeholders(command.argv, {{"nnodes", "1"},
                                            {"nproc_per_node", std::to_string(spec.ranks)},
                                            {"node_rank", "0"},
                                            {"master_addr", "127.0.0.1"}});
  argv.insert(argv.end(), filled.begin(), filled.end());
  return argv;
}

std::string TrainerContract::pasted_command(const TrialSpec& spec,
                                            const std::string& trainer) const {
  auto words = argv(spec, trainer);
  const bool one_process =
      spec.ranks <= 1 || (command_ && command_->ranks_from == RanksFrom::Launcher);
  // A trial's run directory is made by faultline and its metrics file named: a paste makes and
  // names them itself, or a script that writes there stops at a missing folder or variable.
  std::string made;
  if (command_) {
    made = "mkdir -p " + shell_word(words.at(2) + "/" + kPastedOutDir) + " && ";
    if (one_process)
      words.insert(words.begin() + 3, fmt::format("FAULTLINE_METRICS={}/metrics.rank{}.jsonl",
                                                  kPastedOutDir, spec.ranks <= 1 ? "0" : "{rank}"));
  }
  const std::string one = shell_command(words);
  if (one_process) {
    // A host label makes a host's fault fire (FAULTLINE_HOST): without it the paste runs clean.
    if (spec.hosts.empty()) return made + one;
    return made + "FAULTLINE_HOST=" + shell_word(spec.hosts.front()) + " " + one;
  }
  // Each rank's metrics file, set before env (which passes it on) so $r expands.
  const std::string metrics =
      command_ ? fmt::format("FAULTLINE_METRICS={}/metrics.rank$r.jsonl ", kPastedOutDir) : "";
  // The ranks in a subshell that exits with the first failing rank's status (a bare `wait` is
  // 0 whatever they did, so a reproduced crash read as none) and ends them all on Ctrl-C
  // (background ranks of a non-interactive shell ignore SIGINT: a pasted hang could not be
  // stopped).
  const std::string reap = "s=0; for p in $pids; do wait $p || s=$?; done; exit $s)";
  made += "(trap 'kill 0' INT TERM; pids=; ";
  // The rendezvous port is torchrun's default unless the shell says otherwise: a person whose
  // 29500 is taken prefixes MASTER_PORT=... to the paste.
  if (static_cast<int>(spec.hosts.size()) >= spec.ranks) {
    // Rank r runs on the r-th host label, as the search ran it (spares after them unused).
    std::vector<std::string> labels;
    for (int rank = 0; rank < spec.ranks; ++rank)
      labels.push_back(shell_word(spec.hosts[static_cast<size_t>(rank)]));
    return fmt::format(
        "{}r=0; for h in {}; do RANK=$r LOCAL_RANK=$r WORLD_SIZE={} FAULTLINE_HOST=$h "
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=${{MASTER_PORT:-29500}} {}{} & pids=\"$pids $!\"; "
        "r=$((r+1)); done; {}",
        made, fmt::join(labels, " "), spec.ranks, metrics, one, reap);
  }
  return fmt::format(
      "{}for r in $(seq 0 {}); do RANK=$r LOCAL_RANK=$r WORLD_SIZE={} MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT=${{MASTER_PORT:-29500}} {}{} & pids=\"$pids $!\"; done; {}",
      made, spec.ranks - 1, spec.ranks, metrics, one, reap);
}

RankCommand TrainerContract::rank_command(const TrialSpec& spec, const std::string& trainer,
                                          const std::string& out_dir, int master_port) const {
  RankCommand command;
  if (!command_) {
    command.argv = bundled_argv(spec, trainer);
    command.argv.push_back("--out");
    command.argv.push_back(out_dir);
    return command;
  }
  const auto recipe = load_recipe(spec.config_path, trial_overrides(spec));
  const auto& own = recipe.command->trainer;
  std::map<std::string, std::string> values;
  for (const auto& [name, value] : recipe.command->config) values[name] = placeholder_text(value);
  values["out"] = out_dir;
  values["ranks"] = std::to_string(spec.ranks);
  values["master_port"] = std::to_string(master_port);
  command.one_process = own.ranks_from == RanksFrom::Launcher;
  // The launch fills them, per node (harness/launch/node_placeholders.hpp).
  if (command.one_process)
    for (const auto& name : node_placeholders()) values[name] = "{" + name + "}";
  if (!own.config_file.empty()) {
    std::map<std::string, ConfigValue> trial_values;
    for (const auto& key : recipe.command->file_keys)
      trial_values[key] = recipe.command->config.at(key);
    const auto copy = out_dir + "/" + std::filesystem::path(own.config_file).filename().string();
    command.files.emplace_back(copy, rewrite_config_file(own.config_file, trial_values));
    values["config_file"] = copy;
  }
  auto append = [&](const std::vector<std::string>& fragment) {
    for (const auto& part : fragment) command.argv.push_back(fill_placeholders(part, values));
  };
  append(own.command);
  const auto& asks = recipe.command->asks;
  if (!spec.resume.empty() && !own.resume.empty()) {
    values["checkpoint"] = spec.resume;
    append(own.resume);
  }
  if (auto it = asks.find("stop_after"); it != asks.end() && !own.stop_after.empty()) {
    values["step"] = it->second;
    append(own.stop_after);
  }
  if (auto it = asks.find("checkpoint_every");
      it != asks.end() && it->second != "0" && !own.checkpoint_every.empty()) {
    values["every"] = it->second;
    append(own.checkpoint_every);
  }
  for (const auto& [name, value] : asks) command.env["FAULTLINE_" + upper(name)] = value;
  if (!spec.resume.empty()) command.env["FAULTLINE_RESUME"] = spec.resume;
  command.env["FAULTLINE_OUT"] = out_dir;
  command.env["PYTHONUNBUFFERED"] = "1";  // a log line arrives when it is printed
  if (const auto dir = helper_dir(); !dir.empty()) {
    const char* path = std::getenv("PYTHONPATH");
    command.env["PYTHONPATH"] = path && *path ? dir + ":" + path : dir;
  }
  command.cwd = own.workdir;
  command.records = own.records;
  command.log_regex = own.log_regex;
  command.checkpoint_regex = own.checkpoint_regex;
  return command;
}

}  // namespace faultline::harness::contract
