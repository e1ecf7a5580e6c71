// Tests for src/trainer/train_config.cpp: defaults, overrides, range/enum/cross-field errors,
// hashes.
#include "trainer/train_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../core/test_support.hpp"
#include "common/config.hpp"
#include "common/text.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::user_error;
using faultline::testing::user_errors;

TrainConfig parse(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  return parse_train_config(toml, "t.toml", overrides);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TrainConfig, EmptyTextGivesTheStructDefaults) {
  TrainConfig c = parse("");
  const TrainConfig d;
  EXPECT_EQ(c.source, "t.toml");
  EXPECT_EQ(c.model.vocab_size, d.model.vocab_size);
  EXPECT_EQ(c.model.n_embd, d.model.n_embd);
  EXPECT_EQ(c.model.tied_head, d.model.tied_head);
  EXPECT_DOUBLE_EQ(c.optim.lr, d.optim.lr);
  EXPECT_DOUBLE_EQ(c.optim.beta2, d.optim.beta2);
  EXPECT_EQ(c.schedule.kind, ScheduleKind::Cosine);
  EXPECT_EQ(c.train.steps, d.train.steps);
  EXPECT_EQ(c.train.batch_size, d.train.batch_size);
  EXPECT_EQ(c.dist.backend, DistBackend::Auto);
  EXPECT_EQ(c.probe.level, ProbeLevel::Cheap);
  EXPECT_EQ(c.fault.crash_signal, "SEGV");
  EXPECT_EQ(c.fault.crash_rank, -1);
  EXPECT_EQ(c.data.path, "");
  EXPECT_TRUE(contains(c.canonical, "optim.lr = 0.003\n")) << c.canonical;
  EXPECT_TRUE(contains(c.canonical, "schedule.kind = \"cosine\"\n"));
  EXPECT_EQ(c.hash.size(), 16u);
  EXPECT_EQ(c.trajectory_hash.size(), 16u);
}

TEST(TrainConfig, FileValuesAreReadAndOverridesBeatThem) {
  const std::string toml = "[optim]\nlr = 0.1\n[model]\nn_layer = 2\n[schedule]\nkind = \"wsd\"\n";
  TrainConfig file = parse(toml);
  EXPECT_DOUBLE_EQ(file.optim.lr, 0.1);
  EXPECT_EQ(file.model.n_layer, 2);
  EXPECT_EQ(file.schedule.kind, ScheduleKind::Wsd);
  TrainConfig set = parse(toml, {"optim.lr=0.2", "schedule.kind=constant", "probe.level=\"full\""});
  EXPECT_DOUBLE_EQ(set.optim.lr, 0.2);
  EXPECT_EQ(set.model.n_layer, 2);
  EXPECT_EQ(set.schedule.kind, ScheduleKind::Constant);
  EXPECT_EQ(set.probe.level, ProbeLevel::Full);
  EXPECT_NE(file.hash, set.hash);
}

TEST(TrainConfig, EveryEnumValueParsesAndPrints) {
  for (const char* kind : {"constant", "cosine", "wsd"})
    EXPECT_STREQ(to_string(parse("", {std::string("schedule.kind=") + kind}).schedule.kind), kind);
  for (const char* level : {"off", "cheap", "full"})
    EXPECT_STREQ(to_string(parse("", {std::string("probe.level=") + level}).probe.level), level);
  for (const char* backend : {"auto", "gloo", "nccl"})
    EXPECT_STREQ(to_string(parse("", {std::string("dist.backend=") + backend}).dist.backend),
                 backend);
}

