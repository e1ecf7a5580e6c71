// The [launcher] section of a trainer recipe: which launcher runs the trials and, for Slurm,
// the shape and place of each trial's job. Ordinary recipe keys (`--set launcher.nodes=2`);
// the trainer itself ignores them (ConfigBinder::accept_prefix).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/launcher.hpp"

namespace faultline::harness {

enum class LauncherKind { Local, Slurm };
const char* to_string(LauncherKind kind);
std::optional<LauncherKind> parse_launcher_kind(const std::string& text);  // nullopt: unknown

struct SlurmOptions {
  int nodes = 0;           // 0: as many as the ranks need at tasks_per_node
  int tasks_per_node = 0;  // 0: the ranks spread evenly over `nodes`
  std::string time_limit;  // srun/sbatch --time ("10", "1:00:00"); "": the partition's
  std::string partition, account;
  std::string nodelist, exclude;       // --nodelist / --exclude
  std::vector<std::string> srun_args;  // extra srun arguments, e.g. ["--mem=0"]
  std::vector<std::string> sets;       // the --set launcher.* keys among these
};

struct LauncherConfig {
  LauncherKind kind = LauncherKind::Local;
  SlurmOptions slurm;
};

// The recipe's launcher.* keys (none when recipe_path is "") with `overrides` (only their
// launcher.* ones count), and `kind_flag` (--launcher, "" when not given) over launcher.kind. Every
// problem in one UserError.
LauncherConfig load_launcher_config(const std::string& recipe_path,
                                    const std::vector<std::string>& overrides,
                                    const std::string& kind_flag = "");

std::unique_ptr<Launcher> make_launcher(const LauncherConfig& config);

}  // namespace faultline::harness
