// One rank's training loop, top to bottom: set up, (resume), then per step: faults, data,
// forward/backward per micro-batch, allreduce, clip, check, optimizer, metrics, checkpoint.
#include "trainer/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/end_status.hpp"
#include "common/error.hpp"
#include "common/event_names.hpp"
#include "common/hash.hpp"
#include "common/metrics_record.hpp"
#include "common/text.hpp"
#include "probes/inprocess/finite_checks.hpp"
#include "trainer/batch_loader.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/cpu_gemm.hpp"
#include "trainer/cpu_kernels.hpp"
#include "trainer/device.hpp"
#include "trainer/dist.hpp"
#include "trainer/faults.hpp"
#include "trainer/fingerprint.hpp"
#include "trainer/flat_params.hpp"
#include "trainer/metrics_writer.hpp"
#include "trainer/model.hpp"
#include "trainer/records.hpp"
#include "trainer/runtime_info.hpp"
#include "trainer/schedule.hpp"
#include "trainer/step_observer.hpp"
#include "trainer/thread_clock.hpp"

namespace faultline::trainer {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string metrics_path(const TrainerOptions& options, int rank) {
  if (const char* path = std::getenv("FAULTLINE_METRICS"); path && *path) return path;
  return options.out_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl";
}

class Trainer {
 public:
  explicit Trainer(const TrainerOptions& options)
      : options_(options),
        config_(options.config),
        env_(read_rank_env()),
        runtime_(configure_runtime(config_.train.threads)),
        faults_(config_.fault, env_.rank, env_.host) {}

  TrainExit run();

 private:
  void set_up();
  int64_t resume();
  TrainExit step(int64_t step);
  void write_fingerprint(int64_t step, Fingerprinted what, const torch::Tensor& tensor);
  void write_checkpoint(int64_t step);
  // The end event; `error`: the exception that ended training (its end event's "error").
  void end(EndStatus status, int64_t step, const std::string& error = "");

  const TrainerOptions& options_;
  const TrainConfig& config_;
  RankEnv env_;
  RuntimeInfo runtime_;
  FaultPlan faults_;
  torch::Device device_{torch::kCPU};
  nlohmann::json determinism_;
  Gpt model_{nullptr};
  std::unique_ptr<FlatParams> params_;
  std::unique_ptr<FlatAdamW> optimizer_;
  std::unique_ptr<BatchLoader> loader_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::optional<CheckpointMeta> resumed_from_;
  probes::ForwardFiniteCheck forward_check_;
  probes::GradFiniteCheck grad_check_;
  Fingerprinter fingerprinter_;
  double tokens_seen_ = 0, timed_ms_ = 0;
  double first_loss_ = std::nan(""), last_loss_ = std::nan("");
  int64_t first_step_ = 0;
};

void Trainer::set_up() {
  const int64_t shards_of_batch = env_.world_size * config_.train.grad_accum;
  if (config_.train.batch_size % shards_of_batch != 0)
    throw UserError("train.batch_size " + std::to_string(config_.train.batch_size) +
                        " is not divisible by WORLD_SIZE × train.grad_accum = " +
                        std::to_string(shards_of_batch),
                    config_.source,
                    "choose a batch size that splits evenly over ranks and micro-batches");
  // First: train.device = "cuda" without a device is a config error before any work.
  device_ = choose_device(config_, cuda_device_count(), env_.local_rank);
  make_current(device_);
  at::set_num_interop_threads(1);
  torch::manual_seed(static_cast<uint64_t>(config_.train.seed));

  model_ = Gpt(config_.model, config_.train.cpu_kernels);
  model_->initialize(config_.model.init_std);  // on the CPU generator: the same on any device
  model_->mask_bias = model_->mask_bias.to(device_);
  faults_.validate(model_->module_names());
  params_ = std::make_unique<FlatParams>(*model_, device_);
  // The layers' fused GEMMs run where the kernels apply to the parameters and autocast is off.
  // Both the GEMM and the element-wise loops' SIMD path decide the low bits.
  if (fused_kernels_apply(config_.train.cpu_kernels, params_->values()) &&
      config_.train.precision == Precision::Fp32)
    runtime_.gemm = fused_kernels_description();
  optimizer_ = std::make_unique<FlatAdamW>(
      *params_, FlatAdamW::Options{config_.optim.beta1, config_.optim.beta2, config_.optim.eps,
                                   config_.optim.weight_decay, config_.train.cpu_kernels});
  loader_ = std::make_unique<BatchLoader>(config_);
  if (config_.probe.level == ProbeLevel::Full) {
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& item : model_->named_parameters())
      named.emplace_back(item.key(), item.value());
    grad_check_.attach(named);
  }
  std::filesystem::create_directories(options_.out_dir);
  // A resumed run continues its metrics file; a fresh one starts it anew.
  metrics_ = std::make_unique<MetricsWriter>(
      metrics_path(options_, env_.rank), env_.rank,
      options_.resume_path.empty() ? MetricsWriter::Mode::Truncate : MetricsWriter::Mode::Append);
  comm_ = std::make_unique<Communicator>(env_, config_.dist, device_);
  determinism_ = make_deterministic(device_, env_.world_size, comm_->backend_name());
}

