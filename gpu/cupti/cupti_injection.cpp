// libfaultline_cupti.so: a CUPTI injection library (CUDA_INJECTION64_PATH). The CUDA driver
// calls InitializeInjection in any CUDA program; from then on kernel, NCCL-kernel and memcpy
// activity is bucketed into short intervals and written as `gpu` records (gpu/timeline).
#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/timeline/activity_timeline.hpp"
#include "gpu/timeline/gpu_record.hpp"

namespace {

using faultline::gpu::Activity;
using faultline::gpu::ActivityKind;

constexpr size_t kBufferBytes = 4 << 20;
constexpr size_t kAlign = 8;

// Everything the probe keeps: one per process, created once by InitializeInjection.
struct Probe {
  explicit Probe(uint64_t interval_ns) : timeline(interval_ns) {}
  std::mutex mutex;  // CUPTI's worker thread and the exit handler both deliver buffers
  faultline::gpu::Timeline timeline;
  faultline::gpu::RecordClock clock;
  uint64_t lag_ns = 0;
  int rank = 0;
  FILE* out = nullptr;
  bool finished = false;
};
Probe* probe = nullptr;

void warn(const char* what, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "faultline-cupti: %s failed: %s\n", what, text ? text : "?");
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

void write(const std::vector<faultline::gpu::IntervalFigures>& intervals) {
  if (!probe->out) return;
  for (const auto& figures : intervals) {
    // One fwrite per line on an O_APPEND stream flushed at once: a tailing reader sees whole lines.
    const std::string line = faultline::gpu::gpu_record_line(figures, probe->rank, probe->clock);
    std::fwrite(line.data(), 1, line.size(), probe->out);
    std::fflush(probe->out);
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(probe->mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      probe->timeline.add({faultline::gpu::classify_kernel(kernel->name ? kernel->name : ""),
                           kernel->deviceId, kernel->start, kernel->end});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      probe->timeline.add({ActivityKind::Memcpy, copy->deviceId, copy->start, copy->end});
    }
  }
  std::free(buffer);
  if (probe->finished) return;
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  // Kernels finish out of order across streams and arrive with the next flush: an interval is
  // written once the flush after its end has surely delivered them.
  write(probe->timeline.take_closed(now > probe->lag_ns ? now - probe->lag_ns : 0));
}

void finish() {
  if (!probe) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(probe->mutex);
  write(probe->timeline.take_all());
  probe->finished = true;
  if (probe->out) std::fclose(probe->out);
  probe->out = nullptr;
}

int64_t unix_offset_ns() {
  uint64_t cupti_ns = 0;
  cuptiGetTimestamp(&cupti_ns);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t unix_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  return unix_ns - static_cast<int64_t>(cupti_ns);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (probe) return 1;
  const int64_t interval_ms =
      faultline::gpu::env_integer(std::getenv("FAULTLINE_CUPTI_INTERVAL_MS"), 100);
  const int64_t flush_ms = faultline::gpu::env_integer(std::getenv("FAULTLINE_CUPTI_FLUSH_MS"),
                                                       std::max<int64_t>(interval_ms, 100));
  probe = new Probe(static_cast<uint64_t>(interval_ms) * 1000000);
  probe->lag_ns = static_cast<uint64_t>(2 * flush_ms) * 1000000;
  probe->rank = static_cast<int>(faultline::gpu::env_integer(std::getenv("RANK"), 0));
  char cwd[4096] = ".";
  if (!getcwd(cwd, sizeof cwd)) std::strcpy(cwd, ".");
  const std::string path = faultline::gpu::gpu_records_path(
      env("FAULTLINE_CUPTI_OUT"), env("FAULTLINE_METRICS"), probe->rank, cwd);
  probe->out = std::fopen(path.c_str(), "a");
  if (!probe->out) {
    std::fprintf(stderr, "faultline-cupti: cannot open %s; no gpu records\n", path.c_str());
    return 1;  // the program itself must run on
  }
  probe->clock.unix_offset_ns = unix_offset_ns();
  cuptiGetTimestamp(&probe->clock.origin_ns);

  if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
      r != CUPTI_SUCCESS) {
    warn("cuptiActivityRegisterCallbacks", r);
    return 1;
  }
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY})
    if (CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS)
      warn("cuptiActivityEnable", r);
  cuptiActivityFlushPeriod(static_cast<uint32_t>(flush_ms));
  std::atexit(finish);
  return 1;
}