// One out-of-range value per section; each is reported on its own key.
TEST(TrainConfig, RangeErrorsInEverySection) {
  const std::vector<std::string> bad = {
      "model.vocab_size=1",      "model.init_std=-0.5",      "data.fraction=1.5",
      "data.synth_order=9",      "optim.beta1=1.5",          "optim.lr=-1",
      "schedule.min_lr_ratio=2", "schedule.warmup_steps=-1", "train.steps=0",
      "train.threads=0",         "dist.timeout_s=0",         "probe.fingerprint_every=-1",
      "fault.poison_sample=-2",  "fault.leak_mb_per_step=-1"};
  for (const auto& assignment : bad) {
    SCOPED_TRACE(assignment);
    ErrorItem error = user_error([&] { parse("", {assignment}); });
    std::string key = assignment.substr(0, assignment.find('='));
    EXPECT_TRUE(contains(error.what, "out of range")) << error.what;
    EXPECT_EQ(error.where, key + " at --set " + key);
    EXPECT_TRUE(contains(error.hint, "expected")) << error.hint;
  }
}

// The synthetic language's own limits and its tokenizer, refused with the recipe (before any
// launch; the trainer refused them as it started), each named by its key.
TEST(TrainConfig, TheSyntheticLanguagesLimitsAreTheRecipesToo) {
  std::vector<ErrorItem> errors = user_errors([] {
    parse("", {"data.synth_shards=2000", "data.synth_branching=300", "data.tokenizer=byte"});
  });
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].where, "data.synth_shards at --set data.synth_shards");
  EXPECT_EQ(errors[0].hint, "expected an integer in [1, 1000]");
  EXPECT_EQ(errors[1].where, "data.synth_branching at --set data.synth_branching");
  EXPECT_EQ(errors[2].where, "data.tokenizer at --set data.tokenizer");
  ErrorItem wider = user_error([] {
    parse("", {"model.vocab_size=64", "data.synth_branching=100"});
  });
  EXPECT_EQ(wider.what,
            "data.synth_branching 100 is more than model.vocab_size 64: a context "
            "cannot have more candidates than there are tokens");
}

TEST(TrainConfig, ZeroDataFractionIsRefused) {
  ErrorItem error = user_error([] { parse("[data]\nfraction = 0.0\n"); });
  EXPECT_EQ(error.what, "data.fraction must be above 0");
  EXPECT_EQ(error.where, "data.fraction at t.toml:2");
}

TEST(TrainConfig, ReplaySamplesAreAListOfIndicesWithTheirStep) {
  auto config = parse("", {"probe.replay_step=4", "probe.replay_samples= 3, 17 ,42"});
  EXPECT_EQ(config.probe.replay_step, 4);
  EXPECT_EQ(config.probe.replay_samples, (std::vector<uint64_t>{3, 17, 42}));
  EXPECT_TRUE(parse("").probe.replay_samples.empty());

  ErrorItem bad = user_error([] {
    parse("", {"probe.replay_step=4", "probe.replay_samples=3,x"});
  });
  EXPECT_EQ(bad.what, "invalid sample index \"x\"");
  EXPECT_EQ(bad.where, "probe.replay_samples at --set probe.replay_samples");
  ErrorItem alone = user_error([] { parse("", {"probe.replay_samples=3"}); });
  EXPECT_EQ(alone.where, "probe.replay_samples at --set probe.replay_samples");
  EXPECT_NE(alone.hint.find("set both"), std::string::npos) << alone.hint;
}

TEST(TrainConfig, EnumTyposSuggestTheClosestChoice) {
  struct Case {
    std::string assignment, suggestion;
  };
  for (const Case& c :
       {Case{"schedule.kind=cosin", "cosine"}, Case{"probe.level=ful", "full"},
        Case{"dist.backend=glo", "gloo"}, Case{"train.cpu_kernels=fuse", "fused"}}) {
    SCOPED_TRACE(c.assignment);
    ErrorItem error = user_error([&] { parse("", {c.assignment}); });
    EXPECT_TRUE(contains(error.what, "invalid value")) << error.what;
    EXPECT_TRUE(contains(error.hint, "did you mean '" + c.suggestion + "'?")) << error.hint;
    EXPECT_TRUE(contains(error.hint, "valid: ")) << error.hint;
  }
}

