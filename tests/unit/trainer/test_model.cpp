// Tests for src/trainer/model.cpp: parameter count, module names, shapes, causality, seeded init,
// and the same loss and gradients from the fused CPU kernels as from LibTorch's ops.
#include "trainer/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace faultline::trainer {
namespace {

ModelConfig tiny(int64_t layers = 2, bool tied = true) {
  ModelConfig config;
  config.vocab_size = 32;
  config.block_size = 8;
  config.n_layer = layers;
  config.n_head = 2;
  config.n_embd = 16;
  config.tied_head = tied;
  return config;
}

Gpt make(const ModelConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  Gpt model(config);
  model->initialize(config.init_std);
  return model;
}

int64_t count(const Gpt& model) {
  int64_t total = 0;
  for (const auto& param : model->parameters()) total += param.numel();
  return total;
}

// V·C + T·C embeddings; per block two LayerNorms (2·2C), qkv (3C² + 3C), proj (C² + C),
// fc (4C² + 4C) and proj (4C² + C); the final LayerNorm (2C); an untied head V·C, no bias.
int64_t expected_count(const ModelConfig& c) {
  const int64_t C = c.n_embd;
  const int64_t block =
      4 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C);
  return c.vocab_size * C + c.block_size * C + c.n_layer * block + 2 * C +
         (c.tied_head ? 0 : c.vocab_size * C);
}

TEST(Gpt, ParameterCountMatchesTheFormula) {
  EXPECT_EQ(count(make(tiny(2, true), 1)), expected_count(tiny(2, true)));
  EXPECT_EQ(expected_count(tiny(2, true)), 7232);
  EXPECT_EQ(count(make(tiny(2, false), 1)), 7232 + 32 * 16);
  EXPECT_EQ(count(make(tiny(1, true), 1)), expected_count(tiny(1, true)));
}

TEST(Gpt, TiedHeadHasNoParameterOfItsOwn) {
  Gpt tied = make(tiny(1, true), 1);
  EXPECT_TRUE(tied->head.is_empty());
  for (const auto& item : tied->named_parameters()) EXPECT_NE(item.key().rfind("head", 0), 0u);
  Gpt untied = make(tiny(1, false), 1);
  ASSERT_FALSE(untied->head.is_empty());
  EXPECT_EQ(untied->named_parameters().find("head.weight")->sizes(),
            (std::vector<int64_t>{32, 16}));
}

TEST(Gpt, TiedHeadUsesTheEmbeddingMatrix) {
  Gpt model = make(tiny(1, true), 2);
  auto idx = torch::randint(0, 32, {1, 8}, torch::kLong);
  auto before = model->forward(idx, nullptr);
  {
    torch::NoGradGuard no_grad;
    model->wte->weight[31].zero_();  // token 31's row: its logit now is 0 everywhere
  }
  auto after = model->forward(idx, nullptr);
  if ((idx == 31).any().item<bool>()) GTEST_SKIP() << "token 31 is in the input";
  EXPECT_TRUE(torch::all(after.select(2, 31) == 0).item<bool>());
  EXPECT_TRUE(torch::allclose(before.narrow(2, 0, 31), after.narrow(2, 0, 31), 0, 1e-6));
}

TEST(Gpt, ModuleNamesInForwardOrder) {
  Gpt model = make(tiny(2), 1);
  const std::vector<std::string> expected = {
      "wte",          "wpe",      "blocks.0.ln_1", "blocks.0.attn", "blocks.0.ln_2",
      "blocks.0.mlp", "blocks.0", "blocks.1.ln_1", "blocks.1.attn", "blocks.1.ln_2",
      "blocks.1.mlp", "blocks.1", "ln_f",          "head"};
  EXPECT_EQ(model->module_names(), expected);
}

struct Recorder : ForwardObserver {
  torch::Tensor on_output(const std::string& module, torch::Tensor output) override {
    seen.push_back(module);
    return output;
  }
  std::vector<std::string> seen;
};

TEST(Gpt, ObserverSeesEveryModuleName) {
  Gpt model = make(tiny(2), 1);
  Recorder recorder;
  model->forward(torch::zeros({1, 4}, torch::kLong), &recorder);
  std::vector<std::string> sorted_seen = recorder.seen, sorted_names = model->module_names();
  std::sort(sorted_seen.begin(), sorted_seen.end());
  std::sort(sorted_names.begin(), sorted_names.end());
  EXPECT_EQ(sorted_seen, sorted_names);
  // Everything after the embeddings comes in the documented order.
  const std::vector<std::string> names = model->module_names();
  EXPECT_EQ(std::vector<std::string>(recorder.seen.begin() + 2, recorder.seen.end()),
            std::vector<std::string>(names.begin() + 2, names.end()));
}

