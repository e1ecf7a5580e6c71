// slow and nondeterministic: judgements over two runs rather than one stream.
#include "probes/detectors/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>

#include "common/text.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

uint64_t bits(double value) {
  uint64_t out = 0;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

// Every digit: two values that differ in the last bit must not print alike.
std::string exact(double value) {
  return fmt::format("{:.17g}", value);
}

void compare_field(const char* name, double a, double b, std::vector<std::string>& out) {
  if (bits(a) != bits(b)) out.push_back(std::string(name) + " " + exact(a) + " vs " + exact(b));
}

}  // namespace

std::optional<Failure> compare_throughput(double baseline, double run, double min_ratio) {
  if (!(baseline > 0) || !(run > 0) || !std::isfinite(baseline) || !std::isfinite(run))
    return std::nullopt;
  const double ratio = run / baseline;
  if (!(ratio < min_ratio)) return std::nullopt;
  return Failure{FailureKind::Slow, -1, -1,
                 "throughput " + num(run) + " tokens/s is " + num(100 * ratio) +
                     "% of the baseline's " + num(baseline) + " tokens/s (limit " +
                     num(100 * min_ratio) + "%)"};
}

std::optional<Failure> compare_runs(const std::vector<StepRecord>& run_a,
                                    const std::vector<StepRecord>& run_b) {
  std::map<std::pair<int64_t, int>, const StepRecord*> b_at;  // (step, rank): first by step
  for (const auto& record : run_b) b_at.emplace(std::make_pair(record.step, record.rank), &record);
  std::optional<std::pair<int64_t, int>> first;
  std::vector<std::string> differences;
  for (const auto& a : run_a) {
    auto key = std::make_pair(a.step, a.rank);
    if (first && !(key < *first)) continue;
    auto it = b_at.find(key);
    if (it == b_at.end()) continue;
    const StepRecord& b = *it->second;
    std::vector<std::string> found;
    compare_field("loss", a.loss, b.loss, found);
    compare_field("grad_norm", a.grad_norm, b.grad_norm, found);
    compare_field("lr", a.lr, b.lr, found);
    if (a.param_norm && b.param_norm)
      compare_field("param_norm", *a.param_norm, *b.param_norm, found);
    else if (a.param_norm.has_value() != b.param_norm.has_value())
      found.push_back("param_norm reported by one run only");
    if (found.empty()) continue;
    first = key;
    differences = std::move(found);
  }
  if (!first) return std::nullopt;
  return Failure{FailureKind::Nondeterministic, first->first, first->second,
                 "runs of the same spec differ first at step " + std::to_string(first->first) +
                     " on rank " + std::to_string(first->second) + ": " +
                     fmt::format("{}", fmt::join(differences, "; "))};
}

}  // namespace faultline::detectors
