// Tests for harness/contract/command_recipe.cpp and the command side of the trainer contract:
// placeholders, what a trainer provides, asks made as FAULTLINE_* variables and argv fragments,
// and every recipe error reported at once with its key.
#include <gtest/gtest.h>

#include <limits>

#include "harness/contract/command_recipe.hpp"
#include "harness/contract/config_file.hpp"
#include "harness/contract/recipe.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "test_support.hpp"

namespace faultline::harness::contract {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::user_errors;
using faultline::testing::write_file;

constexpr const char* kRecipe = R"([trainer]
command = ["/bin/sh", "train.sh", "--lr", "{optim.lr}", "--steps={train.steps}", "--out", "{out}"]
resume = ["--resume", "{checkpoint}"]
stop_after = ["--stop-after", "{step}"]
provides = ["fingerprints"]

[optim]
lr = 3e-4
name = "adamw"
[train]
steps = 200
)";

TEST(CommandRecipe, PlaceholdersAreFilledFromTheResolvedConfigAndTheTrial) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), kRecipe);
  const auto contract = TrainerContract::of(dir.file("r.toml"));
  ASSERT_TRUE(contract.is_command());
  EXPECT_TRUE(contract.can(Capability::Resume));  // implied by the fragments
  EXPECT_TRUE(contract.can(Capability::Prefix));
  EXPECT_TRUE(contract.can(Capability::Fingerprints));
  EXPECT_FALSE(contract.can(Capability::FullProbes));

  TrialSpec spec;
  spec.config_path = dir.file("r.toml");
  spec.overrides = {"optim.lr=1"};
  spec = contract.prefix(contract.resume(spec, Checkpoint{40, "/c/40.pt"}), 60);
  spec = contract.full_probes_from(contract.accumulate(spec, 1, 4), 41);
  const auto rank = contract.rank_command(spec, "unused", "/runs/7");
  EXPECT_EQ(rank.argv,
            (std::vector<std::string>{"/bin/sh", "train.sh", "--lr", "1.0", "--steps=200", "--out",
                                      "/runs/7", "--resume", "/c/40.pt", "--stop-after", "60"}));
  EXPECT_EQ(rank.env.at("FAULTLINE_RESUME"), "/c/40.pt");
  EXPECT_EQ(rank.env.at("FAULTLINE_STOP_AFTER"), "60");
  EXPECT_EQ(rank.env.at("FAULTLINE_ACCUMULATE"), "4");
  // Full probes are not declared, so they are not asked (nor shown in a repro line).
  EXPECT_EQ(rank.env.count("FAULTLINE_PROBE"), 0u);
  EXPECT_EQ(rank.env.count("FAULTLINE_PROBE_FROM"), 0u);
  TrialSpec probed = contract.full_probes_from(TrialSpec{spec}, 41);
  EXPECT_EQ(probed.overrides, spec.overrides);
  EXPECT_EQ(rank.env.at("FAULTLINE_OUT"), "/runs/7");
  EXPECT_EQ(rank.cwd, dir.path());
  EXPECT_EQ(contract.grad_accum(spec), 4);
  EXPECT_EQ(contract.steps(spec), 60);
  EXPECT_TRUE(contract.watches_only("faultline.probe"));
  EXPECT_FALSE(contract.watches_only("optim.lr"));
}

TEST(CommandRecipe, TheResolvedConfigKeepsTheTrainersKeysAndRunsWhereItRan) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), kRecipe);
  const auto recipe = load_recipe(dir.file("r.toml"), {"optim.name=sgd", "train.steps=50"});
  EXPECT_EQ(recipe.kind, TrainerKind::Command);
  EXPECT_EQ(recipe.steps, 50);
  EXPECT_EQ(recipe.keys.at("optim.name"), "\"sgd\"");
  EXPECT_EQ(recipe.keys.at("trainer.workdir"), "\"" + dir.path() + "\"");
  // Written back elsewhere (a stored run's config), it names the same trainer in the same place.
  write_file(dir.file("back.toml"), recipe.canonical);
  const auto back = load_recipe(dir.file("back.toml"), {});
  EXPECT_EQ(back.hash, recipe.hash);
  EXPECT_EQ(back.command->trainer.command, recipe.command->trainer.command);
}

