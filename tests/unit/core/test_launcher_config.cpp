// Tests for harness/launch/launcher_config.cpp: [launcher] keys from the recipe and --set,
// --launcher over launcher.kind, every error at once; the trainer's binder accepts the section.
#include <gtest/gtest.h>

#include "harness/contract/recipe.hpp"
#include "harness/launch/launcher_config.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::user_errors;
using faultline::testing::write_file;

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

TEST(LauncherConfig, RecipeKeysAndSetOverridesBindTheSlurmOptions) {
  ScratchDir dir;
  write_file(dir.file("r.toml"),
             "[launcher]\nkind = \"slurm\"\nnodes = 2\npartition = \"debug\"\n"
             "srun_args = \"--mem=0  --cpu-bind=none\"\n[train]\nsteps = 5\n");
  const auto config = load_launcher_config(
      dir.file("r.toml"), {"launcher.tasks_per_node=4", "launcher.exclude=n3", "train.steps=9"});
  EXPECT_EQ(config.kind, LauncherKind::Slurm);
  EXPECT_EQ(config.slurm.nodes, 2);
  EXPECT_EQ(config.slurm.tasks_per_node, 4);
  EXPECT_EQ(config.slurm.partition, "debug");
  EXPECT_EQ(config.slurm.exclude, "n3");
  EXPECT_EQ(config.slurm.srun_args, (std::vector<std::string>{"--mem=0", "--cpu-bind=none"}));
  EXPECT_STREQ(make_launcher(config)->name(), "slurm");
}

TEST(LauncherConfig, TheFlagBeatsTheRecipeAndLocalIsTheDefault) {
  EXPECT_EQ(load_launcher_config(kMicro, {}).kind, LauncherKind::Local);
  EXPECT_EQ(load_launcher_config(kMicro, {}, "slurm").kind, LauncherKind::Slurm);
  EXPECT_EQ(load_launcher_config(kMicro, {"launcher.kind=slurm"}, "local").kind,
            LauncherKind::Local);
  EXPECT_EQ(load_launcher_config("", {}, "slurm").kind, LauncherKind::Slurm);
  EXPECT_STREQ(make_launcher(load_launcher_config(kMicro, {}))->name(), "local");
}

TEST(LauncherConfig, EveryBadKeyIsReportedAtOnce) {
  const auto items = user_errors([] {
    load_launcher_config(kMicro, {"launcher.kind=pbs", "launcher.nodez=2", "launcher.nodes=-1"},
                         "lsf");
  });
  ASSERT_EQ(items.size(), 4u);
  std::string all;
  for (const auto& item : items) all += item.what + " | " + item.where + " | " + item.hint + "\n";
  EXPECT_NE(all.find("unknown key 'launcher.nodez'"), std::string::npos) << all;
  EXPECT_NE(all.find("launcher.nodes"), std::string::npos) << all;
  EXPECT_NE(all.find("pbs"), std::string::npos) << all;
  EXPECT_NE(all.find("--launcher lsf is not a launcher"), std::string::npos) << all;
}

TEST(LauncherConfig, TheTrainerRecipeAcceptsTheSectionWithoutHashingIt) {
  const auto plain = contract::load_recipe(kMicro, {});
  const auto on_slurm = contract::load_recipe(kMicro, {"launcher.kind=slurm", "launcher.nodes=2"});
  EXPECT_EQ(plain.hash, on_slurm.hash);
  EXPECT_EQ(on_slurm.canonical.find("launcher."), std::string::npos);
}

}  // namespace
}  // namespace faultline::harness
