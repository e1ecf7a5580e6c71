// One Failure per kind: the earliest, best-evidenced sighting wins.
#include "probes/detectors/failure.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

namespace faultline::detectors {

namespace {
int64_t step_order(int64_t step) {
  return step < 0 ? std::numeric_limits<int64_t>::max() : step;
}
}  // namespace

bool any_failing(const std::vector<Failure>& failures) {
  for (const auto& failure : failures)
    if (severity(failure.kind) == Severity::Failure) return true;
  return false;
}

void order_for_report(std::vector<Failure>& failures) {
  auto key = [](const Failure& f) {
    return std::make_tuple(severity(f.kind) == Severity::Warning, step_order(f.step), f.kind);
  };
  std::stable_sort(failures.begin(), failures.end(),
                   [&](const Failure& a, const Failure& b) { return key(a) < key(b); });
}

bool is_fatal(const Failure& failure) {
  // The trainer halts on both itself; the harness should not wait for the records to stop.
  return failure.kind == FailureKind::Nonfinite || failure.kind == FailureKind::Data;
}

void Findings::offer(Failure failure, int priority) {
  auto it = best_.find(failure.kind);
  if (it != best_.end()) {
    const Failure& held = it->second.failure;
    auto key = [](const Failure& f, int p) {
      return std::make_tuple(step_order(f.step), p, f.rank);
    };
    if (!(key(failure, priority) < key(held, it->second.priority))) return;
  }
  const FailureKind kind = failure.kind;
  best_[kind] = Entry{std::move(failure), priority};
}

void Findings::merge(const Findings& other) {
  for (const auto& [kind, entry] : other.best_) offer(entry.failure, entry.priority);
}

std::vector<Failure> Findings::sorted() const {
  std::vector<Failure> out;
  for (const auto& [kind, entry] : best_) out.push_back(entry.failure);
  std::stable_sort(out.begin(), out.end(), [](const Failure& a, const Failure& b) {
    return std::make_tuple(step_order(a.step), a.kind) <
           std::make_tuple(step_order(b.step), b.kind);
  });
  return out;
}

}  // namespace faultline::detectors