int64_t Trainer::resume() {
  if (options_.resume_path.empty()) return 1;
  auto meta = load_checkpoint(options_.resume_path, {*params_, *optimizer_});
  if (meta.trajectory_hash != config_.trajectory_hash) {
    const auto& free_keys = trajectory_free_keys();
    throw UserError("checkpoint was written by a different training config (trajectory hash " +
                        meta.trajectory_hash + ", this config " + config_.trajectory_hash + ")",
                    options_.resume_path,
                    "resume with the config it was written with; only " +
                        fmt::format("{}", fmt::join(free_keys.begin(), free_keys.end() - 1, ", ")) +
                        " and " + free_keys.back() + " may differ");
  }
  if (meta.blas != runtime_.blas_summary())
    std::fprintf(stderr,
                 "faultline-train: warning: checkpoint written with BLAS %s, running %s; "
                 "the continuation will not be bitwise identical\n",
                 meta.blas.c_str(), runtime_.blas_summary().c_str());
  resumed_from_ = meta;
  return meta.step + 1;
}

void Trainer::write_fingerprint(int64_t step, Fingerprinted what, const torch::Tensor& tensor) {
  Fingerprint fingerprint = fingerprinter_(tensor);
  nlohmann::json sketch = nlohmann::json::array();
  for (double value : fingerprint.sketch) sketch.push_back(number(value));
  metrics_->write("fingerprint", {{"step", step},
                                  {"what", to_string(what)},
                                  {"hash", hex64(fingerprint.hash)},
                                  {"norm", number(fingerprint.norm)},
                                  {"sketch", sketch}});
}

void Trainer::write_checkpoint(int64_t step) {
  if (env_.rank != 0) return;
  std::filesystem::create_directories(options_.out_dir + "/checkpoints");
  std::string path = checkpoint_path(options_.out_dir + "/checkpoints", step);
  CheckpointMeta meta{step,
                      config_.hash,
                      config_.trajectory_hash,
                      runtime_.blas_summary(),
                      runtime_.blas_kernel_source,
                      config_.train.threads,
                      env_.world_size,
                      static_cast<uint64_t>(config_.train.seed),
                      loader_->sampler().epoch_of(step + 1),
                      runtime_.torch_version};
  save_checkpoint(path, meta, {*params_, *optimizer_});
  metrics_->write("event", {{"name", kCheckpointEvent}, {"step", step}, {"path", path}});
}

