// Resolution of paths shared by the run commands, and the interrupt flag.
#include "cli/run_context.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/gpu_commands.hpp"
#include "cli/option_checks.hpp"
#include "common/error.hpp"
#include "common/resources.hpp"
#include "common/text.hpp"
#include "harness/launch/launcher_config.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {
std::atomic<bool> g_interrupted{false};
void on_signal(int) {
  g_interrupted.store(true);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}
}  // namespace

RunContextOptions& shared_context() {
  static RunContextOptions options;
  return options;
}

void add_store_options(CLI::App& command) {
  auto& options = shared_context();
  command.add_option("--db", options.db, "SQLite store (default: $FAULTLINE_DB or ./faultline.db)");
  command.add_flag("--json", options.json, "print one JSON document on stdout");
}

std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* app = &command; app != nullptr; app = app->get_parent())
    for (const CLI::Option* option : app->get_options())
      if (!option->get_lnames().empty()) names.push_back("--" + option->get_lnames().front());
  return names;
}

bool option_given(const CLI::App& command, const std::string& option) {
  for (const CLI::App* app = &command; app != nullptr; app = app->get_parent())
    if (app->get_option_no_throw(option) && app->count(option) > 0) return true;
  return false;
}

// A default fit for 5 ms steps would call a model's 90 s steps hung, and one fit for those would
// make a replayed hang of a small model wait minutes.
std::optional<double> step_timeout_of_run(const store::Store& store, int64_t run_id) {
  const auto run = store.get_run(run_id);
  if (!run) return std::nullopt;
  const double slowest_ms = store.summarize(run_id).slowest_step_ms;
  if (slowest_ms <= 0) return std::nullopt;
  return std::max(10.0, 20 * slowest_ms / 1000 * std::max(1, run->ranks));
}

std::string resolve_train_recipe(const std::string& given, const std::string& option) {
  return resolve_recipe(given, RecipeKind::Train, option);
}

void add_context_options(CLI::App& command) {
  auto& options = shared_context();
  add_store_options(command);
  command.add_option("--trainer", options.trainer,
                     "trainer executable (default: faultline-train next to faultline)");
  command.add_option("--work-dir", options.work_dir,
                     "where run directories go (default: ./faultline-runs)");
  command.add_option("--detectors", options.detectors, "detector thresholds (TOML)");
  command
      .add_option("--step-timeout", options.step_timeout_s,
                  "seconds without a step record that make a hang")
      ->check(above_zero());
  command
      .add_option("--startup-timeout", options.startup_s,
                  "seconds a rank may take to its first step record (a queued job's wait is not "
                  "counted)")
      ->check(above_zero());
  command.add_flag("-q,--quiet", options.quiet, "no progress lines on stderr");
  command.add_flag("--cupti", options.cupti,
                   "load the CUPTI probe into every rank: gpu records of busy, NCCL and idle time");
}

void add_launcher_option(CLI::App& command) {
  command.add_option(
      "--launcher", shared_context().launcher,
      "where trials run: local, or slurm (srun steps inside an allocation, else "
      "sbatch jobs); default: the recipe's launcher.kind (a stored run's replays: where it "
      "ran), else local");
}

harness::LauncherConfig launcher_config(const RunContextOptions& options, const std::string& recipe,
                                        const std::vector<std::string>& overrides) {
  return harness::load_launcher_config(recipe, overrides, options.launcher);
}

std::vector<std::string> set_assignments(const std::vector<std::string>& argv) {
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--set") sets.push_back(argv[i + 1]);
  return sets;
}

harness::LauncherConfig launcher_config_of_run(const RunContextOptions& options,
                                               const store::Store& store, int64_t run_id,
                                               const std::vector<std::string>& overrides,
                                               bool& took_runs_launcher) {
  took_runs_launcher = false;
  const auto run = store.get_run(run_id);
  if (!run) return launcher_config(options, "", overrides);  // the isolate says it is unknown
  std::vector<std::string> sets;
  // The keys it was placed with; a run stored before they were kept has them in its argv when
  // the trainer was faultline-train.
  const auto stored = nlohmann::json::parse(run->launcher_sets_json, nullptr, false);
  if (stored.is_array() && !stored.empty()) sets = stored.get<std::vector<std::string>>();
  const auto argv = nlohmann::json::parse(run->argv_json, nullptr, false);
  if (sets.empty() && argv.is_array())
    for (const auto& assignment : set_assignments(argv.get<std::vector<std::string>>()))
      if (starts_with(assignment, "launcher.")) sets.push_back(assignment);
  sets.insert(sets.end(), overrides.begin(), overrides.end());
  std::error_code error;
  const std::string recipe =
      !run->config_path.empty() && std::filesystem::is_regular_file(run->config_path, error)
          ? run->config_path
          : "";
  // Where it ran wins over its recipe's kind (it may have been run with --launcher); an import
  // ran nowhere faultline knows, and its recipe decides.
  RunContextOptions chosen = options;
  if (const auto ran_on = harness::parse_launcher_kind(run->launcher);
      ran_on && chosen.launcher.empty()) {
    chosen.launcher = harness::to_string(*ran_on);
    took_runs_launcher = *ran_on == harness::LauncherKind::Slurm;
  }
  try {
    return launcher_config(chosen, recipe, sets);
  } catch (const UserError&) {
    // A recipe edited since the run (or broken) changes nothing a replay of it needs: the run's
    // own launcher keys and this command's still apply (repro says the recipe changed).
    if (recipe.empty()) throw;
    return launcher_config(chosen, "", sets);
  }
}

std::unique_ptr<harness::Launcher> make_launcher(const RunContextOptions& options,
                                                 const std::string& recipe,
                                                 const std::vector<std::string>& overrides) {
  return harness::make_launcher(launcher_config(options, recipe, overrides));
}

