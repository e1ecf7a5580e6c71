// Builds the trainer's JSON records. Non-finite values go through number(): JSON has no NaN.
#include "trainer/records.hpp"

#include <chrono>
#include <cmath>

#include "common/event_names.hpp"
#include "common/metrics_record.hpp"

namespace faultline::trainer {

namespace {
double unix_time_s() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::round(std::chrono::duration<double>(now).count() * 1e6) / 1e6;
}

// The name of the parameter holding the first non-finite element of `flat`, or "".
std::string first_nonfinite_param(const FlatParams& params, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  auto bad = torch::nonzero(torch::isfinite(flat).logical_not());
  if (bad.numel() == 0) return "";
  return params.name_at(bad[0][0].item<int64_t>());
}
}  // namespace

void write_start_event(MetricsWriter& metrics, const TrainConfig& config, const RankEnv& env,
                       const RuntimeInfo& runtime, int64_t parameters, uint64_t samples,
                       const char* backend, int64_t first_step, const nlohmann::json& determinism) {
  nlohmann::json fields = {{"name", kStartEvent},
                           {"config", config.canonical},
                           {"config_hash", config.hash},
                           {"trajectory_hash", config.trajectory_hash},
                           {"config_source", config.source},
                           {"world_size", env.world_size},
                           {"local_rank", env.local_rank},
                           {"host", env.host},
                           {"backend", backend},
                           {"parameters", parameters},
                           {"samples", samples},
                           {"first_step", first_step},
                           {"threads", runtime.torch_threads},
                           {"blas_threads", runtime.blas_threads},
                           {"blas", runtime.blas_library},
                           {"blas_config", runtime.blas_config},
                           {"blas_kernel", runtime.blas_kernel},
                           {"blas_kernel_source", runtime.blas_kernel_source},
                           {"cpu_kernels", to_string(config.train.cpu_kernels)},
                           // Empty when LibTorch's ops (the BLAS above) do the matrix products.
                           {"gemm", runtime.gemm},
                           {"torch_version", runtime.torch_version},
                           {"cpu", runtime.cpu_model},
                           {"mem_total_bytes", total_memory_bytes()},
                           // Joins the CUPTI probe's gpu records (Unix time) with this stream's t.
                           {"unix_time", unix_time_s()}};
  fields["precision"] = to_string(config.train.precision);
  if (!determinism.is_null()) fields["determinism"] = determinism;
  metrics.write("event", std::move(fields));
}

void write_step_record(MetricsWriter& metrics, const StepRecord& r) {
  const MemoryFigures memory =
      r.memory.value_or(MemoryFigures{resident_bytes(), total_memory_bytes(), std::nullopt});
  nlohmann::json fields = {{"step", r.step},
                           {"loss", number(r.loss)},
                           {"grad_norm", number(r.grad_norm)},
                           {"lr", number(r.lr)},
                           {"step_ms", std::round(r.step_ms * 1000) / 1000},
                           {"data_ms", std::round(r.data_ms * 1000) / 1000},
                           {"comm_ms", std::round(r.comm_ms * 1000) / 1000},
                           {"cpu_ms", std::round(r.cpu_ms * 1000) / 1000},
                           {"tokens", r.tokens},
                           {"mem_bytes", memory.used_bytes},
                           {"mem_total_bytes", memory.total_bytes},
                           {"nonfinite", r.nonfinite},
                           {"collectives", r.collectives}};
  if (memory.peak_allocated_bytes) fields["mem_peak_bytes"] = *memory.peak_allocated_bytes;
  if (r.param_norm) fields["param_norm"] = number(*r.param_norm);
  if (r.update_ratio) fields["update_ratio"] = number(*r.update_ratio);
  metrics.write("step", std::move(fields));
}

int64_t count_nonfinite_state(FlatParams& params, double loss) {
  return probes::count_nonfinite(params.grads()) + probes::count_nonfinite(params.values()) +
         (std::isfinite(loss) ? 0 : 1);
}

void report_nonfinite(MetricsWriter& metrics, int64_t step, double loss, FlatParams& params,
                      const NonfiniteFindings& findings, const BatchLoader& loader,
                      bool before_update) {
  nlohmann::json record = {
      {"step", step}, {"kind", "nonfinite"}, {"samples", nullptr}, {"shards", nullptr}};
  if (findings.forward) {
    record["phase"] = to_string(AnomalyPhase::Forward);
    record["where"] = findings.forward->where;
    record["detail"] = std::to_string(findings.forward->nonfinite) + " non-finite values in output";
    record["probe"] = to_string(AnomalyProbe::Full);
    if (findings.forward_samples && !findings.forward->rows.empty()) {
      nlohmann::json samples = nlohmann::json::array(), shards = nlohmann::json::array();
      for (int64_t row : findings.forward->rows) {
        uint64_t sample = findings.forward_samples->at(static_cast<size_t>(row));
        samples.push_back(sample);
        shards.push_back(loader.shard_of(sample));
      }
      record["samples"] = samples;
      record["shards"] = shards;
    }
    if (findings.backward) record["first_grad"] = findings.backward->where;
  } else if (findings.backward) {
    record["phase"] = to_string(AnomalyPhase::Backward);
    record["where"] = findings.backward->where;
    record["detail"] = std::to_string(findings.backward->nonfinite) + " non-finite gradient values";
    record["probe"] = to_string(AnomalyProbe::Full);
  } else if (before_update && !std::isfinite(loss)) {
    record["phase"] = to_string(AnomalyPhase::Loss);
    record["where"] = "loss";
    record["detail"] = std::string("loss is ") +
                       (std::isnan(loss) ? "nan"
                        : loss > 0       ? "inf"
                                         : "-inf") +
                       "; replay the step with probe.level = \"full\" to name the module";
    record["probe"] = to_string(AnomalyProbe::Cheap);
  } else if (before_update) {
    record["phase"] = to_string(AnomalyPhase::Backward);
    record["where"] = first_nonfinite_param(params, params.grads());
    record["detail"] = "non-finite gradient norm with a finite loss";
    record["probe"] = to_string(AnomalyProbe::Cheap);
  } else {
    record["phase"] = to_string(AnomalyPhase::Optimizer);
    record["where"] = first_nonfinite_param(params, params.values());
    record["detail"] = "parameters became non-finite in the update";
    record["probe"] = to_string(AnomalyProbe::Cheap);
  }
  metrics.write("anomaly", record);
}

void report_token_anomaly(MetricsWriter& metrics, int64_t step, const TokenAnomaly& anomaly,
                          int64_t vocab_size) {
  metrics.write("anomaly",
                {{"step", step},
                 {"kind", "data"},
                 {"phase", to_string(AnomalyPhase::Data)},
                 {"where", anomaly.shard},
                 {"samples", {anomaly.sample}},
                 {"shards", {anomaly.shard}},
                 {"detail", "token id " + std::to_string(anomaly.token) + " at offset " +
                                std::to_string(anomaly.offset) + " of shard " + anomaly.shard +
                                " is not below model.vocab_size " + std::to_string(vocab_size)}});
}

}  // namespace faultline::trainer