TrainExit Trainer::step(int64_t step) {
  const auto step_start = Clock::now();
  const double step_cpu_start = thread_cpu_ms();
  faults_.at_step_start(step);

  const auto data_start = Clock::now();
  const double data_cpu_start = thread_cpu_ms();
  StepBatch batch = loader_->load(step, env_.rank, env_.world_size);
  faults_.during_data(step);
  const double data_ms = ms_since(data_start);
  const double data_cpu_ms = thread_cpu_ms() - data_cpu_start;
  if (batch.anomaly) {
    report_token_anomaly(*metrics_, step, *batch.anomaly, config_.model.vocab_size);
    end(EndStatus::DataAnomaly, step);
    return TrainExit::DataAnomaly;
  }

  const bool full_probes =
      config_.probe.level == ProbeLevel::Full && step >= config_.probe.full_from_step;
  forward_check_.reset();
  grad_check_.reset();
  grad_check_.set_enabled(full_probes);
  StepObserver observer(faults_, full_probes ? &forward_check_ : nullptr);
  const int64_t block = config_.model.block_size;
  // Summed on the device, in double as the loss values arrive: no host sync per micro-batch.
  auto local_loss = torch::zeros({}, torch::dtype(torch::kDouble).device(device_));
  int64_t tokens = 0;
  const std::vector<uint64_t>* failing_rows_samples = nullptr;
  for (const auto& micro : batch.micro_batches) {
    faults_.begin_micro_batch(step, micro.samples);
    const auto tokens_here = micro.tokens.to(device_);
    auto input = tokens_here.narrow(1, 0, block);
    auto target = tokens_here.narrow(1, 1, block);
    torch::Tensor loss;
    {
      AutocastScope autocast(device_, config_.train.precision);
      auto logits = model_->forward(input, &observer);
      loss = torch::cross_entropy_loss(logits.reshape({-1, config_.model.vocab_size}),
                                       target.reshape({-1})) /
             static_cast<double>(batch.micro_batches.size());
    }
    loss.backward();
    local_loss += loss.detach().to(torch::kDouble);
    tokens += input.numel();
    if (forward_check_.first() && !failing_rows_samples) failing_rows_samples = &micro.samples;
  }
  faults_.during_compute(step);

  const bool fingerprint =
      config_.probe.fingerprint_every > 0 && step % config_.probe.fingerprint_every == 0;
  // Planted corruption strikes in compute, before the fingerprint: as real silent corruption does.
  faults_.on_local_grads(step, params_->grads());
  if (fingerprint) write_fingerprint(step, Fingerprinted::Grads, params_->grads());

  const auto comm_start = Clock::now();
  const double comm_cpu_start = thread_cpu_ms();
  auto& buffer = params_->comm_buffer();
  buffer.narrow(0, params_->numel(), 1).copy_(local_loss);
  // The heartbeat of a collective: written before blocking in it, so when a rank never comes,
  // the harness sees which ranks wait in collective #seq and which never entered it.
  if (env_.world_size > 1)
    metrics_->write("event", {{"name", kCollectiveEvent},
                              {"op", "allreduce"},
                              {"step", step},
                              {"seq", comm_->collectives_entered() + 1}});
  comm_->allreduce_sum(buffer);
  if (env_.world_size > 1) buffer.div_(static_cast<double>(env_.world_size));
  const double comm_ms = ms_since(comm_start);
  const double comm_cpu_ms = thread_cpu_ms() - comm_cpu_start;

  // The always-on finiteness check reads two scalars, the loss and the gradient norm, in the
  // step's one host sync.
  const auto scalars =
      torch::stack({buffer[params_->numel()], trainer::grad_norm(params_->grads())})
          .to(torch::kCPU, torch::kDouble);
  const double loss = scalars.data_ptr<double>()[0];
  const double grad_norm = scalars.data_ptr<double>()[1];
  clip_grads(params_->grads(), grad_norm, config_.optim.grad_clip);
  const double lr =
      lr_at(config_.schedule, config_.optim.lr, step,
            config_.schedule.total_steps > 0 ? config_.schedule.total_steps : config_.train.steps) *
      faults_.lr_factor(step);
  const bool finite = std::isfinite(loss + grad_norm);  // the always-on fused check
  // probe.level = "off" drops the cheap probes' extra reductions (the benchmark's baseline); the
  // finiteness check stays, since the gradient norm is computed for clipping anyway.
  const bool cheap_probes = config_.probe.level != ProbeLevel::Off;
  FlatAdamW::StepStats stats;
  if (finite || !config_.probe.halt_on_nonfinite)
    stats = optimizer_->step(
        lr, cheap_probes ? FlatAdamW::UpdateNorm::Measure : FlatAdamW::UpdateNorm::Skip);
  const double update_norm = stats.update_norm;
  // The fused update measures ‖θ‖ in its own pass; otherwise it takes one more.
  double param_norm = 0;
  if (cheap_probes)
    param_norm = stats.param_norm ? *stats.param_norm : params_->values().norm().item<double>();

  StepRecord record;
  record.step = step;
  record.loss = loss;
  record.grad_norm = grad_norm;
  record.lr = lr;
  record.step_ms = ms_since(step_start);
  // Read with step_ms, so cpu_ms is the CPU counterpart of step_ms - data_ms - comm_ms.
  record.cpu_ms = thread_cpu_ms() - step_cpu_start - data_cpu_ms - comm_cpu_ms;
  record.data_ms = data_ms;
  record.comm_ms = comm_ms;
  record.tokens = tokens;
  if (cheap_probes) {
    record.param_norm = param_norm;
    record.update_ratio = param_norm > 0 ? update_norm / param_norm : 0;
  }
  record.collectives = comm_->collectives_entered();
  record.memory = memory_figures(device_);
  NonfiniteFindings findings{forward_check_.first(), grad_check_.first(), failing_rows_samples};
  const bool params_finite = std::isfinite(param_norm);
  if (!finite || !params_finite) record.nonfinite = count_nonfinite_state(*params_, loss);
  // The last good state goes to disk before the record that reports the failure: a harness
  // that stops the run on that record must find the checkpoint complete.
  const bool halting = (!finite || !params_finite) && config_.probe.halt_on_nonfinite;
  if (halting && config_.probe.checkpoint_on_nonfinite && !finite && step > 1)
    write_checkpoint(step - 1);
  write_step_record(*metrics_, record);
  if (first_step_ == 0) {
    first_step_ = step;
    first_loss_ = loss;
  }
  last_loss_ = loss;
  if (step > first_step_ + 1) {  // a process's first two steps pay one-time allocation costs
    tokens_seen_ += static_cast<double>(tokens);
    timed_ms_ += record.step_ms;
  }
  if (!finite || !params_finite) {
    report_nonfinite(*metrics_, step, loss, *params_, findings, *loader_, !finite);
    if (halting) {
      // Halting skipped the update, so the state (checkpointed above) is still step - 1's.
      end(EndStatus::Nonfinite, step);
      return TrainExit::Nonfinite;
    }
  }
  if (fingerprint) write_fingerprint(step, Fingerprinted::Params, params_->values());
  params_->zero_grads();
  if (config_.train.checkpoint_every > 0 && step % config_.train.checkpoint_every == 0)
    write_checkpoint(step);
  if (config_.train.log_every > 0 && (step % config_.train.log_every == 0 || step == 1) &&
      env_.rank == 0)
    std::printf("step %6lld  loss %.4f  grad_norm %.3f  lr %.2e  %.1f ms\n",
                static_cast<long long>(step), loss, grad_norm, lr, record.step_ms);
  return TrainExit::Ok;
}

