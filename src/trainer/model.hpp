// The bundled GPT: token + position embeddings, pre-LN causal self-attention and MLP blocks,
// a final LayerNorm and a tied or untied head. Module names are stable dotted paths
// (`blocks.2.attn`, `blocks.2.mlp`, `ln_f`, `head`): they are what findings report.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// Sees every module's output during forward. Probes check it; planted faults may replace it.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual torch::Tensor on_output(const std::string& module, torch::Tensor output) = 0;
};

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(const ModelConfig& config, std::string name, CpuKernels kernels);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_bias);

  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  int64_t n_head;
  std::string name;
  CpuKernels kernels;
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(const ModelConfig& config, std::string name, CpuKernels kernels);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr}, proj{nullptr};
  std::string name;
  CpuKernels kernels;
};
TORCH_MODULE(Mlp);

struct BlockImpl : torch::nn::Module {
  BlockImpl(const ModelConfig& config, int index, CpuKernels kernels);
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask_bias, ForwardObserver* observer);

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  std::string name;
  CpuKernels kernels;
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  // The parameters do not depend on `kernels`, only how forward and backward compute.
  explicit GptImpl(const ModelConfig& config, CpuKernels kernels = CpuKernels::Fused);

  // idx: [B, T] token ids → logits [B, T, vocab].
  torch::Tensor forward(const torch::Tensor& idx, ForwardObserver* observer);

  // Every module name a finding may report, in forward order.
  std::vector<std::string> module_names() const;

  // Normal(0, init_std) weights (projections into the residual stream scaled by 1/sqrt(2·layers)
  // as in GPT-2), zero biases, unit LayerNorm gains. Draws from the default CPU generator.
  void initialize(double init_std);

  ModelConfig config;
  CpuKernels kernels;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};  // null when tied to wte
  torch::Tensor mask_bias;          // [T, T]: 0 on and below the diagonal, -inf above
};
TORCH_MODULE(Gpt);

}  // namespace faultline::trainer
