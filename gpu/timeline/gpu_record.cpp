// Formats `gpu` records with snprintf (no JSON library: see the header) and names their file.
#include "gpu/timeline/gpu_record.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace faultline::gpu {

std::string gpu_record_line(const IntervalFigures& f, int rank, const RecordClock& clock) {
  const double t = static_cast<double>(f.end_ns - std::min(f.end_ns, clock.origin_ns)) / 1e9;
  const auto unix_s = [&](uint64_t ns) {
    return static_cast<double>(static_cast<int64_t>(ns) + clock.unix_offset_ns) / 1e9;
  };
  char line[640];
  std::snprintf(line, sizeof line,
                "{\"v\":1,\"type\":\"gpu\",\"rank\":%d,\"t\":%.6f,\"device\":%u,"
                "\"unix_t0\":%.6f,\"unix_t1\":%.6f,\"busy_ms\":%.4f,\"compute_ms\":%.4f,"
                "\"nccl_ms\":%.4f,\"overlap_ms\":%.4f,\"memcpy_ms\":%.4f,\"idle_ms\":%.4f,"
                "\"max_gap_ms\":%.4f,\"kernels\":%" PRId64 ",\"nccl_kernels\":%" PRId64
                ",\"memcpys\":%" PRId64 ",\"late\":%" PRId64 "}\n",
                rank, t, f.device, unix_s(f.start_ns), unix_s(f.end_ns), f.busy_ms, f.compute_ms,
                f.nccl_ms, f.overlap_ms, f.memcpy_ms, f.idle_ms, f.max_gap_ms, f.kernels,
                f.nccl_kernels, f.memcpys, f.late);
  return line;
}

std::string gpu_records_path(const std::optional<std::string>& explicit_path,
                             const std::optional<std::string>& metrics, int rank,
                             const std::string& fallback_dir) {
  if (explicit_path && !explicit_path->empty()) return *explicit_path;
  if (!metrics || metrics->empty())
    return fallback_dir + "/faultline-gpu.rank" + std::to_string(rank) + ".jsonl";
  std::string path = *metrics;
  const std::string placeholder = "{rank}";
  for (auto at = path.find(placeholder); at != std::string::npos; at = path.find(placeholder))
    path.replace(at, placeholder.size(), std::to_string(rank));
  return path + ".gpu.jsonl";
}

int64_t env_integer(const char* value, int64_t fallback) {
  if (!value || !*value) return fallback;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  return (*end == '\0' && parsed > 0) ? parsed : fallback;
}

}  // namespace faultline::gpu
