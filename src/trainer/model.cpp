// The GPT forward pass. The three attention projections are one matmul, and the linear layers,
// attention, GELU and LayerNorm run the trainer's own CPU kernels (cpu_kernels.hpp, gelu.hpp,
// layer_norm.hpp) unless train.cpu_kernels = "aten": fewer, larger ops is where a C++ trainer
// gains on small models.
#include "trainer/model.hpp"

#include <cmath>

#include "trainer/cpu_kernels.hpp"
#include "trainer/gelu.hpp"
#include "trainer/layer_norm.hpp"

namespace faultline::trainer {

namespace {
torch::Tensor observe(ForwardObserver* observer, const std::string& name, torch::Tensor output) {
  return observer ? observer->on_output(name, std::move(output)) : output;
}

torch::Tensor norm(const torch::nn::LayerNorm& ln, const torch::Tensor& x, CpuKernels kernels) {
  return layer_norm(x, ln->weight, ln->bias, ln->options.eps(), kernels);
}
}  // namespace

AttentionImpl::AttentionImpl(const ModelConfig& config, std::string name_, CpuKernels kernels_)
    : n_head(config.n_head), name(std::move(name_)), kernels(kernels_) {
  qkv = register_module("qkv", torch::nn::Linear(config.n_embd, 3 * config.n_embd));
  proj = register_module("proj", torch::nn::Linear(config.n_embd, config.n_embd));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask_bias) {
  auto qkv_out = linear(x, qkv->weight, qkv->bias, kernels);
  return linear(causal_attention(qkv_out, n_head, mask_bias, kernels), proj->weight, proj->bias,
                kernels);
}

MlpImpl::MlpImpl(const ModelConfig& config, std::string name_, CpuKernels kernels_)
    : name(std::move(name_)), kernels(kernels_) {
  fc = register_module("fc", torch::nn::Linear(config.n_embd, 4 * config.n_embd));
  proj = register_module("proj", torch::nn::Linear(4 * config.n_embd, config.n_embd));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto hidden = linear(x, fc->weight, fc->bias, kernels);
  hidden = kernels == CpuKernels::Aten ? torch::gelu(hidden, "tanh") : gelu_tanh(hidden);
  return linear(hidden, proj->weight, proj->bias, kernels);
}

BlockImpl::BlockImpl(const ModelConfig& config, int index, CpuKernels kernels_)
    : name("blocks." + std::to_string(index)), kernels(kernels_) {
  ln_1 =
      register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  attn = register_module("attn", Attention(config, name + ".attn", kernels));
  ln_2 =
      register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  mlp = register_module("mlp", Mlp(config, name + ".mlp", kernels));
}

torch::Tensor BlockImpl::forward(torch::Tensor x, const torch::Tensor& mask_bias,
                                 ForwardObserver* observer) {
  auto h = observe(observer, name + ".ln_1", norm(ln_1, x, kernels));
  x = x + observe(observer, attn->name, attn(h, mask_bias));
  h = observe(observer, name + ".ln_2", norm(ln_2, x, kernels));
  x = x + observe(observer, mlp->name, mlp(h));
  return observe(observer, name, x);
}

GptImpl::GptImpl(const ModelConfig& config_, CpuKernels kernels_)
    : config(config_), kernels(kernels_) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < config.n_layer; ++i) blocks->push_back(Block(config, i, kernels));
  ln_f =
      register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  if (!config.tied_head)
    head = register_module(
        "head",
        torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.vocab_size).bias(false)));
  mask_bias =
      torch::full({config.block_size, config.block_size}, -std::numeric_limits<float>::infinity())
          .triu(1);
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx, ForwardObserver* observer) {
  const int64_t time = idx.size(1);
  auto positions = torch::arange(time, torch::dtype(torch::kLong).device(idx.device()));
  // Two statements: the order of a + b's operands is unspecified, and probes must see forward
  // order.
  auto token = observe(observer, "wte", wte(idx));
  auto x = token + observe(observer, "wpe", wpe(positions));
  for (const auto& block : *blocks) x = block->as<Block>()->forward(x, mask_bias, observer);
  x = observe(observer, "ln_f", norm(ln_f, x, kernels));
  auto logits = linear(x, head ? head->weight : wte->weight, torch::Tensor(), kernels);
  return observe(observer, "head", logits);
}

std::vector<std::string> GptImpl::module_names() const {
  std::vector<std::string> names{"wte", "wpe"};
  for (int i = 0; i < config.n_layer; ++i) {
    std::string block = "blocks." + std::to_string(i);
    for (const char* part : {".ln_1", ".attn", ".ln_2", ".mlp", ""}) names.push_back(block + part);
  }
  names.push_back("ln_f");
  names.push_back("head");
  return names;
}

void GptImpl::initialize(double init_std) {
  torch::NoGradGuard no_grad;
  const double residual_std = init_std / std::sqrt(2.0 * config.n_layer);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& param = item.value();
    if (name.find("ln_") != std::string::npos) {
      name.size() > 6 && name.compare(name.size() - 6, 6, "weight") == 0 ? param.fill_(1.0)
                                                                         : param.zero_();
    } else if (name.compare(name.size() - 4, 4, "bias") == 0) {
      param.zero_();
    } else if (name.find(".proj.weight") != std::string::npos) {
      param.normal_(0.0, residual_std);
    } else {
      param.normal_(0.0, init_std);
    }
  }
}

}  // namespace faultline::trainer
