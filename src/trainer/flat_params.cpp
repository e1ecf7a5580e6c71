// Flat parameter and gradient buffers, AdamW and clipping over them.
#include "trainer/flat_params.hpp"

#include <cmath>

#include "trainer/adamw_kernel.hpp"
#include "trainer/cpu_kernels.hpp"

namespace faultline::trainer {

FlatParams::FlatParams(torch::nn::Module& module, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  auto named = module.named_parameters(/*recurse=*/true);
  std::vector<std::pair<std::string, torch::Tensor>> ordered;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& item : named)
      if ((item.value().dim() >= 2) == (pass == 0)) ordered.emplace_back(item.key(), item.value());

  int64_t total = 0;
  for (const auto& [name, param] : ordered) {
    layout_.push_back({name, total, param.numel()});
    if (param.dim() >= 2) decayed_numel_ = total + param.numel();
    total += param.numel();
  }
  const auto options = torch::dtype(torch::kFloat32).device(device);
  values_ = torch::empty({total}, options);
  comm_buffer_ = torch::zeros({total + 1}, options);
  grads_ = comm_buffer_.narrow(0, 0, total);
  for (size_t i = 0; i < ordered.size(); ++i) {
    auto& param = ordered[i].second;
    auto value_view = values_.narrow(0, layout_[i].offset, layout_[i].numel).view(param.sizes());
    value_view.copy_(param);
    param.set_data(value_view);
    param.mutable_grad() =
        grads_.narrow(0, layout_[i].offset, layout_[i].numel).view(param.sizes());
  }
}

std::string FlatParams::name_at(int64_t index) const {
  for (const auto& entry : layout_)
    if (index >= entry.offset && index < entry.offset + entry.numel) return entry.name;
  return "";
}

FlatAdamW::FlatAdamW(FlatParams& params, Options options) : params_(params), options_(options) {
  exp_avg_ = torch::zeros_like(params.values());
  exp_avg_sq_ = torch::zeros_like(params.values());
  // The fused loop needs no scratch buffer; LibTorch's ops build the update in one.
  if (!fused_kernels_apply(options_.kernels, params.values()))
    update_ = torch::empty_like(params.values());
}

FlatAdamW::StepStats FlatAdamW::step(double lr, UpdateNorm measure) {
  torch::NoGradGuard no_grad;
  ++step_count_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_count_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_count_));
  auto& grads = params_.grads();
  auto& values = params_.values();
  StepStats stats;
  if (fused_kernels_apply(options_.kernels, values)) {
    const AdamWConstants constants{static_cast<float>(1.0 - options_.beta1),
                                   static_cast<float>(options_.beta2),
                                   static_cast<float>(1.0 - options_.beta2),
                                   static_cast<float>(1.0 / std::sqrt(bias2)),
                                   static_cast<float>(options_.eps),
                                   static_cast<float>(lr / bias1),
                                   static_cast<float>(lr * options_.weight_decay)};
    const AdamWSums sums =
        adamw_fused_step(values.data_ptr<float>(), grads.data_ptr<float>(),
                         exp_avg_.data_ptr<float>(), exp_avg_sq_.data_ptr<float>(), values.numel(),
                         options_.weight_decay > 0 ? params_.decayed_numel() : 0, constants);
    if (measure == UpdateNorm::Measure) {
      stats.update_norm = std::sqrt(sums.update_squares);
      stats.param_norm = std::sqrt(sums.value_squares);
    }
    return stats;
  }
  exp_avg_.lerp_(grads, 1.0 - options_.beta1);
  exp_avg_sq_.mul_(options_.beta2).addcmul_(grads, grads, 1.0 - options_.beta2);
  // update = lr/bias1 · m / (sqrt(v)/sqrt(bias2) + eps)  (+ lr·wd·θ on the matrix slice)
  torch::sqrt_out(update_, exp_avg_sq_);
  update_.div_(std::sqrt(bias2)).add_(options_.eps);
  torch::div_out(update_, exp_avg_, update_);
  update_.mul_(lr / bias1);
  if (options_.weight_decay > 0 && params_.decayed_numel() > 0) {
    auto decayed = update_.narrow(0, 0, params_.decayed_numel());
    decayed.add_(values.narrow(0, 0, params_.decayed_numel()), lr * options_.weight_decay);
  }
  if (measure == UpdateNorm::Measure) stats.update_norm = update_.norm().item<double>();
  values.sub_(update_);
  return stats;
}

double clip_grad_norm(torch::Tensor& grads, double max_norm) {
  const double norm = grad_norm(grads).item<double>();
  clip_grads(grads, norm, max_norm);
  return norm;
}

torch::Tensor grad_norm(const torch::Tensor& grads) {
  torch::NoGradGuard no_grad;
  return grads.norm();
}

void clip_grads(torch::Tensor& grads, double norm, double max_norm) {
  torch::NoGradGuard no_grad;
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) grads.mul_(max_norm / (norm + 1e-6));
}

}  // namespace faultline::trainer
