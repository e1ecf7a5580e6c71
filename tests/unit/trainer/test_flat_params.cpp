// Tests for src/trainer/flat_params.cpp: flat views, gradient slots, clipping and FlatAdamW.
#include "trainer/flat_params.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/model.hpp"

namespace faultline::trainer {
namespace {

// Vectors and matrices interleaved, so the flattening has to reorder them.
struct Mixed : torch::nn::Module {
  Mixed() {
    first_bias = register_parameter("first_bias", torch::tensor({1.0f, 2.0f, 3.0f}));
    w = register_parameter("w", torch::arange(6, torch::kFloat32).view({3, 2}) / 10);
    v = register_parameter("v", torch::tensor({-1.0f, 0.5f}));
    m = register_parameter("m", torch::tensor({{0.25f, -0.5f}, {0.75f, 1.0f}}));
  }
  torch::Tensor first_bias, w, v, m;
};

TEST(FlatParams, MatricesComeFirstAndDecayCoversExactlyThem) {
  Mixed module;
  FlatParams flat(module);
  ASSERT_EQ(flat.layout().size(), 4u);
  EXPECT_EQ(flat.layout()[0].name, "w");
  EXPECT_EQ(flat.layout()[1].name, "m");
  EXPECT_EQ(flat.layout()[2].name, "first_bias");
  EXPECT_EQ(flat.layout()[3].name, "v");
  EXPECT_EQ(flat.layout()[1].offset, 6);
  EXPECT_EQ(flat.layout()[3].offset, 13);
  EXPECT_EQ(flat.numel(), 15);
  EXPECT_EQ(flat.decayed_numel(), 10);
  EXPECT_EQ(flat.comm_buffer().numel(), 16);
}

TEST(FlatParams, ValuesAreCopiedAndNameAtFindsTheOwner) {
  Mixed module;
  FlatParams flat(module);
  EXPECT_TRUE(
      torch::equal(flat.values().narrow(0, 6, 4), torch::tensor({0.25f, -0.5f, 0.75f, 1.0f})));
  EXPECT_TRUE(torch::equal(flat.values().narrow(0, 10, 3), torch::tensor({1.0f, 2.0f, 3.0f})));
  EXPECT_EQ(flat.name_at(0), "w");
  EXPECT_EQ(flat.name_at(5), "w");
  EXPECT_EQ(flat.name_at(6), "m");
  EXPECT_EQ(flat.name_at(12), "first_bias");
  EXPECT_EQ(flat.name_at(14), "v");
  EXPECT_EQ(flat.name_at(15), "");
  EXPECT_EQ(flat.name_at(-1), "");
}

TEST(FlatParams, EveryParameterIsAViewIntoValues) {
  Mixed module;
  FlatParams flat(module);
  torch::NoGradGuard no_grad;
  flat.values().fill_(7.0f);
  for (const auto& param : module.parameters()) EXPECT_TRUE(torch::all(param == 7.0f).item<bool>());
  flat.values()[6] = -3.0f;
  EXPECT_FLOAT_EQ(module.m[0][0].item<float>(), -3.0f);
  module.v[1] = 9.0f;  // and the other way round
  EXPECT_FLOAT_EQ(flat.values()[14].item<float>(), 9.0f);
}

TEST(FlatParams, BackwardAccumulatesIntoGrads) {
  Mixed module;
  FlatParams flat(module);
  EXPECT_TRUE(torch::all(flat.grads() == 0).item<bool>());
  auto loss = [&] { return (module.w * 2).sum() + (module.v * module.v).sum(); };
  loss().backward();
  auto expected = torch::zeros({15});
  expected.narrow(0, 0, 6).fill_(2.0f);
  expected.narrow(0, 13, 2).copy_(2 * torch::tensor({-1.0f, 0.5f}));
  EXPECT_TRUE(torch::allclose(flat.grads(), expected)) << flat.grads();
  loss().backward();  // accumulates in place, still inside the flat buffer
  EXPECT_TRUE(torch::allclose(flat.grads(), 2 * expected)) << flat.grads();
  EXPECT_TRUE(torch::allclose(flat.comm_buffer().narrow(0, 0, 15), 2 * expected));
  EXPECT_TRUE(torch::allclose(module.w.grad(), torch::full({3, 2}, 4.0f)));
  flat.zero_grads();
  EXPECT_TRUE(torch::all(module.w.grad() == 0).item<bool>());
}

TEST(FlatParams, WholeModelGradsLandInTheFlatBuffer) {
  ModelConfig config;
  config.vocab_size = 32;
  config.block_size = 8;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 16;
  torch::manual_seed(3);
  Gpt model(config);
  model->initialize(0.02);
  FlatParams flat(*model);
  int64_t total = 0;
  for (const auto& param : model->parameters()) total += param.numel();
  EXPECT_EQ(flat.numel(), total);
  auto idx = torch::randint(0, 32, {2, 8}, torch::kLong);
  auto logits = model->forward(idx, nullptr);
  torch::nn::functional::cross_entropy(logits.view({-1, 32}), idx.view({-1})).backward();
  double sum_of_squares = 0;
  for (const auto& param : model->parameters())
    sum_of_squares += param.grad().pow(2).sum().item<double>();
  EXPECT_GT(sum_of_squares, 0);
  EXPECT_NEAR(flat.grads().norm().item<double>(), std::sqrt(sum_of_squares), 1e-5);
}

TEST(ClipGradNorm, ReturnsThePreClipNormAndScalesDown) {
  auto grads = torch::tensor({3.0f, 4.0f});
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 1.0), 5.0);
  EXPECT_NEAR(grads.norm().item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(grads[0].item<float>() / grads[1].item<float>(), 0.75, 1e-6);
}

TEST(ClipGradNorm, SplitHalvesGiveTheSameBitsAsTheWhole) {
  auto whole = torch::randn({1000}) * 3.0;
  auto split = whole.clone();
  const double norm = clip_grad_norm(whole, 1.0);
  const auto norm_tensor = grad_norm(split);
  EXPECT_EQ(norm_tensor.dim(), 0);
  EXPECT_EQ(norm_tensor.to(torch::kDouble).item<double>(), norm);
  clip_grads(split, norm, 1.0);
  EXPECT_TRUE(torch::equal(whole, split));
}

TEST(ClipGradNorm, LeavesSmallNormsAndDisabledClippingAlone) {
  auto grads = torch::tensor({3.0f, 4.0f});
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 10.0), 5.0);
  EXPECT_TRUE(torch::equal(grads, torch::tensor({3.0f, 4.0f})));
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 0.0), 5.0);
  EXPECT_TRUE(torch::equal(grads, torch::tensor({3.0f, 4.0f})));
}

