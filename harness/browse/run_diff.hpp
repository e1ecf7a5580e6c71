// `faultline diff RUN RUN`: how two stored runs differ: the keys of their resolved configs, and
// the first step record (by step, then rank) of the steps both have whose values are not the
// same bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::harness {

struct KeyChange {
  std::string key;
  std::optional<std::string> a, b;  // TOML literals; nullopt: the run has no such key
};

// The keys whose values differ, sorted by key; from two canonical config texts.
std::vector<KeyChange> config_changes(const std::string& canonical_a,
                                      const std::string& canonical_b);

struct RecordDifference {
  int64_t step = 0;
  int rank = 0;
  std::string field;  // "loss", ...; "record" when only one run has the step
  std::string a, b;   // the values as export writes them; "-" for a missing record
};

// The first (step, rank) where the records differ in a value the run computes (loss, grad_norm,
// lr, param_norm, update_ratio, tokens, nonfinite); timings always differ and are not compared.
std::optional<RecordDifference> first_difference(std::vector<StepRecord> a,
                                                 std::vector<StepRecord> b);

struct StepSpan {
  int64_t first = 0, last = 0;
  bool operator==(const StepSpan& other) const {
    return first == other.first && last == other.last;
  }
};

// Two runs' records compared over the steps both have: a replay from a checkpoint against the
// run it came from (steps 101..150 of 1..150), or a prefix against the whole run. A record one
// run lacks inside those steps (a rank's) is still a difference.
struct RecordComparison {
  std::optional<StepSpan> a, b;    // each run's lowest and highest step; nullopt: no records
  std::optional<StepSpan> common;  // the steps compared; nullopt: none in common
  int64_t compared = 0;            // records of run a compared
  std::optional<RecordDifference> difference;  // the first in `common`
};
RecordComparison compare_records(const std::vector<StepRecord>& a,
                                 const std::vector<StepRecord>& b);

// The parts of `span` outside `common` (before it, after it): what one run has beyond the other.
std::vector<StepSpan> outside(const StepSpan& span, const StepSpan& common);

}  // namespace faultline::harness
