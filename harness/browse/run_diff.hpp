// `faultline diff RUN RUN`: how two stored runs differ: the keys of their resolved configs, and
// the first step record (by step, then rank) whose values are not the same bits.
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

}  // namespace faultline::harness
