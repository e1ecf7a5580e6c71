// A synthetic run with CUPTI gpu records, for the GPU detector tests: per rank a start event with
// its unix_time, 100 ms steps whose first data_ms the GPU is idle, and 25 ms gpu intervals.
#pragma once

#include <string>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::testing {

struct GpuRun {
  std::vector<EventRecord> starts;
  std::vector<StepRecord> steps;
  std::vector<GpuRecord> gpu;
};

// data_ms: a multiple of 25; nccl_ms[rank] <= 25: NCCL time in the step's last interval.
inline GpuRun gpu_run(int steps, double data_ms, const std::vector<double>& nccl_ms) {
  GpuRun run;
  const double unix0 = 1.7e9, step_s = 0.1, slice_s = 0.025;
  for (int rank = 0; rank < static_cast<int>(nccl_ms.size()); ++rank) {
    // Ranks start at different instants; each one's t counts from its own start.
    const double unix_start = unix0 + 0.37 * rank;
    run.starts.push_back({rank, 0.0, "start", std::nullopt,
                          R"({"v":1,"type":"event","name":"start","rank":)" + std::to_string(rank) +
                              R"(,"t":0,"unix_time":)" + std::to_string(unix_start) + "}"});
    for (int s = 1; s <= steps; ++s) {
      StepRecord step;
      step.rank = rank;
      step.step = s;
      step.t = s * step_s;
      step.step_ms = 100;
      step.data_ms = data_ms;
      step.loss = 3.0;  // a flat, healthy loss: only the GPU's figures are in question
      step.grad_norm = 1.0;
      step.has_lr = false;
      run.steps.push_back(step);
      for (int slice = 0; slice < 4; ++slice) {
        GpuRecord gpu;
        gpu.rank = rank;
        gpu.unix_t0 = unix_start + (s - 1) * step_s + slice * slice_s;
        gpu.unix_t1 = gpu.unix_t0 + slice_s;
        const bool in_data = (slice + 1) * 25 <= data_ms;
        gpu.nccl_ms = (!in_data && slice == 3) ? nccl_ms[static_cast<size_t>(rank)] : 0;
        gpu.compute_ms = in_data ? 0 : 25 - gpu.nccl_ms;
        gpu.busy_ms = gpu.compute_ms + gpu.nccl_ms;
        gpu.idle_ms = 25 - gpu.busy_ms;
        run.gpu.push_back(gpu);
      }
    }
  }
  return run;
}

}  // namespace faultline::testing