TEST(TrainConfig, HeadsMustDivideTheWidth) {
  ErrorItem error = user_error([] { parse("[model]\nn_embd = 30\nn_head = 4\n"); });
  EXPECT_EQ(error.what, "n_embd 30 is not divisible by n_head 4");
  EXPECT_EQ(error.where, "model.n_embd at t.toml:2");
  EXPECT_NO_THROW(parse("[model]\nn_embd = 32\nn_head = 4\n"));
}

TEST(TrainConfig, GradAccumMustDivideTheBatch) {
  ErrorItem error = user_error([] { parse("", {"train.batch_size=10", "train.grad_accum=3"}); });
  EXPECT_EQ(error.what, "batch_size 10 is not divisible by grad_accum 3");
  EXPECT_TRUE(contains(error.where, "train.batch_size")) << error.where;
  EXPECT_NO_THROW(parse("", {"train.batch_size=12", "train.grad_accum=3"}));
}

// A fault planted after the last step never fires: the run passes, and a fault-injection test
// expecting a failure is green for nothing. Every such key is named at once.
TEST(TrainConfig, AFaultStepAfterTheRunsLastStepIsRefused) {
  std::vector<ErrorItem> errors = user_errors([] {
    parse("", {"train.steps=20", "fault.nan_step=300", "fault.nan_layer=wte", "fault.crash_rank=0",
               "fault.crash_step=21"});
  });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].what,
            "step 300 is after the run's last step 20 (train.steps): the fault would never fire");
  EXPECT_EQ(errors[0].where, "fault.nan_step at --set fault.nan_step");
  EXPECT_EQ(errors[0].hint, "give a step from 1 to 20, or train longer");
  EXPECT_EQ(errors[1].where, "fault.crash_step at --set fault.crash_step");
  EXPECT_NO_THROW(parse("", {"train.steps=20", "fault.crash_rank=0", "fault.crash_step=20"}));
}

