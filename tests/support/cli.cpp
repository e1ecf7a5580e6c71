// Runs the faultline CLI for end-to-end tests.
#include "support/cli.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <sstream>

#include "store/store.hpp"

namespace faultline::testing {

std::vector<std::string> faultline_argv(std::vector<std::string> args, const std::string& dir,
                                        TimingDetectors timing) {
  static const std::vector<std::string> trainer_commands = {"train",  "smoke", "isolate",
                                                            "bisect", "repro", "import"};
  const bool runs_trainer = std::find(trainer_commands.begin(), trainer_commands.end(),
                                      args.front()) != trainer_commands.end();
  const bool names_detectors = std::find(args.begin(), args.end(), "--detectors") != args.end();
  args.insert(args.begin(), FAULTLINE_BIN);
  args.insert(args.end(), {"--db", dir + "/faultline.db"});
  if (runs_trainer)
    args.insert(args.end(), {"--work-dir", dir + "/runs", "--trainer", FAULTLINE_TRAIN_BIN});
  if (runs_trainer && timing == TimingDetectors::Off && !names_detectors)
    args.insert(args.end(), {"--detectors",
                             FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/no_timing_detectors.toml"});
  return args;
}

Cli cli_of(ProcessResult result) {
  Cli cli{std::move(result), nullptr};
  std::istringstream lines(cli.result.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '{') cli.doc = nlohmann::json::parse(line, nullptr, false);
  return cli;
}

Cli faultline_cli(std::vector<std::string> args, const std::string& dir, double timeout_s,
                  std::function<bool()> kill_when, TimingDetectors timing) {
  return cli_of(
      run_process({faultline_argv(std::move(args), dir, timing), {}, timeout_s, kill_when, {}}));
}

std::function<int()> interrupt_past_step(const std::string& db, int64_t step, bool& sent) {
  sent = false;
  return [db, step, &sent] {
    if (sent || !std::filesystem::exists(db)) return 0;
    try {
      auto store = store::Store::open(db);
      for (const auto& run : store.list_runs(-1))
        sent = sent || (run.status == store::RunStatus::Running &&
                        store.summarize(run.id).last_step >= step);
    } catch (const std::exception&) {
      return 0;  // polled while faultline was creating the store (a lock, a schema half made)
    }
    return sent ? SIGINT : 0;
  };
}

std::vector<std::string> with_sets(std::vector<std::string> args,
                                   const std::vector<std::string>& sets) {
  for (const auto& set : sets) args.insert(args.end(), {"--set", set});
  return args;
}

}  // namespace faultline::testing
