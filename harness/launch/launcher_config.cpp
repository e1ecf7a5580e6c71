// Binding [launcher] (the recipe's launcher.* keys, after --set) and choosing the launcher.
#include "harness/launch/launcher_config.hpp"

#include <fmt/format.h>
#include <sstream>
#include <utility>

#include "common/config.hpp"
#include "common/enum_names.hpp"
#include "common/text.hpp"
#include "harness/launch/local_launcher.hpp"
#include "harness/launch/slurm_launcher.hpp"

namespace faultline::harness {

namespace {

// The one table of launcher names: to_string, parse_launcher_kind and the valid choices.
constexpr std::pair<LauncherKind, const char*> kKinds[] = {
    {LauncherKind::Local, "local"},
    {LauncherKind::Slurm, "slurm"},
};

}  // namespace

const char* to_string(LauncherKind kind) {
  return name_of(kKinds, kind);
}

std::optional<LauncherKind> parse_launcher_kind(const std::string& text) {
  return value_of(kKinds, text);
}

LauncherConfig load_launcher_config(const std::string& recipe_path,
                                    const std::vector<std::string>& overrides,
                                    const std::string& kind_flag) {
  ConfigSource all = recipe_path.empty() ? ConfigSource::from_string("", "--launcher")
                                         : ConfigSource::from_file(recipe_path);
  all.apply_overrides(overrides);
  const ConfigSource source = all.only("launcher");
  ConfigBinder binder(source);
  LauncherConfig config;
  std::string srun_args;
  auto& slurm = config.slurm;
  binder.bind_enum("launcher.kind", config.kind, kKinds);
  binder.bind("launcher.nodes", slurm.nodes, {0, 100000});
  binder.bind("launcher.tasks_per_node", slurm.tasks_per_node, {0, 100000});
  binder.bind("launcher.time_limit", slurm.time_limit);
  binder.bind("launcher.partition", slurm.partition);
  binder.bind("launcher.account", slurm.account);
  binder.bind("launcher.nodelist", slurm.nodelist);
  binder.bind("launcher.exclude", slurm.exclude);
  binder.bind("launcher.srun_args", srun_args);
  if (!kind_flag.empty() && !parse_launcher_kind(kind_flag))
    binder.fail("launcher.kind", "--launcher " + kind_flag + " is not a launcher",
                fmt::format("give {}", fmt::join(names_of(kKinds), " or ")));
  binder.finish();
  if (!kind_flag.empty()) config.kind = *parse_launcher_kind(kind_flag);
  std::istringstream words(srun_args);
  for (std::string word; words >> word;) slurm.srun_args.push_back(word);
  for (const auto& assignment : overrides)
    if (starts_with(trim(assignment), "launcher.")) slurm.sets.push_back(trim(assignment));
  return config;
}

std::unique_ptr<Launcher> make_launcher(const LauncherConfig& config) {
  if (config.kind == LauncherKind::Slurm) return std::make_unique<SlurmLauncher>(config.slurm);
  return std::make_unique<LocalLauncher>();
}

}  // namespace faultline::harness
