// Interval bucketing and the union arithmetic behind the `gpu` metrics records.
#include "gpu/timeline/activity_timeline.hpp"

#include <algorithm>

namespace faultline::gpu {

namespace {

using Segments = std::vector<std::pair<uint64_t, uint64_t>>;

double ms(uint64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

// Sorted, merged copy of `segments`.
Segments merged(Segments segments) {
  std::sort(segments.begin(), segments.end());
  Segments out;
  for (const auto& [start, end] : segments) {
    if (end <= start) continue;
    if (!out.empty() && start <= out.back().second)
      out.back().second = std::max(out.back().second, end);
    else
      out.emplace_back(start, end);
  }
  return out;
}

uint64_t length(const Segments& disjoint) {
  uint64_t total = 0;
  for (const auto& [start, end] : disjoint) total += end - start;
  return total;
}

// Length of the intersection of two sorted disjoint segment lists.
uint64_t intersection(const Segments& a, const Segments& b) {
  uint64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t start = std::max(a[i].first, b[j].first);
    const uint64_t end = std::min(a[i].second, b[j].second);
    if (end > start) total += end - start;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return total;
}

}  // namespace

ActivityKind classify_kernel(std::string_view name) {
  const bool nccl = name.find("ncclDevKernel") != std::string_view::npos ||
                    name.find("ncclKernel") != std::string_view::npos;
  return nccl ? ActivityKind::Nccl : ActivityKind::Compute;
}

uint64_t union_length(Segments segments) {
  return length(merged(std::move(segments)));
}

IntervalFigures summarize(uint32_t device, uint64_t start_ns, uint64_t end_ns,
                          const std::vector<Activity>& activities) {
  IntervalFigures f;
  f.device = device;
  f.start_ns = start_ns;
  f.end_ns = end_ns;
  Segments compute, nccl, memcpy, all;
  for (const Activity& a : activities) {
    const uint64_t start = std::max(a.start_ns, start_ns), end = std::min(a.end_ns, end_ns);
    const bool starts_here = a.start_ns >= start_ns && a.start_ns < end_ns;
    if (starts_here) {
      if (a.kind == ActivityKind::Memcpy)
        ++f.memcpys;
      else
        ++f.kernels;
      if (a.kind == ActivityKind::Nccl) ++f.nccl_kernels;
    }
    if (end <= start) continue;
    Segments& kind = a.kind == ActivityKind::Compute ? compute
                     : a.kind == ActivityKind::Nccl  ? nccl
                                                     : memcpy;
    kind.emplace_back(start, end);
    all.emplace_back(start, end);
  }
  compute = merged(std::move(compute));
  nccl = merged(std::move(nccl));
  all = merged(std::move(all));
  const uint64_t busy = length(all);
  f.busy_ms = ms(busy);
  f.compute_ms = ms(length(compute));
  f.nccl_ms = ms(length(nccl));
  f.overlap_ms = ms(intersection(compute, nccl));
  f.memcpy_ms = ms(union_length(std::move(memcpy)));
  f.idle_ms = ms((end_ns - start_ns) - busy);
  uint64_t gap = 0, cursor = start_ns;
  for (const auto& [start, end] : all) {
    gap = std::max(gap, start - cursor);
    cursor = end;
  }
  f.max_gap_ms = ms(std::max(gap, end_ns - cursor));
  return f;
}

void Timeline::add(const Activity& activity) {
  const uint64_t end = std::max(activity.end_ns, activity.start_ns + 1);
  const uint64_t first = activity.start_ns / interval_ns_, last = (end - 1) / interval_ns_;
  auto [it, fresh] = devices_.try_emplace(activity.device);
  Device& d = it->second;
  if (fresh) d.next = first;
  if (first < d.next) {
    // Its interval is written already. Before the first one written, it is not late but early:
    // the device has not been seen long; such a record starts nothing new either.
    ++d.late;
    if (last < d.next) return;
  }
  for (uint64_t i = std::max(first, d.next); i <= last; ++i) d.open[i].push_back(activity);
  d.last = std::max(d.last, last);
}

std::vector<IntervalFigures> Timeline::take_closed(uint64_t watermark_ns) {
  return take(watermark_ns / interval_ns_, false);
}

std::vector<IntervalFigures> Timeline::take_all() {
  return take(0, true);
}

std::vector<IntervalFigures> Timeline::take(uint64_t end_index, bool all) {
  std::vector<IntervalFigures> out;
  for (auto& [device, d] : devices_) {
    const uint64_t stop = all ? d.last + 1 : std::min(end_index, d.last + 1);
    for (uint64_t i = d.next; i < stop; ++i) {
      auto it = d.open.find(i);
      static const std::vector<Activity> kNone;
      out.push_back(summarize(device, i * interval_ns_, (i + 1) * interval_ns_,
                              it == d.open.end() ? kNone : it->second));
      if (it != d.open.end()) d.open.erase(it);
      out.back().late = d.late;
      d.late = 0;
    }
    d.next = std::max(d.next, stop);
  }
  return out;
}

}  // namespace faultline::gpu
