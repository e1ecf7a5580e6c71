// Test predicates over subsets for ddmin, shared by its unit tests and the localization_cost
// benchmark so both count evaluations on the same cases.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "bisect/ddmin.hpp"

namespace faultline::testing {

using bisect::Observation;
using bisect::Subset;
using SubsetTest = std::function<Observation(const Subset&)>;

inline bool has(const Subset& subset, size_t item) {
  return std::binary_search(subset.begin(), subset.end(), item);
}

// Monotone: fails iff every culprit is present.
inline SubsetTest fails_with_all_of(Subset culprits) {
  return [culprits](const Subset& subset) {
    for (size_t item : culprits)
      if (!has(subset, item)) return Observation::Good;
    return Observation::Bad;
  };
}

// Zeller & Hildebrandt's example: items 1..8 (here 0..7) fail iff 5 and 8 are present, unless 7
// is present while 2 is absent. Not monotone; ddmin's answer is {5, 8}.
inline Observation zeller_example(const Subset& subset) {
  const bool five = has(subset, 4), eight = has(subset, 7);
  const bool seven = has(subset, 6), two = has(subset, 1);
  return five && eight && !(seven && !two) ? Observation::Bad : Observation::Good;
}

// Not monotone: a fixed pseudo-random fraction of subsets fails (the full set always does).
inline SubsetTest fails_by_hash(size_t items, uint64_t seed, uint64_t one_in) {
  return [=](const Subset& subset) {
    if (subset.size() == items) return Observation::Bad;
    uint64_t hash = seed * 0x9E3779B97F4A7C15ull + subset.size();
    for (size_t item : subset) hash = (hash ^ (item + 1)) * 0x100000001B3ull;
    return hash % one_in == 0 ? Observation::Bad : Observation::Good;
  };
}

}  // namespace faultline::testing