std::string resolve_db_path(const std::string& flag) {
  const std::string path = !flag.empty() ? flag : env_or("FAULTLINE_DB", "faultline.db");
  std::error_code error;
  if (fs::is_directory(path, error))
    throw UserError(
        "the store path is a directory", path,
        "give --db (or FAULTLINE_DB) a file, e.g. " + (fs::path(path) / "faultline.db").string());
  return path;
}

store::Store open_existing_store(const std::string& flag) {
  require_store(flag);
  return store::Store::open(resolve_db_path(flag));
}

void require_store(const std::string& flag) {
  const std::string path = resolve_db_path(flag);
  std::error_code error;
  // An empty file is no store either (a `touch`, a failed copy): opening it would write one.
  if (!fs::exists(path) || (fs::is_regular_file(path) && fs::file_size(path, error) == 0)) {
    const char* from = !flag.empty()                 ? "--db"
                       : std::getenv("FAULTLINE_DB") ? "$FAULTLINE_DB"
                                                     : "the default store";
    throw UserError("no faultline store at " + fs::absolute(path).string(), from,
                    "run this where train, smoke or isolate stored their runs, or name the store "
                    "with --db PATH or $FAULTLINE_DB");
  }
}

std::string resolve_trainer(const std::string& flag) {
  std::string chosen = !flag.empty() ? flag : env_or("FAULTLINE_TRAIN", "");
  if (!chosen.empty()) {
    if (access(chosen.c_str(), X_OK) != 0)
      throw UserError("trainer is not an executable file", chosen,
                      "check --trainer or FAULTLINE_TRAIN");
    return fs::absolute(chosen).lexically_normal().string();
  }
  for (const auto& candidate :
       {executable_dir() / "faultline-train", executable_dir() / "../trainer/faultline-train"})
    if (access(candidate.c_str(), X_OK) == 0) return fs::weakly_canonical(candidate).string();
  throw UserError("cannot find faultline-train", executable_dir().string(),
                  "pass --trainer PATH or set FAULTLINE_TRAIN");
}

void take_trainer_of_run(const store::Store& store, int64_t run_id, RunContextOptions& options,
                         const std::string& command, const std::string& where) {
  if (!options.trainer.empty() || !env_or("FAULTLINE_TRAIN", "").empty()) return;
  const auto run = store.get_run(run_id);
  if (!run) return;
  const auto argv = nlohmann::json::parse(run->argv_json, nullptr, false);
  if (!argv.is_array() || argv.size() < 3 || argv[1] != "-c" || !argv[0].is_string()) return;
  const std::string ran = argv[0].get<std::string>();
  if (ran == resolve_trainer("")) return;
  if (access(ran.c_str(), X_OK) != 0)
    throw UserError(
        "run " + std::to_string(run_id) + " ran the trainer " + ran + ", which is no longer there",
        where, "give --trainer PATH to replay it with another build");
  options.trainer = ran;
  if (!options.quiet)
    fmt::print(stderr,
               "faultline {}: run {} ran the trainer {}: its replays do too (--trainer "
               "PATH runs another)\n",
               command, run_id, ran);
}

harness::RunnerOptions runner_options(const RunContextOptions& options) {
  harness::RunnerOptions runner;
  runner.trainer = resolve_trainer(options.trainer);
  runner.work_dir =
      fs::absolute(options.work_dir.empty() ? "faultline-runs" : options.work_dir).string();
  runner.supervise.step_timeout_s = options.step_timeout_s;
  runner.supervise.startup_s = options.startup_s;
  if (!options.detectors.empty()) {
    if (!fs::is_regular_file(options.detectors))
      throw UserError("no detector file " + options.detectors, "--detectors",
                      "give a TOML file of thresholds (the defaults are "
                      "share/faultline/recipes/detectors/default.toml)");
    runner.thresholds = detectors::load_thresholds(options.detectors);
  }
  runner.interrupted = interrupt_flag();
  // The ranks inherit faultline's environment; faultline itself never loads CUDA.
  if (options.cupti) setenv("CUDA_INJECTION64_PATH", resolve_cupti_library().c_str(), 1);
  return runner;
}

store::Store open_store(const RunContextOptions& options) {
  const std::string path = resolve_db_path(options.db);
  auto store = store::Store::open(path);
  // Before runs are written into it: a damaged page is written around, so a gate passed into a
  // corrupt file and failed only when a write touched the page, after the training. A scan of
  // the file: up to 1 GiB (about 2 s), beyond which a command would wait too long for it.
  std::error_code error;
  if (const auto size = fs::file_size(path, error); !error && size <= (uintmax_t{1} << 30))
    store.check_not_damaged();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<int64_t> orphans;
  for (int64_t id : store.running_run_ids()) {
    auto run = store.get_run(id);
    if (!run || run->owner_pid <= 0 || run->owner_host != host) continue;
    if (kill(static_cast<pid_t>(run->owner_pid), 0) != 0 && errno == ESRCH) orphans.push_back(id);
  }
  store.mark_interrupted(orphans);
  return store;
}

std::string judge_identity(const RunContextOptions& options) {
  // "{}" is the shortest text that reads back as the same double: std::to_string's six decimals
  // would make 1e-7 and 2e-7 one identity.
  std::string identity =
      fmt::format("step_timeout_s={};startup_s={}{};detectors=", options.step_timeout_s,
                  options.startup_s, options.cupti ? ";cupti" : "");
  if (!options.detectors.empty()) {
    std::ifstream in(options.detectors, std::ios::binary);
    identity += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return identity;
}

const std::atomic<bool>* interrupt_flag() {
  static bool installed = false;
  if (!installed) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    installed = true;
  }
  return &g_interrupted;
}

}  // namespace faultline::cli