TEST(ClipGradNorm, NonFiniteGradsGiveANonFiniteNormAndAreNotScaled) {
  auto grads = torch::tensor({3.0f, std::nanf(""), 1.0f});
  EXPECT_TRUE(std::isnan(clip_grad_norm(grads, 1.0)));
  EXPECT_FLOAT_EQ(grads[0].item<float>(), 3.0f);
  auto inf = torch::tensor({INFINITY, 1.0f});
  EXPECT_TRUE(std::isinf(clip_grad_norm(inf, 1.0)));
  EXPECT_FLOAT_EQ(inf[1].item<float>(), 1.0f);
}

// AdamW (decoupled decay on matrices only) in double precision, element by element.
struct ReferenceAdamW {
  double lr, beta1, beta2, eps, wd;
  std::vector<double> theta, m, v;
  int64_t decayed;
  int64_t t = 0;
  void step(const std::vector<double>& g) {
    ++t;
    const double bias1 = 1 - std::pow(beta1, t), bias2 = 1 - std::pow(beta2, t);
    for (size_t i = 0; i < theta.size(); ++i) {
      if (static_cast<int64_t>(i) < decayed) theta[i] -= lr * wd * theta[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      theta[i] -= lr * (m[i] / bias1) / (std::sqrt(v[i] / bias2) + eps);
    }
  }
};

std::vector<double> to_vector(const torch::Tensor& t) {
  auto d = t.to(torch::kFloat64).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

// Both implementations: LibTorch's ops, and the fused loop of adamw_kernel.cpp.
class FlatAdamWKernels : public ::testing::TestWithParam<CpuKernels> {};

TEST_P(FlatAdamWKernels, MatchesAHandWrittenReferenceInDouble) {
  Mixed module;
  FlatParams flat(module);
  FlatAdamW::Options options;
  options.kernels = GetParam();
  options.beta1 = 0.9;
  options.beta2 = 0.95;
  options.eps = 1e-8;
  options.weight_decay = 0.1;
  FlatAdamW adam(flat, options);
  const double lr = 0.01;
  ReferenceAdamW ref{lr,
                     0.9,
                     0.95,
                     1e-8,
                     0.1,
                     to_vector(flat.values()),
                     std::vector<double>(15, 0.0),
                     std::vector<double>(15, 0.0),
                     10};
  for (int step = 1; step <= 6; ++step) {
    SCOPED_TRACE(step);
    // Deterministic grads of mixed sign and scale, including one exact zero.
    auto g =
        torch::sin(torch::arange(15, torch::kFloat32) * 0.7f + step) * (step % 2 ? 1.0f : 3.0f);
    g[4] = 0.0f;
    flat.grads().copy_(g);
    auto before = flat.values().clone();
    auto stats = adam.step(lr);
    ref.step(to_vector(g));
    EXPECT_EQ(adam.step_count(), step);
    auto values = to_vector(flat.values());
    auto m = to_vector(adam.exp_avg()), v = to_vector(adam.exp_avg_sq());
    for (size_t i = 0; i < 15; ++i) {
      EXPECT_NEAR(values[i], ref.theta[i], 1e-6) << "theta " << i;
      EXPECT_NEAR(m[i], ref.m[i], 1e-6) << "m " << i;
      EXPECT_NEAR(v[i], ref.v[i], 1e-6) << "v " << i;
    }
    double change =
        (flat.values().to(torch::kFloat64) - before.to(torch::kFloat64)).norm().item<double>();
    EXPECT_NEAR(stats.update_norm, change, 1e-6 + 1e-5 * change);
    EXPECT_GT(stats.update_norm, 0);
    // The fused loop measures ‖θ‖ after the update in the same pass; LibTorch's ops leave it to
    // the caller.
    if (GetParam() == CpuKernels::Fused) {
      ASSERT_TRUE(stats.param_norm.has_value());
      const double norm = flat.values().to(torch::kFloat64).norm().item<double>();
      EXPECT_NEAR(*stats.param_norm, norm, 1e-12 * norm);
    } else {
      EXPECT_FALSE(stats.param_norm.has_value());
    }
  }
}

TEST_P(FlatAdamWKernels, DecayTouchesOnlyMatrices) {
  Mixed module;
  FlatParams flat(module);
  FlatAdamW::Options options;
  options.weight_decay = 0.5;
  options.kernels = GetParam();
  FlatAdamW adam(flat, options);
  auto before = flat.values().clone();
  adam.step(0.1);  // zero grads: the only change is the decay
  auto expected = before.clone();
  expected.narrow(0, 0, 10).mul_(1 - 0.1 * 0.5);
  EXPECT_TRUE(torch::allclose(flat.values(), expected, 1e-6, 1e-7)) << flat.values() - expected;
  EXPECT_TRUE(torch::equal(flat.values().narrow(0, 10, 5), before.narrow(0, 10, 5)));
}

INSTANTIATE_TEST_SUITE_P(Both, FlatAdamWKernels,
                         ::testing::Values(CpuKernels::Aten, CpuKernels::Fused),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Over many chunks and the decay boundary: the fused loop gives LibTorch's values to float
// rounding, and the same bits at any thread count.
TEST(FlatAdamW, FusedLoopMatchesLibTorchsOpsAndIgnoresTheThreadCount) {
  auto run = [](CpuKernels kernels, int threads) {
    at::set_num_threads(threads);
    torch::manual_seed(5);
    torch::nn::Linear module(300, 301);
    FlatParams flat(*module);
    FlatAdamW::Options options;
    options.kernels = kernels;
    FlatAdamW adam(flat, options);
    double norms = 0;
    for (int step = 1; step <= 3; ++step) {
      flat.grads().copy_(torch::randn({flat.numel()}));
      norms += adam.step(1e-2).update_norm;
    }
    at::set_num_threads(1);
    return std::make_pair(flat.values().clone(), norms);
  };
  auto [aten, aten_norms] = run(CpuKernels::Aten, 1);
  auto [fused, fused_norms] = run(CpuKernels::Fused, 1);
  auto [fused2, fused2_norms] = run(CpuKernels::Fused, 2);
  EXPECT_TRUE(torch::allclose(fused, aten, 1e-5, 1e-7));
  EXPECT_NEAR(fused_norms, aten_norms, 1e-5 * aten_norms);
  EXPECT_TRUE(torch::equal(fused, fused2));
  EXPECT_EQ(fused_norms, fused2_norms);
}

TEST(FlatAdamW, StepCountCanBeRestored) {
  Mixed module;
  FlatParams flat(module);
  FlatAdamW adam(flat, {});
  adam.set_step_count(41);
  flat.grads().fill_(1.0f);
  adam.step(1e-3);
  EXPECT_EQ(adam.step_count(), 42);
}

}  // namespace
}  // namespace faultline::trainer
