// End-to-end: the determinism contract of faultline-train on real runs — repeat, resume,
// prefix (stop_after), and an N-rank step replayed on one rank with gradient accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/metrics.hpp"

using namespace faultline::testing;

namespace {
double loss_of(const nlohmann::json& step) {
  return step.at("loss").get<double>();
}
}  // namespace

TEST(TrainDeterminism, SameConfigAndSeedGiveBitwiseIdenticalMetrics) {
  auto first = run_trainer({});
  auto second = run_trainer({});
  ASSERT_EQ(first.rank0().exit_code, 0) << first.rank0().output;
  ASSERT_EQ(second.rank0().exit_code, 0) << second.rank0().output;
  auto a = deterministic_steps(first.metrics[0]);
  ASSERT_EQ(a.size(), 40u);
  EXPECT_EQ(a, deterministic_steps(second.metrics[0]));
  auto fa = of_type(first.metrics[0], "fingerprint"),
       fb = of_type(second.metrics[0], "fingerprint");
  ASSERT_EQ(fa.size(), 16u);  // params and grads every 5 steps
  for (size_t i = 0; i < fa.size(); ++i) EXPECT_EQ(fa[i].at("hash"), fb[i].at("hash"));
}

TEST(TrainDeterminism, LossFalls) {
  auto run = run_trainer({});
  ASSERT_EQ(run.rank0().exit_code, 0) << run.rank0().output;
  auto steps = run.steps();
  EXPECT_LT(loss_of(steps.back()), loss_of(steps.front()) - 1.0);
}

TEST(TrainDeterminism, DifferentSeedGivesDifferentRun) {
  auto base = run_trainer({});
  auto other = run_trainer({.overrides = {"train.seed=8"}});
  EXPECT_NE(deterministic_steps(base.metrics[0]), deterministic_steps(other.metrics[0]));
}

// bf16 autocast on the CPU (train.device = "auto" finds no CUDA here, or is told "cpu"): its own
// repeatable trajectory, not fp32's, and the start event says which precision and device ran.
TEST(TrainDeterminism, Bf16IsRepeatableAndNotFp32) {
  const std::vector<std::string> bf16 = {"train.precision=bf16", "train.device=cpu"};
  auto first = run_trainer({.overrides = bf16});
  auto second = run_trainer({.overrides = bf16});
  auto fp32 = run_trainer({.overrides = {"train.device=cpu"}});
  ASSERT_EQ(first.rank0().exit_code, 0) << first.rank0().output;
  ASSERT_EQ(second.rank0().exit_code, 0) << second.rank0().output;
  EXPECT_EQ(deterministic_steps(first.metrics[0]), deterministic_steps(second.metrics[0]));
  EXPECT_NE(deterministic_steps(first.metrics[0]), deterministic_steps(fp32.metrics[0]));
  EXPECT_LT(loss_of(first.steps().back()), loss_of(first.steps().front()) - 1.0);
  const auto start = first.events().front();
  EXPECT_EQ(start.at("name"), "start");
  EXPECT_EQ(start.at("precision"), "bf16");
  EXPECT_EQ(start.at("determinism").at("device"), "cpu");
  EXPECT_EQ(start.at("determinism").at("nondeterministic").size(), 0u);
}

TEST(TrainDeterminism, ResumeContinuesBitwiseIdentically) {
  auto full = run_trainer({.overrides = {"train.checkpoint_every=10"}});
  ASSERT_EQ(full.rank0().exit_code, 0) << full.rank0().output;
  std::string checkpoint = full.out_dir + "/checkpoints/step-00000020.ckpt";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));

  auto resumed = run_trainer({.resume = checkpoint});
  ASSERT_EQ(resumed.rank0().exit_code, 0) << resumed.rank0().output;
  auto all = deterministic_steps(full.metrics[0]);
  auto tail = deterministic_steps(resumed.metrics[0]);
  ASSERT_EQ(tail.size(), 20u);
  EXPECT_EQ(std::vector<std::string>(all.begin() + 20, all.end()), tail);
  auto events = resumed.events();
  EXPECT_EQ(events.at(0).at("name"), "start");
  EXPECT_EQ(events.at(0).at("first_step"), 21);
  EXPECT_EQ(events.at(1).at("name"), "resume");
  EXPECT_EQ(events.at(1).at("step"), 20);
}

TEST(TrainDeterminism, StopAfterIsAPrefixOfTheFullRun) {
  auto full = run_trainer({});
  auto prefix = run_trainer({.overrides = {"train.stop_after=15"}});
  auto all = deterministic_steps(full.metrics[0]);
  auto head = deterministic_steps(prefix.metrics[0]);
  ASSERT_EQ(head.size(), 15u);
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.begin() + 15), head);
}

TEST(TrainDeterminism, MultiRankRunsAreRepeatable) {
  auto first = run_trainer({.overrides = {"train.steps=10"}, .ranks = 2});
  auto second = run_trainer({.overrides = {"train.steps=10"}, .ranks = 2});
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(first.ranks[rank].exit_code, 0) << first.ranks[rank].output;
    EXPECT_EQ(deterministic_steps(first.metrics[rank]), deterministic_steps(second.metrics[rank]));
  }
  // Every rank reports the same (allreduced) loss.
  EXPECT_EQ(deterministic_steps(first.metrics[0]), deterministic_steps(first.metrics[1]));
}

// The tolerance is the measured one (docs/trainer.md): the two runs add the same gradients in a
// different order, so they agree to float32 rounding at first and drift slowly.
TEST(TrainDeterminism, TwoRanksEqualOneRankWithGradAccumWithinTolerance) {
  auto two = run_trainer({.overrides = {"train.steps=20"}, .ranks = 2});
  auto one = run_trainer({.overrides = {"train.steps=20", "train.grad_accum=2"}});
  ASSERT_EQ(two.rank0().exit_code, 0) << two.rank0().output;
  ASSERT_EQ(one.rank0().exit_code, 0) << one.rank0().output;
  auto a = two.steps(), b = one.steps();
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(loss_of(a[i]) - loss_of(b[i])) / loss_of(b[i]));
  EXPECT_EQ(a[0].at("tokens").get<int64_t>() * 2, b[0].at("tokens").get<int64_t>());
  EXPECT_LT(worst, 1e-4) << "max relative loss difference over 20 steps";
  EXPECT_LT(std::abs(loss_of(a[0]) - loss_of(b[0])), 1e-6);
}
