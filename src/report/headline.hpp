// How a failure reads in a report's headline: "Training went non-finite (NaN/Inf)", "A rank
// straggled", ... one phrase per failure kind, told apart where the evidence says more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/store.hpp"

namespace faultline::report {

// Whether a failure is one step's (a NaN at step 12) or dated by the first of several steps
// that show it (a loss scaler's skips, a leak): the phrase for the same kind can differ.
enum class FailureSpan { OneStep, Steps };

FailureSpan span_of(const store::RunFailure& failure);

// The phrase for a failure kind as stored ("nonfinite"); an unknown kind reads "Failure '<kind>'".
std::string what_happened(const std::string& kind_name, FailureSpan span = FailureSpan::OneStep);

// For a kind that is about one rank, the phrase with that rank as its subject ("Rank 1
// straggled"), said instead of what_happened's and then not again as "on rank 1"; nullopt for
// the other kinds, whose rank reads after the phrase.
std::optional<std::string> rank_as_subject(const std::string& kind_name, int64_t rank);

}  // namespace faultline::report