void Trainer::end(EndStatus status, int64_t step, const std::string& error) {
  double tokens_per_s = timed_ms_ > 0 ? tokens_seen_ / (timed_ms_ / 1000.0) : 0;
  nlohmann::json fields = {{"name", kEndEvent},
                           {"status", to_string(status)},
                           {"step", step},
                           {"tokens_per_s", tokens_per_s},
                           {"first_loss", number(first_loss_)},
                           {"last_loss", number(last_loss_)}};
  if (!error.empty()) fields["error"] = error;
  metrics_->write("event", fields);
  if (status == EndStatus::Error) return;  // main prints the error itself
  if (env_.rank == 0) {
    const std::string rate =
        tokens_per_s > 0 ? fmt::format("{:.0f} tokens/s on rank 0", tokens_per_s)
                         : std::string("too few steps to time (a process's first two are not)");
    std::printf("faultline-train: %s at step %lld; loss %.4f (step %lld) -> %.4f; %s\n",
                to_string(status), static_cast<long long>(step), first_loss_,
                static_cast<long long>(first_step_), last_loss_, rate.c_str());
  }
  std::fflush(stdout);
}

TrainExit Trainer::run() {
  set_up();
  const int64_t first = resume();
  const int64_t last = config_.train.stop_after > 0
                           ? std::min(config_.train.stop_after, config_.train.steps)
                           : config_.train.steps;
  write_start_event(*metrics_, config_, env_, runtime_, params_->numel(), loader_->samples_used(),
                    comm_->backend_name(), first, determinism_);
  if (resumed_from_)
    metrics_->write("event", {{"name", kResumeEvent},
                              {"path", options_.resume_path},
                              {"step", resumed_from_->step},
                              {"checkpoint_config_hash", resumed_from_->config_hash}});
  if (env_.rank == 0)
    std::printf(
        "faultline-train: %lld parameters, %d rank(s) on %s (%s), BLAS %s, %d thread(s), steps "
        "%lld..%lld\n",
        static_cast<long long>(params_->numel()), env_.world_size, device_.str().c_str(),
        to_string(config_.train.precision), runtime_.blas_description().c_str(),
        runtime_.torch_threads, static_cast<long long>(first), static_cast<long long>(last));
  int64_t s = first;
  try {
    for (; s <= last; ++s) {
      TrainExit exit = step(s);
      if (exit != TrainExit::Ok) return exit;
    }
  } catch (const std::exception& error) {
    // Said in the end event as faultline_probe.py says it: a peer's death reads here as Gloo's
    // "Connection reset by peer", and an imported job whose ranks wrote none looked like ranks
    // waiting until they were stopped, a hang, where one rank had crashed.
    end(EndStatus::Error, s - 1, error.what());
    throw;
  }
  end(EndStatus::Ok, last);
  return TrainExit::Ok;
}

}  // namespace

TrainExit run_trainer(const TrainerOptions& options) {
  Trainer trainer(options);
  return trainer.run();
}

}  // namespace faultline::trainer