TEST(TrainConfig, FaultKeysNeedTheirPartners) {
  struct Case {
    std::string assignment, key, partner, fix;
  };
  const std::vector<Case> cases = {
      {"fault.nan_step=5", "fault.nan_step", "fault.nan_layer", "fault.nan_layer=\"wte\""},
      {"fault.nan_layer=wte", "fault.nan_layer", "fault.nan_step", "fault.nan_step=5"},
      {"fault.crash_rank=0", "fault.crash_rank", "fault.crash_step", "fault.crash_step=3"},
      {"fault.hang_rank=1", "fault.hang_rank", "fault.hang_step", "fault.hang_step=3"},
      {"fault.slow_rank=0", "fault.slow_rank", "fault.slow_ms", "fault.slow_ms=50"},
      {"fault.corrupt_grad_rank=0", "fault.corrupt_grad_rank", "fault.corrupt_grad_step",
       "fault.corrupt_grad_step=2"},
      {"fault.crash_step=3", "fault.crash_step", "fault.crash_rank", "fault.crash_rank=0"},
      {"fault.hang_step=3", "fault.hang_step", "fault.hang_rank", "fault.hang_rank=0"},
      {"fault.slow_ms=50", "fault.slow_ms", "fault.slow_rank", "fault.slow_rank=0"},
      {"fault.corrupt_grad_step=2", "fault.corrupt_grad_step",
       "fault.corrupt_grad_rank (or fault.corrupt_grad_host)", "fault.corrupt_grad_rank=0"},
      {"fault.corrupt_grad_host=n1", "fault.corrupt_grad_host", "fault.corrupt_grad_step",
       "fault.corrupt_grad_step=2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.assignment);
    ErrorItem error = user_error([&] { parse("", {c.assignment}); });
    EXPECT_EQ(error.what, c.key + " needs " + c.partner);
    EXPECT_EQ(error.where, c.key + " at --set " + c.key);
    EXPECT_EQ(error.hint, "set " + c.partner + " too");
    EXPECT_NO_THROW(parse("", {c.assignment, c.fix}));
  }
}

TEST(TrainConfig, CrashSignalIsSegvAbrtOrAnExitCode) {
  for (const char* good : {"SEGV", "ABRT", "0", "7", "255"})
    EXPECT_EQ(parse("", {std::string("fault.crash_signal=") + good}).fault.crash_signal, good);
  for (const char* bad : {"KILL", "segv", "256", "1000", "-1", "7a", "\"\""}) {
    SCOPED_TRACE(bad);
    ErrorItem error = user_error([&] { parse("", {std::string("fault.crash_signal=") + bad}); });
    EXPECT_TRUE(contains(error.what, "invalid value")) << error.what;
    EXPECT_TRUE(contains(error.where, "fault.crash_signal")) << error.where;
    EXPECT_TRUE(contains(error.hint, "SEGV, ABRT")) << error.hint;
  }
}

TEST(TrainConfig, AllProblemsComeInOneUserError) {
  std::vector<ErrorItem> errors = user_errors([] {
    parse("[optim]\nlrr = 0.1\n[model]\nn_embd = 30\n",
          {"model.vocab_size=1", "train.steps=0", "schedule.kind=cosin", "fault.crash_rank=0",
           "fault.crash_signal=KILL", "train.batch_size=10", "train.grad_accum=4"});
  });
  ASSERT_EQ(errors.size(), 8u);
  std::set<std::string> wheres;
  for (const auto& e : errors) wheres.insert(e.where.substr(0, e.where.find(' ')));
  for (const char* key :
       {"t.toml:2", "model.vocab_size", "model.n_embd", "train.steps", "schedule.kind",
        "fault.crash_rank", "fault.crash_signal", "train.batch_size"})
    EXPECT_EQ(wheres.count(key), 1u) << key;
  EXPECT_EQ(errors.front().what, "unknown key 'optim.lrr'");  // unknown keys come first
  EXPECT_EQ(errors.front().hint, "did you mean 'optim.lr'?");
}

TEST(TrainConfig, CanonicalIsSortedTomlThatReadsBackToItself) {
  TrainConfig c = parse("[train]\nsteps = 7\n", {"optim.lr=0.01"});
  std::vector<std::string> lines = split(c.canonical, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end()));
  EXPECT_GT(lines.size(), 50u);
  TrainConfig again = parse(c.canonical);
  EXPECT_EQ(again.canonical, c.canonical);
  EXPECT_EQ(again.hash, c.hash);
  EXPECT_EQ(again.trajectory_hash, c.trajectory_hash);
}

TEST(TrainConfig, HashIsStableAndIgnoresHowAValueWasGiven) {
  TrainConfig a = parse("[optim]\nlr = 0.01\n");
  TrainConfig b = parse("[optim]\nlr = 0.01\n");
  TrainConfig c = parse("", {"optim.lr=0.01"});
  TrainConfig d = parse("[optim]\nlr = 0.003\n");  // the default, written out
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.hash, c.hash);
  EXPECT_EQ(d.hash, parse("").hash);
}

bool trajectory_neutral(const std::string& key) {
  return starts_with(key, "probe.") || starts_with(key, "fault.") || key == "train.stop_after" ||
         key == "train.log_every" || key == "train.checkpoint_every" || key == "dist.ranks" ||
         key == "dist.timeout_s" ||    // how it is launched, not what it computes
         key == "train.grad_accum" ||  // how a step's global batch is split
         key == "train.device" ||      // a checkpoint moves between devices, as between BLASes
         key == "train.cpu_kernels";   // ... and between kernels
}