TEST(CommandRecipe, WithoutAPrefixATrialIsAShorterRun) {
  ScratchDir dir;
  const auto torchrun = load_command_trainer(ConfigSource::from_string(
      "[trainer]\ncommand = [\"torchrun\", \"train.py\"]\nranks_from = \"torchrun\"\n", "r.toml"));
  EXPECT_EQ(torchrun.ranks_from, RanksFrom::Launcher);
  EXPECT_EQ(torchrun.records, RecordSource::Protocol);
}

TEST(CommandRecipe, EveryProblemIsReportedAtOnceWithItsKey) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), R"([trainer]
command = ["no-such-trainer-xyz", "--lr", "{optim.lrr}"]
resume = ["--resume"]
records = "log"
log_regex = 'loss (?P<loss>\S+)'
provides = ["full_probes", "fingerprint"]
[optim]
lr = 3e-4
[train]
steps = 20
)");
  const auto items = user_errors([&] {
    load_recipe(dir.file("r.toml"), {"optim.lt=1", "train.steps=1.5", "faultline.probes=full"});
  });
  std::vector<std::string> whats;
  for (const auto& item : items) whats.push_back(item.what);
  const std::vector<std::string> expected = {
      "unknown key 'faultline.probes'",
      "unknown key 'optim.lt'",
      "expected integer like the recipe's 20, got float 1.5",
      "unknown capability 'fingerprint'",
      "records = \"log\" cannot carry 'full_probes'",
      "the regular expression has no 'step' group",
      "placeholder {optim.lrr} names no key of the recipe",
      "trainer.resume does not use {checkpoint}",
      "command not found: no-such-trainer-xyz",
  };
  EXPECT_EQ(whats, expected);
  EXPECT_NE(items[1].hint.find("did you mean 'optim.lr'?"), std::string::npos);
  EXPECT_NE(items[3].hint.find("did you mean 'fingerprints'?"), std::string::npos);
  EXPECT_NE(items[6].where.find("trainer.command.2 at "), std::string::npos);  // the element
  EXPECT_NE(items[8].hint.find("/usr/bin/python3"), std::string::npos);
}

TEST(CommandRecipe, RecordsAndRanksFromTakeOnlyTheirNames) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), R"([trainer]
command = ["/bin/sh", "train.sh"]
records = "logs"
ranks_from = "slurm"
[train]
steps = 20
)");
  const auto items = user_errors([&] { load_recipe(dir.file("r.toml"), {}); });
  std::string all;
  for (const auto& item : items) all += item.what + " | " + item.where + " | " + item.hint + "\n";
  ASSERT_EQ(items.size(), 2u) << all;
  EXPECT_EQ(items[0].what, "invalid value \"logs\"");
  EXPECT_NE(items[0].where.find("trainer.records at "), std::string::npos) << items[0].where;
  EXPECT_EQ(items[0].hint, "did you mean 'log'? (valid: protocol, log)");
  EXPECT_EQ(items[1].what, "invalid value \"slurm\"");
  EXPECT_NE(items[1].hint.find("valid: faultline, torchrun"), std::string::npos) << items[1].hint;

  write_file(dir.file("r.toml"),
             "[trainer]\ncommand = [\"/bin/sh\", \"train.sh\"]\n"
             "ranks_from = \"torchrun\"\n[train]\nsteps = 20\n");
  const auto contract = TrainerContract::of(dir.file("r.toml"));
  EXPECT_EQ(contract.records(), RecordSource::Protocol);
}

