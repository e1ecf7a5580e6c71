// The GPU's side of a run for its report: the stored CUPTI gpu records joined with its steps
// (probes/detectors/gpu_time.hpp), drawn per step and summed up per rank.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "probes/detectors/gpu_time.hpp"
#include "report/report_model.hpp"
#include "store/store.hpp"

namespace faultline::report {

// Every step of the run that its ranks' gpu records cover (a run without them: none). Each
// rank's steps are placed in Unix time through its start event; a rank restarted in one run
// (an imported requeued job) is placed through its last start.
struct GpuSteps {
  std::vector<detectors::StepGpuTime> steps;
  // Per rank with any: activities its probe dropped because they came after their interval was
  // written (the records' `late`): the figures of the steps there undercount.
  std::map<int, int64_t> dropped;
};
GpuSteps stored_gpu_steps(const store::Store& store, int64_t run_id);

// Compute, NCCL and idle ms per step, a line per rank and part. Nothing joined: no plot.
std::optional<Plot> gpu_time_plot(const std::vector<detectors::StepGpuTime>& steps);

// Per rank, the medians over its joined steps: step, compute, NCCL and idle ms, the idle ms while
// its data loaded, and how much of the step the records covered; and, when any rank has some,
// the activities each rank's probe dropped.
Table gpu_time_table(const std::vector<detectors::StepGpuTime>& steps,
                     const std::map<int, int64_t>& dropped = {});

// The whole run's split of the GPU's time over its joined steps (all ranks): what `show` prints.
struct GpuShares {
  int64_t steps = 0;                       // joined steps, all ranks
  double compute = 0, nccl = 0, idle = 0;  // shares of the covered time, 0..1
};
std::optional<GpuShares> gpu_shares(const std::vector<detectors::StepGpuTime>& steps);

// The plot and the table, for the run's report: the plot after the step-time plot; a note when
// the probe dropped activities.
void add_gpu_time(Report& report, const store::Store& store, int64_t run_id);

}  // namespace faultline::report
