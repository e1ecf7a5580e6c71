// Planted faults. Each is deliberately the simplest mechanism that reproduces the real failure's
// signature: NaN activations, a bad sample, a wrong LR, a dying, hanging or slow rank, silently
// corrupted gradients, a leak, a starved data loader, or noise not derived from the seed.
#include "trainer/faults.hpp"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <random>
#include <thread>

#include "common/error.hpp"
#include "common/text.hpp"
#include "trainer/thread_clock.hpp"

namespace faultline::trainer {

namespace {
void sleep_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A slower device computes longer, it does not idle: spin until this thread has used `ms` of CPU
// time, so the extra time shows in cpu_ms and, when the OS deschedules us, stretches in wall time.
void burn_cpu_ms(int64_t ms) {
  const double until = thread_cpu_ms() + static_cast<double>(ms);
  volatile uint64_t work = 0;
  while (thread_cpu_ms() < until)
    for (int i = 0; i < 1000; ++i) work = work + static_cast<uint64_t>(i);
}
}  // namespace

FaultPlan::FaultPlan(const FaultConfig& config, int rank, std::string host)
    : config_(config), rank_(rank), host_(std::move(host)) {}

void FaultPlan::validate(const std::vector<std::string>& module_names) const {
  if (config_.nan_layer.empty()) return;
  for (const auto& name : module_names)
    if (name == config_.nan_layer) return;
  std::string hint = did_you_mean(config_.nan_layer, module_names);
  if (hint.empty()) hint = "modules are named like wte, blocks.0.attn, blocks.0.mlp, ln_f, head";
  throw UserError("unknown module '" + config_.nan_layer + "'", "fault.nan_layer", hint);
}

void FaultPlan::begin_micro_batch(int64_t step, const std::vector<uint64_t>& samples) {
  step_ = step;
  poisoned_rows_.clear();
  if (config_.poison_sample < 0) return;
  for (size_t row = 0; row < samples.size(); ++row)
    if (samples[row] == static_cast<uint64_t>(config_.poison_sample))
      poisoned_rows_.push_back(static_cast<int64_t>(row));
}

torch::Tensor FaultPlan::on_output(const std::string& module, torch::Tensor output) const {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (config_.nan_step == step_ && module == config_.nan_layer) return output + nan;
  if (!poisoned_rows_.empty() && module == "wte") {
    auto poison = torch::zeros({output.size(0), 1, 1}, output.options());
    for (int64_t row : poisoned_rows_) poison[row] = nan;
    return output + poison;
  }
  return output;
}

double FaultPlan::lr_factor(int64_t step) const {
  return step == config_.lr_spike_step ? config_.lr_spike_factor : 1.0;
}

void FaultPlan::at_step_start(int64_t step) {
  if (config_.crash_rank == rank_ && config_.crash_step == step) {
    if (config_.crash_signal == "SEGV") std::raise(SIGSEGV);
    if (config_.crash_signal == "ABRT") std::abort();
    std::_Exit(std::atoi(config_.crash_signal.c_str()));
  }
  if (config_.hang_rank == rank_ && config_.hang_step == step)
    while (true) sleep_ms(1000);  // the harness's heartbeat timeout must notice and kill us
  if (config_.leak_mb_per_step > 0) {
    // Touch every page so the leak shows in RSS, as a real one does.
    leaked_.emplace_back(static_cast<size_t>(config_.leak_mb_per_step * 1024 * 1024), 1);
  }
}

void FaultPlan::during_compute(int64_t) const {
  if (config_.slow_rank == rank_) burn_cpu_ms(config_.slow_ms);
}

void FaultPlan::during_data(int64_t) const {
  if (config_.data_delay_ms > 0 &&
      (config_.data_delay_rank < 0 || config_.data_delay_rank == rank_))
    sleep_ms(config_.data_delay_ms);
}

void FaultPlan::on_local_grads(int64_t step, torch::Tensor& grads) const {
  torch::NoGradGuard no_grad;
  const bool corrupt_here =
      config_.corrupt_grad_rank == rank_ ||
      (!config_.corrupt_grad_host.empty() && config_.corrupt_grad_host == host_);
  if (corrupt_here && config_.corrupt_grad_step == step) {
    // A flipped sign on a slice: finite, plausible in size, and wrong — as silent corruption is.
    grads.narrow(0, 0, grads.numel() / 8).neg_();
  }
  if (config_.nondeterministic) {
    static std::random_device entropy;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        (static_cast<uint64_t>(entropy()) << 32) | entropy());
    grads.add_(at::randn(grads.sizes(), generator, grads.options().device(torch::kCPU))
                   .to(grads.device()) *
               1e-4);
  }
}

}  // namespace faultline::trainer