// A valid change of one key, with the partner keys it needs.
std::vector<std::string> change_of(const std::string& key, const std::string& literal) {
  static const std::map<std::string, std::vector<std::string>> special = {
      {"model.n_head", {"model.n_head=8"}},
      {"model.n_embd", {"model.n_embd=256"}},
      {"schedule.kind", {"schedule.kind=wsd"}},
      {"probe.level", {"probe.level=full"}},
      {"dist.backend", {"dist.backend=gloo"}},
      {"train.device", {"train.device=cuda"}},
      {"train.precision", {"train.precision=bf16"}},
      {"train.cpu_kernels", {"train.cpu_kernels=aten"}},
      {"fault.crash_signal", {"fault.crash_signal=ABRT"}},
      {"fault.nan_step", {"fault.nan_step=3", "fault.nan_layer=wte"}},
      {"fault.nan_layer", {"fault.nan_layer=wte", "fault.nan_step=3"}},
      {"fault.crash_rank", {"fault.crash_rank=0", "fault.crash_step=3"}},
      {"fault.hang_rank", {"fault.hang_rank=0", "fault.hang_step=3"}},
      {"fault.slow_rank", {"fault.slow_rank=0", "fault.slow_ms=3"}},
      {"fault.corrupt_grad_rank", {"fault.corrupt_grad_rank=0", "fault.corrupt_grad_step=3"}},
      {"fault.crash_step", {"fault.crash_step=3", "fault.crash_rank=0"}},
      {"fault.hang_step", {"fault.hang_step=3", "fault.hang_rank=0"}},
      {"fault.slow_ms", {"fault.slow_ms=3", "fault.slow_rank=0"}},
      {"fault.corrupt_grad_step", {"fault.corrupt_grad_step=3", "fault.corrupt_grad_rank=0"}},
      {"fault.corrupt_grad_host", {"fault.corrupt_grad_host=n1", "fault.corrupt_grad_step=3"}},
      {"probe.replay_ranks", {"probe.replay_ranks=all"}},
      {"probe.replay_step", {"probe.replay_step=3", "probe.replay_samples=1"}},
      {"data.path", {std::string("data.path=") + FAULTLINE_SOURCE_DIR}},  // must exist
      // Another tokenizer needs shards of it (the synthetic language is synth-ngram's).
      {"data.tokenizer", {"data.tokenizer=byte", std::string("data.path=") + FAULTLINE_SOURCE_DIR}},
      {"probe.replay_samples", {"probe.replay_samples=1", "probe.replay_step=3"}},
  };
  if (auto it = special.find(key); it != special.end()) return it->second;
  ConfigValue value = ConfigValue::parse_literal(literal, "canonical");
  switch (value.type) {
    case ConfigValue::Type::Bool:
      return {key + "=" + (value.boolean ? "false" : "true")};
    case ConfigValue::Type::Int:
      return {key + "=" + std::to_string(value.integer + 1)};
    case ConfigValue::Type::Float:
      value.real = value.real == 0 ? 1.0 : value.real * 0.5;
      return {key + "=" + value.toml()};
    case ConfigValue::Type::String:
      return {key + "=\"" + value.string + "x\""};
  }
  return {};
}

TEST(TrainConfig, EveryKeyChangesTheHashAndOnlyTrajectoryKeysTheTrajectoryHash) {
  const TrainConfig base = parse("");
  int keys = 0;
  for (const auto& line : split(base.canonical, '\n')) {
    if (line.empty()) continue;
    const std::string key = line.substr(0, line.find(" = "));
    SCOPED_TRACE(key);
    ++keys;
    TrainConfig changed;
    try {
      changed = parse("", change_of(key, line.substr(line.find(" = ") + 3)));
    } catch (const UserError& error) {
      ADD_FAILURE() << "no valid change known for " << key << ": " << error.what();
      continue;
    }
    EXPECT_NE(changed.hash, base.hash);
    if (trajectory_neutral(key))
      EXPECT_EQ(changed.trajectory_hash, base.trajectory_hash);
    else
      EXPECT_NE(changed.trajectory_hash, base.trajectory_hash);
  }
  EXPECT_GT(keys, 50);
}

