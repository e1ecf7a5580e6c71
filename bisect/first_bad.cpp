// FirstBad: bisection for the first bad candidate of a monotone predicate, with skips routed
// around by probing outward from the midpoint, and k-way rounds.
#include "bisect/first_bad.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace faultline::bisect {
namespace {

const char* to_string(LastCandidate last) {
  return last == LastCandidate::KnownBad ? "known_bad" : "unknown";
}
const char* to_string(BeforeFirst before) {
  return before == BeforeFirst::KnownGood ? "known_good" : "unknown";
}

LastCandidate parse_last_candidate(const std::string& text) {
  if (text == "known_bad") return LastCandidate::KnownBad;
  if (text == "unknown") return LastCandidate::Unknown;
  throw std::invalid_argument("FirstBad state: unknown last_candidate '" + text + "'");
}
BeforeFirst parse_before_first(const std::string& text) {
  if (text == "known_good") return BeforeFirst::KnownGood;
  if (text == "unknown") return BeforeFirst::Unknown;
  throw std::invalid_argument("FirstBad state: unknown before_first '" + text + "'");
}

}  // namespace

FirstBad::FirstBad(size_t candidate_count, FirstBadOptions options)
    : candidate_count_(candidate_count), options_(options) {
  if (candidate_count == 0) throw std::invalid_argument("FirstBad: an axis needs >= 1 candidate");
  const auto n = static_cast<int64_t>(candidate_count);
  first_bad_ = options.last_candidate == LastCandidate::KnownBad ? n - 1 : n;
}

bool FirstBad::pending_inside_open_range() const {
  const auto it = pending_.lower_bound(static_cast<size_t>(open_begin()));
  return it != pending_.end() && static_cast<int64_t>(*it) < first_bad_;
}

// The free candidate nearest to `target` inside the open range, trying target, +1, -1, +2, -2...
// so that a cluster of skips around the midpoint costs no extra round: the probe lands just
// beside it and the split stays near-even.
std::optional<size_t> FirstBad::nearest_unobserved(int64_t target,
                                                   const std::set<size_t>& taken) const {
  const int64_t low = open_begin(), high = first_bad_ - 1;
  if (low > high) return std::nullopt;
  target = std::clamp(target, low, high);
  auto is_free = [&](int64_t point) {
    const auto index = static_cast<size_t>(point);
    return observed_.count(index) == 0 && pending_.count(index) == 0 && taken.count(index) == 0;
  };
  for (int64_t offset = 0; offset <= high - low; ++offset) {
    if (target + offset <= high && is_free(target + offset))
      return static_cast<size_t>(target + offset);
    if (offset > 0 && target - offset >= low && is_free(target - offset))
      return static_cast<size_t>(target - offset);
  }
  return std::nullopt;
}

std::vector<size_t> FirstBad::next(size_t slots) {
  if (slots == 0 || done() || pending_inside_open_range()) return {};
  // `span` counts the possible answers: every open candidate, plus first_bad_ itself.
  const int64_t span = first_bad_ - last_good_;
  const auto parts = static_cast<int64_t>(std::min<size_t>(slots, static_cast<size_t>(span))) + 1;
  std::set<size_t> chosen;
  for (int64_t part = 1; part < parts; ++part) {
    const auto point = nearest_unobserved(last_good_ + part * span / parts, chosen);
    if (!point) break;
    chosen.insert(*point);
  }
  pending_.insert(chosen.begin(), chosen.end());
  return {chosen.begin(), chosen.end()};
}

void FirstBad::observe(size_t candidate, Observation observation) {
  if (candidate >= candidate_count_)
    throw std::invalid_argument("FirstBad: candidate " + std::to_string(candidate) +
                                " is outside the axis of " + std::to_string(candidate_count_));
  if (const auto known = observed_.find(candidate); known != observed_.end()) {
    if (known->second == observation) return;
    throw std::logic_error("FirstBad: candidate " + std::to_string(candidate) + " observed " +
                           to_string(known->second) + " and now " + to_string(observation));
  }
  if (pending_.count(candidate) == 0)
    throw std::logic_error("FirstBad: candidate " + std::to_string(candidate) +
                           " was never proposed");
  record(candidate, observation);
  pending_.erase(candidate);
}