// A launcher that starts its own ranks is told each node's place in its command; a trainer
// started once per rank is refused them (it gets RANK and the rest instead).
TEST(CommandRecipe, NodePlaceholdersAreForALauncherThatStartsItsOwnRanks) {
  ScratchDir dir;
  const std::string command =
      "command = [\"/bin/sh\", \"--nnodes={nnodes}\", \"{nproc_per_node}\", \"{node_rank}\", "
      "\"{master_addr}:{master_port}\", \"{ranks}\"]\n";
  write_file(dir.file("r.toml"), "[trainer]\n" + command + "[train]\nsteps = 20\n");
  const auto items = user_errors([&] { load_recipe(dir.file("r.toml"), {}); });
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].what,
            "placeholder {nnodes} is filled only for a trainer that starts its own ranks");
  EXPECT_NE(items[0].where.find("trainer.command.1"), std::string::npos) << items[0].where;
  EXPECT_NE(items[0].hint.find("ranks_from = \"torchrun\""), std::string::npos) << items[0].hint;
  EXPECT_EQ(items[3].what,
            "placeholder {master_addr} is filled only for a trainer that starts its own ranks");

  write_file(dir.file("r.toml"),
             "[trainer]\nranks_from = \"torchrun\"\n" + command + "[train]\nsteps = 20\n");
  TrialSpec spec;
  spec.config_path = dir.file("r.toml");
  spec.ranks = 4;
  const auto contract = TrainerContract::of(spec.config_path);
  ASSERT_TRUE(contract.starts_own_ranks());
  // The trial's values are filled; the node's are left for the launch, which knows them.
  const auto rank = contract.rank_command(spec, "", "/runs/3", 29400);
  EXPECT_TRUE(rank.one_process);
  EXPECT_EQ(rank.argv, (std::vector<std::string>{"/bin/sh", "--nnodes={nnodes}", "{nproc_per_node}",
                                                 "{node_rank}", "{master_addr}:29400", "4"}));
  // A pasted repro runs every rank on one node, here.
  const auto pasted = contract.argv(spec, "");
  EXPECT_EQ(std::vector<std::string>(pasted.end() - 6, pasted.end()),
            (std::vector<std::string>{"/bin/sh", "--nnodes=1", "4", "0", "127.0.0.1:29500", "4"}));
}

TEST(CommandRecipe, TheStepsKeyMustNameAnIntegerOfTheRecipe) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), "[trainer]\ncommand = [\"/bin/sh\"]\n[loop]\niters = 5\n");
  const auto items = user_errors([&] { load_recipe(dir.file("r.toml"), {}); });
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].what, "trainer.steps_key names 'train.steps', which the recipe does not set");
  write_file(dir.file("r.toml"),
             "[trainer]\ncommand = [\"/bin/sh\"]\nsteps_key = \"loop.iters\"\n[loop]\niters = 5\n");
  EXPECT_EQ(load_recipe(dir.file("r.toml"), {}).steps, 5);
  // Set, but not to a number of steps: the value is named where it was given, before a launch.
  write_file(dir.file("q.toml"),
             "[trainer]\ncommand = [\"/bin/sh\"]\nsteps_key = \"loop.iters\"\n[loop]\niters = "
             "\"5\"\n");
  const auto quoted = user_errors([&] { load_recipe(dir.file("q.toml"), {}); });
  ASSERT_EQ(quoted.size(), 1u);
  EXPECT_EQ(quoted[0].what, "expected an integer, got string \"5\"");
  EXPECT_EQ(quoted[0].where, "loop.iters at " + dir.file("q.toml") + ":5");
  EXPECT_EQ(quoted[0].hint, "trainer.steps_key names it: write it without quotes");
  const auto negative = user_errors([&] { load_recipe(dir.file("r.toml"), {"loop.iters=-3"}); });
  ASSERT_EQ(negative.size(), 1u);
  EXPECT_EQ(negative[0].what, "value -3 is out of range");
  EXPECT_EQ(negative[0].hint, "trainer.steps_key names it: expected an integer >= 1");
}

}  // namespace
}  // namespace faultline::harness::contract