TEST(TrainConfig, TrajectoryHashNamedCases) {
  const TrainConfig base = parse("");
  for (const char* neutral :
       {"probe.level=full", "fault.nan_step=4", "train.stop_after=5", "train.log_every=1",
        "train.checkpoint_every=5", "train.grad_accum=2"}) {
    std::vector<std::string> set = {neutral};
    if (std::string(neutral) == "fault.nan_step=4") set.push_back("fault.nan_layer=wte");
    TrainConfig c = parse("", set);
    EXPECT_EQ(c.trajectory_hash, base.trajectory_hash) << neutral;
    EXPECT_NE(c.hash, base.hash) << neutral;
  }
  TrainConfig lr = parse("", {"optim.lr=0.004"});
  EXPECT_NE(lr.trajectory_hash, base.trajectory_hash);
  EXPECT_NE(lr.hash, base.hash);
}

TEST(TrainConfig, RelativePathOverridesBecomeAbsoluteAndOthersStayAsGiven) {
  const auto cwd = std::filesystem::current_path();
  EXPECT_EQ(absolute_path_overrides(
                {"data.path=shards/a", "optim.lr=1", "data.path = \"/abs\"", "data.path="}),
            (std::vector<std::string>{"data.path=" + (cwd / "shards/a").string(), "optim.lr=1",
                                      "data.path = \"/abs\"", "data.path="}));
}

TEST(TrainConfig, OriginsNameTheFileLineOfEveryGivenKey) {
  TrainConfig c = parse("[train]\nsteps = 5\n", {"optim.lr=0.5"});
  EXPECT_EQ(c.where("train.steps"), "train.steps at t.toml:2");
  EXPECT_EQ(c.where("optim.lr"), "optim.lr at --set optim.lr");
  EXPECT_EQ(c.where("model.n_layer"), "model.n_layer");
}

TEST(TrainConfig, DeviceAndPrecisionDefaultToAutoAndFp32AndParse) {
  const TrainConfig d = parse("");
  EXPECT_EQ(d.train.device, DeviceKind::Auto);
  EXPECT_EQ(d.train.precision, Precision::Fp32);
  EXPECT_TRUE(contains(d.canonical, "train.device = \"auto\"\n")) << d.canonical;
  EXPECT_TRUE(contains(d.canonical, "train.precision = \"fp32\"\n"));
  const TrainConfig c = parse("[train]\ndevice = \"cuda\"\nprecision = \"bf16\"\n");
  EXPECT_EQ(c.train.device, DeviceKind::Cuda);
  EXPECT_EQ(c.train.precision, Precision::Bf16);
  EXPECT_STREQ(to_string(c.train.device), "cuda");
  EXPECT_STREQ(to_string(c.train.precision), "bf16");
  EXPECT_EQ(parse("", {"train.device=cpu"}).train.device, DeviceKind::Cpu);
}

TEST(TrainConfig, BadDeviceAndPrecisionAreReportedTogetherWithTheValidValues) {
  const auto errors =
      user_errors([] { parse("[train]\ndevice = \"gpu\"\nprecision = \"fp16\"\n"); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_TRUE(contains(errors[0].where, "train.device")) << errors[0].where;
  EXPECT_TRUE(contains(errors[0].hint, "valid: auto, cpu, cuda")) << errors[0].hint;
  EXPECT_TRUE(contains(errors[1].where, "train.precision")) << errors[1].where;
  EXPECT_TRUE(contains(errors[1].hint, "valid: fp32, bf16")) << errors[1].hint;
}

TEST(TrainConfig, PrecisionChangesTheTrajectoryAndDeviceDoesNot) {
  const TrainConfig base = parse("");
  EXPECT_NE(parse("", {"train.precision=bf16"}).trajectory_hash, base.trajectory_hash);
  EXPECT_EQ(parse("", {"train.device=cuda"}).trajectory_hash, base.trajectory_hash);
  EXPECT_NE(parse("", {"train.device=cuda"}).hash, base.hash);
}

}  // namespace
}  // namespace faultline::trainer