// Validates monotonicity before changing anything, so a throw leaves the search as it was.
void FirstBad::record(size_t candidate, Observation observation) {
  const auto point = static_cast<int64_t>(candidate);
  if (observation == Observation::Good && point >= first_bad_)
    throw std::invalid_argument("FirstBad: candidate " + std::to_string(candidate) +
                                " is good but candidate " + std::to_string(first_bad_) +
                                " is bad: the predicate is not monotone (a flake? vote on it)");
  if (observation == Observation::Bad && point <= last_good_)
    throw std::invalid_argument("FirstBad: candidate " + std::to_string(candidate) +
                                " is bad but candidate " + std::to_string(last_good_) +
                                " is good: the predicate is not monotone (a flake? vote on it)");
  observed_[candidate] = observation;
  if (observation == Observation::Good) last_good_ = std::max(last_good_, point);
  if (observation == Observation::Bad) first_bad_ = std::min(first_bad_, point);
}

// Done when everything strictly between the last good and the first bad was skipped (or there
// is nothing between them). Only skips can be observed inside that range.
bool FirstBad::done() const {
  const auto begin = observed_.lower_bound(static_cast<size_t>(open_begin()));
  const auto end = observed_.lower_bound(static_cast<size_t>(first_bad_));
  return std::distance(begin, end) == first_bad_ - open_begin();
}

FirstBadResult FirstBad::result() const {
  const auto n = static_cast<int64_t>(candidate_count_);
  FirstBadResult result;
  const bool good_below = last_good_ >= 0 || options_.before_first == BeforeFirst::KnownGood;
  result.lower_edge = good_below ? Observation::Good : Observation::Skip;
  result.upper_edge = first_bad_ < n ? Observation::Bad : Observation::Skip;
  result.range_begin = static_cast<size_t>(open_begin());
  result.range_end = static_cast<size_t>(std::min(first_bad_ + 1, n));
  if (!done()) return result;
  if (first_bad_ < n && first_bad_ == open_begin()) {
    result.outcome = FirstBadOutcome::Exact;
    result.first_bad = static_cast<size_t>(first_bad_);
  } else if (first_bad_ == n && last_good_ == n - 1) {
    result.outcome = FirstBadOutcome::None;
  }
  return result;
}

nlohmann::json FirstBad::to_json() const {
  nlohmann::json state = {{"search", "first_bad"},
                          {"version", 1},
                          {"candidates", candidate_count_},
                          {"last_candidate", to_string(options_.last_candidate)},
                          {"before_first", to_string(options_.before_first)},
                          {"good", nlohmann::json::array()},
                          {"bad", nlohmann::json::array()},
                          {"skip", nlohmann::json::array()}};
  for (const auto& [candidate, observation] : observed_)
    state[to_string(observation)].push_back(candidate);
  return state;
}

FirstBad FirstBad::from_json(const nlohmann::json& state) {
  try {
    if (state.at("search") != "first_bad" || state.at("version") != 1)
      throw std::invalid_argument("FirstBad state: not a version-1 first_bad state");
    FirstBadOptions options;
    options.last_candidate = parse_last_candidate(state.at("last_candidate").get<std::string>());
    options.before_first = parse_before_first(state.at("before_first").get<std::string>());
    FirstBad search(state.at("candidates").get<size_t>(), options);
    for (const auto observation : {Observation::Good, Observation::Bad, Observation::Skip}) {
      for (const size_t candidate : state.at(to_string(observation)).get<std::vector<size_t>>()) {
        const bool assumed_bad = options.last_candidate == LastCandidate::KnownBad &&
                                 candidate + 1 == search.candidate_count_;
        if (candidate >= search.candidate_count_ || assumed_bad ||
            search.observed_.count(candidate) != 0)
          throw std::invalid_argument("FirstBad state: bad or repeated candidate " +
                                      std::to_string(candidate));
        search.record(candidate, observation);
      }
    }
    return search;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("FirstBad state: malformed JSON: ") + error.what());
  }
}

}  // namespace faultline::bisect
