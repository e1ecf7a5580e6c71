// From GPU activity records (kernels, NCCL kernels, memcpys with start/end times) to per-interval
// figures: busy, compute, NCCL, memcpy and idle time, the union of overlapping work. Pure C++:
// the CUPTI injection library feeds it, the unit tests feed it synthetic records.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline::gpu {

enum class ActivityKind { Compute, Nccl, Memcpy };

// NCCL's device kernels are named ncclDevKernel_* (NCCL >= 2.19) or ncclKernel_* (older), mangled
// or not; every other kernel is compute.
ActivityKind classify_kernel(std::string_view name);

struct Activity {
  ActivityKind kind = ActivityKind::Compute;
  uint32_t device = 0;
  uint64_t start_ns = 0, end_ns = 0;  // one clock for all records (CUPTI's timestamps)
};

// What one device did in [start_ns, end_ns). Times are unions: two overlapping kernels count once.
struct IntervalFigures {
  uint32_t device = 0;
  uint64_t start_ns = 0, end_ns = 0;
  double busy_ms = 0;     // anything ran: a kernel or a memcpy
  double compute_ms = 0;  // a kernel other than NCCL's ran
  double nccl_ms = 0;     // an NCCL kernel ran
  double overlap_ms = 0;  // compute and NCCL at once (communication hidden behind compute)
  double memcpy_ms = 0;   // a memcpy ran
  double idle_ms = 0;     // nothing ran: interval length - busy_ms
  double max_gap_ms = 0;  // the longest stretch with nothing running, the interval's edges included
  int64_t kernels = 0, nccl_kernels = 0, memcpys = 0;  // activities that started in the interval
  int64_t late = 0;  // records that arrived after their interval was written (counted, dropped)
};

// Union of half-open segments, in ns; the segments need not be sorted or disjoint.
uint64_t union_length(std::vector<std::pair<uint64_t, uint64_t>> segments);

// The figures of one interval from the activities that touch it (clipped to it).
IntervalFigures summarize(uint32_t device, uint64_t start_ns, uint64_t end_ns,
                          const std::vector<Activity>& activities);

// Buckets activities into fixed intervals per device as they arrive, in any order, and hands out
// the intervals a watermark has closed. Every interval from a device's first activity on is
// handed out, empty ones included: an idle GPU is what a data stall looks like.
class Timeline {
 public:
  explicit Timeline(uint64_t interval_ns) : interval_ns_(interval_ns ? interval_ns : 1) {}

  void add(const Activity& activity);
  // The intervals that end at or before `watermark_ns`, by device then time; each only once.
  std::vector<IntervalFigures> take_closed(uint64_t watermark_ns);
  // Everything still open, up to the last activity seen (at exit).
  std::vector<IntervalFigures> take_all();

 private:
  struct Device {
    uint64_t next = 0;  // index of the first interval not yet handed out
    uint64_t last = 0;  // index of the last interval any activity touched
    int64_t late = 0;
    std::map<uint64_t, std::vector<Activity>> open;  // interval index -> activities touching it
  };
  std::vector<IntervalFigures> take(uint64_t end_index_exclusive, bool all);

  uint64_t interval_ns_;
  std::map<uint32_t, Device> devices_;
};

}  // namespace faultline::gpu
