// The `gpu` record of the metrics protocol (docs/metrics-protocol.md) as the CUPTI probe writes
// it, and where it writes it. Pure C++ without dependencies: the probe is injected into any
// CUDA program, so it carries nothing that program might lack.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpu/timeline/activity_timeline.hpp"

namespace faultline::gpu {

// The probe's clocks: activity times are CUPTI's (ns); `unix_offset_ns` turns them into Unix
// time (ns) and `origin_ns` (a CUPTI time) is the probe's start, the origin of `t`.
struct RecordClock {
  int64_t unix_offset_ns = 0;
  uint64_t origin_ns = 0;
};

// One JSONL line (with its newline) for one interval of one device.
std::string gpu_record_line(const IntervalFigures& figures, int rank, const RecordClock& clock);

// The file the probe appends to: `<metrics>.gpu.jsonl` next to the rank's metrics file, with a
// `{rank}` placeholder in `metrics` replaced by `rank` (torchrun-style launches); `<fallback_dir>/
// faultline-gpu.rank<R>.jsonl` without a metrics file. `explicit_path` (FAULTLINE_CUPTI_OUT) wins.
std::string gpu_records_path(const std::optional<std::string>& explicit_path,
                             const std::optional<std::string>& metrics, int rank,
                             const std::string& fallback_dir);

// A positive integer from an environment value, or `fallback` when absent or invalid.
int64_t env_integer(const char* value, int64_t fallback);

}  // namespace faultline::gpu
