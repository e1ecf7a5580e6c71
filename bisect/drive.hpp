// The one loop that drives every search of bisect/: ask for up to `slots` proposals, have the
// caller evaluate them (the I/O is the caller's), observe the results, until the search is done
// or has nothing left it can propose.
#pragma once

#include <cstddef>
#include <utility>

namespace faultline::bisect {

// `evaluate(proposals)` returns one observation per proposal, in order, in whatever type the
// search observes (Observation, WindowOutcome). `after_batch()` runs once the batch is observed:
// the caller's chance to persist the search state.
template <class Search, class Evaluate, class AfterBatch>
void drive(Search& search, std::size_t slots, Evaluate&& evaluate, AfterBatch&& after_batch) {
  while (!search.done()) {
    auto proposals = search.next(slots);
    if (proposals.empty()) return;
    auto observations = evaluate(std::as_const(proposals));
    for (std::size_t i = 0; i < proposals.size(); ++i)
      search.observe(proposals[i], observations.at(i));
    after_batch();
  }
}

template <class Search, class Evaluate>
void drive(Search& search, std::size_t slots, Evaluate&& evaluate) {
  drive(search, slots, std::forward<Evaluate>(evaluate), [] {});
}

}  // namespace faultline::bisect
