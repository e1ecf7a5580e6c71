// How a failure reads in a report's headline (headline.hpp).
#include "report/headline.hpp"

#include <fmt/format.h>

#include "probes/detectors/failure_kind.hpp"

namespace faultline::report {

FailureSpan span_of(const store::RunFailure& failure) {
  return failure.shown_by > failure.step ? FailureSpan::Steps : FailureSpan::OneStep;
}

std::string what_happened(const std::string& kind_name, FailureSpan span) {
  using detectors::FailureKind;
  const auto kind = detectors::parse_failure_kind(kind_name);
  if (!kind) return "Failure '" + kind_name + "'";
  switch (*kind) {
    case FailureKind::Nonfinite:
      // Dated by a run of skipped steps, it is a loss scaler that found no scale that works:
      // each overflow was handled, and no step holds a NaN the model made.
      return span == FailureSpan::Steps ? "The fp16 loss scale collapsed"
                                        : "Training went non-finite (NaN/Inf)";
    case FailureKind::Data:
      return "A token id fell outside the vocabulary";
    case FailureKind::LossSpike:
      return "The loss spiked";
    case FailureKind::Stalled:
      return "The loss stopped decreasing";
    case FailureKind::GradExplode:
      return "The gradient norm exploded";
    case FailureKind::GradVanish:
      return "The gradients vanished";
    case FailureKind::LrAnomaly:
      return "The learning rate left its schedule";
    case FailureKind::Memory:
      return "Memory use ran too high";
    case FailureKind::Slow:
      return "Training slowed down";
    case FailureKind::Straggler:
      return "A rank straggled";
    case FailureKind::DataStall:
      return "Data loading stalled";
    case FailureKind::RankDivergence:
      return "The ranks disagreed";
    case FailureKind::Nondeterministic:
      return "Identical runs gave different results";
    case FailureKind::Crash:
      return "The trainer crashed";
    case FailureKind::Hang:
      return "Training hung";
    case FailureKind::Oom:
      return "Training ran out of memory";
    case FailureKind::Anomaly:
      return "The trainer reported an anomaly";
    case FailureKind::LossRegression:
      return "The loss fell behind its reference";
    case FailureKind::BadInit:
      return "The first loss was far above ln(vocabulary)";
    case FailureKind::SlowComm:
      return "One rank's NCCL kernels ran far longer than its peers'";
    case FailureKind::TeardownCrash:
      return "A rank died as it shut down, after training ended";
  }
  return kind_name;
}

std::optional<std::string> rank_as_subject(const std::string& kind_name, int64_t rank) {
  // "A rank straggled on rank 1" would say the rank twice.
  if (detectors::parse_failure_kind(kind_name) == detectors::FailureKind::Straggler)
    return fmt::format("Rank {} straggled", rank);
  return std::nullopt;
}

}  // namespace faultline::report
