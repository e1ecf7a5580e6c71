// The trainer's metrics records (docs/metrics-protocol.md): start event, step records, and the
// anomaly records for non-finite steps and out-of-vocabulary tokens.
#pragma once

#include <optional>
#include <vector>

#include "probes/inprocess/finite_checks.hpp"
#include "trainer/batch_loader.hpp"
#include "trainer/device.hpp"
#include "trainer/dist.hpp"
#include "trainer/flat_params.hpp"
#include "trainer/metrics_writer.hpp"
#include "trainer/runtime_info.hpp"
#include "trainer/train_config.hpp"

namespace faultline::trainer {

struct StepRecord {
  int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0, step_ms = 0, data_ms = 0, comm_ms = 0;
  double cpu_ms = 0;  // training thread's CPU time in the step, outside data_ms and comm_ms
  int64_t tokens = 0;
  std::optional<double> param_norm, update_ratio;  // absent with probe.level = "off"
  int64_t nonfinite = 0;
  int64_t collectives = 0;
  std::optional<MemoryFigures> memory;  // absent: this process's RSS and the machine's memory
};

void write_start_event(MetricsWriter& metrics, const TrainConfig& config, const RankEnv& env,
                       const RuntimeInfo& runtime, int64_t parameters, uint64_t samples,
                       const char* backend, int64_t first_step,
                       const nlohmann::json& determinism = nullptr);

void write_step_record(MetricsWriter& metrics, const StepRecord& record);

// What the full probes saw in a non-finite step (empty with cheap probes).
struct NonfiniteFindings {
  const std::optional<probes::NonfiniteSite>& forward;
  const std::optional<probes::NonfiniteSite>& backward;
  const std::vector<uint64_t>* forward_samples;  // samples of the micro-batch forward failed in
};

// Non-finite elements in grads and params (+1 for a non-finite loss): only counted on bad steps.
int64_t count_nonfinite_state(FlatParams& params, double loss);

// One anomaly record naming phase, module or parameter, and samples/shards when known.
void report_nonfinite(MetricsWriter& metrics, int64_t step, double loss, FlatParams& params,
                      const NonfiniteFindings& findings, const BatchLoader& loader,
                      bool before_update);

void report_token_anomaly(MetricsWriter& metrics, int64_t step, const TokenAnomaly& anomaly,
                          int64_t vocab_size);

}  // namespace faultline::trainer
