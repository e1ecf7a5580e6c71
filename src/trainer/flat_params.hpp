// All parameters as views into one contiguous buffer, and all gradients into another: the
// optimizer, clipping, finiteness check, fingerprints, checkpoints and the allreduce each become
// one operation on one tensor instead of one per parameter.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

struct FlatParam {
  std::string name;
  int64_t offset = 0;
  int64_t numel = 0;
};

class FlatParams {
 public:
  // Moves every parameter of `module` into the flat buffers. Matrices (weight decay applies) come
  // first, vectors after, so decay is one slice. Grad slots start zeroed. The buffers live on
  // `device`: the module's parameters become views of them there.
  explicit FlatParams(torch::nn::Module& module, const torch::Device& device = torch::kCPU);

  torch::Tensor& values() { return values_; }
  torch::Tensor& grads() { return grads_; }
  // grads followed by one spare slot: the loss rides along in the same allreduce.
  torch::Tensor& comm_buffer() { return comm_buffer_; }
  int64_t numel() const { return values_.numel(); }
  int64_t decayed_numel() const { return decayed_numel_; }
  const std::vector<FlatParam>& layout() const { return layout_; }

  // The parameter whose slice holds flat index `index` ("" if out of range).
  std::string name_at(int64_t index) const;

  void zero_grads() { grads_.zero_(); }

 private:
  torch::Tensor values_;
  torch::Tensor comm_buffer_;
  torch::Tensor grads_;
  int64_t decayed_numel_ = 0;
  std::vector<FlatParam> layout_;
};

// AdamW over the flat buffers, with decoupled weight decay on the matrix slice.
class FlatAdamW {
 public:
  struct Options {
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
    // Fused: one pass over memory on a float32 CPU (adamw_kernel.hpp); else LibTorch's ops.
    CpuKernels kernels = CpuKernels::Fused;
  };
  FlatAdamW(FlatParams& params, Options options);

  enum class UpdateNorm { Measure, Skip };
  struct StepStats {
    double update_norm = 0;  // ‖Δθ‖ of this step (0 when skipped)
    // ‖θ‖ after the step, when the fused update measured it in its pass over θ (Measure only).
    std::optional<double> param_norm;
  };
  StepStats step(double lr, UpdateNorm measure = UpdateNorm::Measure);

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t count) { step_count_ = count; }
  torch::Tensor& exp_avg() { return exp_avg_; }
  torch::Tensor& exp_avg_sq() { return exp_avg_sq_; }

 private:
  FlatParams& params_;
  Options options_;
  torch::Tensor exp_avg_, exp_avg_sq_, update_;
  int64_t step_count_ = 0;
};

// Scales grads so their global L2 norm is at most max_norm (0: no clipping); returns the norm
// before clipping. The norm is also the always-on finiteness probe: any NaN/Inf grad makes it so.
double clip_grad_norm(torch::Tensor& grads, double max_norm);

// The two halves of clip_grad_norm, for a caller that reads the norm together with other scalars
// in one host sync: the norm as a 0-dim tensor on the grads' device, and the scaling given it.
torch::Tensor grad_norm(const torch::Tensor& grads);
void clip_grads(torch::Tensor& grads, double norm, double max_norm);

}  // namespace faultline::trainer