namespace faultline::harness::contract {
namespace {

TEST(CommandRecipe, AConfigFilesKeysAreTheRecipesAndEachTrialGetsACopyWithItsValues) {
  ScratchDir dir;
  write_file(
      dir.file("cfg.json"),
      R"({"optim": {"lr": 0.001, "betas": [0.9, 0.95]}, "train": {"steps": 40}, "name": "x"})");
  write_file(dir.file("cfg.toml"), "name = \"x\"\n[optim]\nlr = 0.001\n[train]\nsteps = 40\n");
  write_file(dir.file("cfg.yaml"),
             "# a trainer's own YAML\noptim:\n  lr: 0.001\n  betas: [0.9, 0.95]\ntrain:\n  "
             "steps: 40\nname: x\ntag: \"7\"\n");
  for (const std::string file : {"cfg.json", "cfg.toml", "cfg.yaml"}) {
    write_file(dir.file("r.toml"),
               "[trainer]\ncommand = [\"/bin/sh\", \"--config\", \"{config_file}\"]\n"
               "config_file = \"" +
                   file + "\"\n");
    TrialSpec spec;
    spec.config_path = dir.file("r.toml");
    spec.overrides = {"optim.lr=0.5", "name=y"};
    const auto recipe = load_recipe(spec.config_path, spec.overrides);
    EXPECT_EQ(recipe.steps, 40) << file;
    EXPECT_EQ(recipe.keys.at("optim.lr"), "0.5") << file;
    const auto rank = TrainerContract::of(spec.config_path).rank_command(spec, "", "/runs/3");
    ASSERT_EQ(rank.files.size(), 1u);
    EXPECT_EQ(rank.files[0].first, "/runs/3/" + file);
    EXPECT_EQ(rank.argv.back(), "/runs/3/" + file);
    // The copy is the file with the trial's values: read back, it says what the trial ran.
    write_file(dir.file("copy-" + file), rank.files[0].second);
    const auto copy = read_config_file(dir.file("copy-" + file));
    EXPECT_DOUBLE_EQ(copy.at("optim.lr").real, 0.5) << file;
    EXPECT_EQ(copy.at("name").string, "y") << file;
    if (file != "cfg.toml") {
      EXPECT_DOUBLE_EQ(copy.at("optim.betas.1").real, 0.95);
    }
  }
  // A quoted YAML scalar is a string; a --set of another key leaves it one.
  EXPECT_EQ(read_config_file(dir.file("cfg.yaml")).at("tag").type, ConfigValue::Type::String);
  const auto unsupported = user_errors([&] { read_config_file(dir.file("cfg.ini")); });
  ASSERT_EQ(unsupported.size(), 1u);
  EXPECT_EQ(unsupported[0].what, "unsupported config file format '.ini'");
}

TEST(CommandRecipe, AnIntegerPast64BitsInAConfigFileIsAFloatNotTheLargestInteger) {
  ScratchDir dir;
  write_file(dir.file("cfg.yaml"), "seed: 99999999999999999999\nsteps: -9223372036854775808\n");
  write_file(dir.file("cfg.json"), R"({"seed": 99999999999999999999})");
  for (const std::string file : {"cfg.yaml", "cfg.json"}) {
    const auto seed = read_config_file(dir.file(file)).at("seed");
    EXPECT_EQ(seed.type, ConfigValue::Type::Float) << file;
    EXPECT_DOUBLE_EQ(seed.real, 1e20) << file;
  }
  const auto lowest = read_config_file(dir.file("cfg.yaml")).at("steps");
  EXPECT_EQ(lowest.type, ConfigValue::Type::Int);
  EXPECT_EQ(lowest.integer, std::numeric_limits<long long>::min());
}

}  // namespace
}  // namespace faultline::harness::contract