TEST(Gpt, ObserverSeesTheEmbeddingsInForwardOrder) {
  Gpt model = make(tiny(1), 1);
  Recorder recorder;
  model->forward(torch::zeros({1, 4}, torch::kLong), &recorder);
  ASSERT_GE(recorder.seen.size(), 2u);
  EXPECT_EQ(recorder.seen[0], "wte");
  EXPECT_EQ(recorder.seen[1], "wpe");
}

TEST(Gpt, ObserverCanReplaceAnOutput) {
  struct Poison : ForwardObserver {
    torch::Tensor on_output(const std::string& module, torch::Tensor output) override {
      return module == "blocks.0.mlp" ? output * std::nanf("") : output;
    }
  } poison;
  Gpt model = make(tiny(1), 1);
  auto logits = model->forward(torch::zeros({1, 4}, torch::kLong), &poison);
  EXPECT_TRUE(torch::isnan(logits).all().item<bool>());
}

TEST(Gpt, ForwardShape) {
  Gpt model = make(tiny(2), 1);
  auto full = model->forward(torch::randint(0, 32, {3, 8}, torch::kLong), nullptr);
  EXPECT_EQ(full.sizes(), (std::vector<int64_t>{3, 8, 32}));
  auto shorter = model->forward(torch::randint(0, 32, {2, 5}, torch::kLong), nullptr);
  EXPECT_EQ(shorter.sizes(), (std::vector<int64_t>{2, 5, 32}));
  EXPECT_TRUE(torch::isfinite(full).all().item<bool>());
}

TEST(Gpt, IsCausal) {
  Gpt model = make(tiny(2), 4);
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, 32, {2, 8}, torch::kLong);
  auto changed = idx.clone();
  changed.select(1, 5).add_(1).remainder_(32);
  auto a = model->forward(idx, nullptr), b = model->forward(changed, nullptr);
  EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 5), b.narrow(1, 0, 5), 0, 1e-6));
  for (int64_t t = 5; t < 8; ++t)
    EXPECT_FALSE(torch::allclose(a.select(1, t), b.select(1, t))) << "position " << t;
}

TEST(Gpt, SameSeedSameInitDifferentSeedDifferentInit) {
  auto a = make(tiny(2), 11), b = make(tiny(2), 11), c = make(tiny(2), 12);
  auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_different = false;
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
    any_different = any_different || !torch::equal(item.value(), pc[item.key()]);
  }
  EXPECT_TRUE(any_different);
}

TEST(Gpt, InitializeFollowsGpt2) {
  ModelConfig config = tiny(2);
  config.init_std = 0.5;  // large, so the sample standard deviations are informative
  Gpt model = make(config, 5);
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    SCOPED_TRACE(name);
    const auto& p = item.value();
    if (name.find("ln_") != std::string::npos && name.find("weight") != std::string::npos)
      EXPECT_TRUE(torch::all(p == 1).item<bool>());
    else if (name.find("bias") != std::string::npos)
      EXPECT_TRUE(torch::all(p == 0).item<bool>());
    else if (name.find(".proj.weight") != std::string::npos)
      EXPECT_NEAR(p.std().item<double>(), 0.5 / std::sqrt(4.0), 0.05);
    else
      EXPECT_NEAR(p.std().item<double>(), 0.5, 0.1);
  }
}

// train.cpu_kernels changes how the step computes, not what: from the same weights and batch,
// both give the loss and every gradient to float32 rounding.
TEST(Gpt, FusedKernelsGiveTheLossAndGradientsOfLibTorchsOps) {
  ModelConfig config = tiny(2);
  config.block_size = 40;  // two attention row blocks, the second partial
  auto idx = torch::randint(config.vocab_size, {3, config.block_size + 1});
  auto run = [&](CpuKernels kernels) {
    torch::manual_seed(21);
    Gpt model(config, kernels);
    model->initialize(config.init_std);
    auto input = idx.narrow(1, 0, config.block_size), target = idx.narrow(1, 1, config.block_size);
    auto loss = torch::cross_entropy_loss(
        model->forward(input, nullptr).reshape({-1, config.vocab_size}), target.reshape({-1}));
    loss.backward();
    std::vector<torch::Tensor> grads;
    for (const auto& param : model->parameters()) grads.push_back(param.grad());
    return std::make_pair(loss.item<double>(), grads);
  };
  auto [fused_loss, fused_grads] = run(CpuKernels::Fused);
  auto [aten_loss, aten_grads] = run(CpuKernels::Aten);
  EXPECT_NEAR(fused_loss, aten_loss, 1e-5);
  ASSERT_EQ(fused_grads.size(), aten_grads.size());
  for (size_t i = 0; i < fused_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(fused_grads[i], aten_grads[i], 1e-3, 1e-5)) << "parameter " << i;
}

}  // namespace
}  // namespace faultline::trainer
