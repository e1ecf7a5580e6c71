// Ddmin: Zeller's ddmin2 recursion unrolled into steps (one step = one configuration and
// granularity), so that results can arrive in any order and the state fits in JSON.
#include "bisect/ddmin.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

namespace faultline::bisect {
namespace {

const char* to_string(DdminVariant variant) {
  return variant == DdminVariant::Improved ? "improved" : "textbook";
}
const char* to_string(Monotonicity monotonicity) {
  return monotonicity == Monotonicity::Assumed ? "assumed" : "not_assumed";
}

DdminVariant parse_variant(const std::string& text) {
  if (text == "improved") return DdminVariant::Improved;
  if (text == "textbook") return DdminVariant::Textbook;
  throw std::invalid_argument("Ddmin state: unknown variant '" + text + "'");
}
Monotonicity parse_monotonicity(const std::string& text) {
  if (text == "assumed") return Monotonicity::Assumed;
  if (text == "not_assumed") return Monotonicity::NotAssumed;
  throw std::invalid_argument("Ddmin state: unknown monotonicity '" + text + "'");
}

constexpr Observation kObservations[] = {Observation::Good, Observation::Bad, Observation::Skip};

std::string describe(const Subset& subset) {
  std::string text = "{";
  for (size_t item : subset) text += (text.size() > 1 ? "," : "") + std::to_string(item);
  return text + "}";
}

}  // namespace

Ddmin::Ddmin(size_t item_count, DdminOptions options) : item_count_(item_count), options_(options) {
  if (item_count == 0) throw std::invalid_argument("Ddmin: a failing set needs >= 1 item");
  if (options.monotonicity == Monotonicity::Assumed && options.variant != DdminVariant::Improved)
    throw std::invalid_argument("Ddmin: monotonicity shortcuts need the Improved variant");
  for (size_t item = 0; item < item_count; ++item) config_.push_back(item);
  if (options_.variant == DdminVariant::Improved) {
    cache_[config_] = Observation::Bad;    // given: the full set fails
    cache_[Subset{}] = Observation::Good;  // given: the empty set passes
  }
  start_step();
  advance();
}

// Splits config_ into granularity_ contiguous near-equal parts, as Zeller does, and lists the
// tests of this step in the order ddmin2 makes them: every part, then every complement.
void Ddmin::start_step() {
  tests_.clear();
  const size_t size = config_.size(), parts = granularity_;
  if (size >= 2) {
    for (size_t part = 0; part < parts; ++part)
      tests_.emplace_back(config_.begin() + part * size / parts,
                          config_.begin() + (part + 1) * size / parts);
    // With two parts each complement is the other part: Textbook tests them again, Improved
    // does not list them at all.
    if (!(options_.variant == DdminVariant::Improved && parts == 2)) {
      for (size_t part = 0; part < parts; ++part) {
        Subset complement(config_.begin(), config_.begin() + part * size / parts);
        complement.insert(complement.end(), config_.begin() + (part + 1) * size / parts,
                          config_.end());
        tests_.push_back(std::move(complement));
      }
    }
  }
  results_.assign(tests_.size(), std::nullopt);
  proposed_.assign(tests_.size(), false);
}

std::optional<Observation> Ddmin::known_result(const Subset& subset) const {
  if (const auto hit = cache_.find(subset); hit != cache_.end()) return hit->second;
  if (options_.monotonicity == Monotonicity::Assumed) {
    for (const auto& [known, observation] : cache_) {
      const bool within = std::includes(known.begin(), known.end(), subset.begin(), subset.end());
      if (observation == Observation::Good && within) return Observation::Good;
      const bool around = std::includes(subset.begin(), subset.end(), known.begin(), known.end());
      if (observation == Observation::Bad && around) return Observation::Bad;
    }
  }
  return std::nullopt;
}

void Ddmin::resolve_from_cache() {
  if (options_.variant != DdminVariant::Improved) return;
  for (size_t test = 0; test < tests_.size(); ++test)
    if (!results_[test]) results_[test] = known_result(tests_[test]);
}

// Takes every decision the known results allow, in ddmin2's order: the first failing part
// (reduce to it, granularity 2), else the first failing complement (reduce to it, granularity
// max(n-1, 2)), else double the granularity, else done. Stops at the first test still unknown.
void Ddmin::advance() {
  while (!done_) {
    if (config_.size() < 2) {
      done_ = true;
      return;
    }
    resolve_from_cache();
    size_t test = 0;
    for (; test < tests_.size(); ++test) {
      if (!results_[test]) return;
      if (*results_[test] == Observation::Bad) break;
    }
    if (test < tests_.size()) {
      const bool reduced_to_part = test < granularity_;
      config_ = tests_[test];
      granularity_ = reduced_to_part ? 2 : std::max<size_t>(granularity_ - 1, 2);
    } else if (granularity_ < config_.size()) {
      granularity_ = std::min(granularity_ * 2, config_.size());
    } else {
      done_ = true;
      return;
    }
    start_step();
  }
}

std::vector<Subset> Ddmin::next(size_t slots) {
  std::vector<Subset> proposals;
  if (done_) return proposals;
  const bool improved = options_.variant == DdminVariant::Improved;
  for (size_t test = 0; test < tests_.size() && proposals.size() < slots; ++test) {
    if (results_[test] || proposed_[test]) continue;
    // Improved never runs a subset twice: one already out (from an earlier step) is awaited.
    if (improved && outstanding_.count(tests_[test]) != 0) continue;
    proposed_[test] = true;
    ++outstanding_[tests_[test]];
    proposals.push_back(tests_[test]);
  }
  return proposals;
}

void Ddmin::observe(const Subset& subset, Observation observation) {
  const auto out = outstanding_.find(subset);
  if (out == outstanding_.end()) {
    if (const auto hit = cache_.find(subset); hit != cache_.end()) {
      if (hit->second == observation) return;
      throw std::logic_error("Ddmin: subset " + describe(subset) + " observed " +
                             to_string(hit->second) + " and now " + to_string(observation));
    }
    throw std::logic_error("Ddmin: subset " + describe(subset) + " is not outstanding");
  }
  if (--out->second == 0) outstanding_.erase(out);
  ++evaluations_;
  if (options_.variant == DdminVariant::Improved) {
    cache_[subset] = observation;
  } else {
    // Textbook keeps no cache: the result belongs to the first waiting test of this step with
    // that subset; a result from an earlier step is counted and dropped.
    for (size_t test = 0; test < tests_.size(); ++test) {
      if (proposed_[test] && !results_[test] && tests_[test] == subset) {
        results_[test] = observation;
        break;
      }
    }
  }
  advance();
}

nlohmann::json Ddmin::to_json() const {
  nlohmann::json state = {{"search", "ddmin"},
                          {"version", 1},
                          {"items", item_count_},
                          {"variant", to_string(options_.variant)},
                          {"monotonicity", to_string(options_.monotonicity)},
                          {"config", config_},
                          {"granularity", granularity_},
                          {"evaluations", evaluations_}};
  // Improved: the cache holds every result. Textbook: only this step's observed results (by
  // position in the step's test order), since it forgets everything else by design.
  nlohmann::json known = {{"good", nlohmann::json::array()},
                          {"bad", nlohmann::json::array()},
                          {"skip", nlohmann::json::array()}};
  if (options_.variant == DdminVariant::Improved) {
    for (const auto& [subset, observation] : cache_)
      known[to_string(observation)].push_back(subset);
    state["cache"] = known;
  } else {
    for (size_t test = 0; test < tests_.size(); ++test)
      if (results_[test]) known[to_string(*results_[test])].push_back(test);
    state["step_results"] = known;
  }
  return state;
}

Ddmin Ddmin::from_json(const nlohmann::json& state) {
  try {
    if (state.at("search") != "ddmin" || state.at("version") != 1)
      throw std::invalid_argument("Ddmin state: not a version-1 ddmin state");
    DdminOptions options;
    options.variant = parse_variant(state.at("variant").get<std::string>());
    options.monotonicity = parse_monotonicity(state.at("monotonicity").get<std::string>());
    Ddmin search(state.at("items").get<size_t>(), options);
    search.config_ = state.at("config").get<Subset>();
    search.granularity_ = state.at("granularity").get<size_t>();
    search.evaluations_ = state.at("evaluations").get<size_t>();
    const auto& config = search.config_;
    const bool valid_config = !config.empty() && std::is_sorted(config.begin(), config.end()) &&
                              std::adjacent_find(config.begin(), config.end()) == config.end() &&
                              config.back() < search.item_count_;
    const bool valid_granularity =
        search.granularity_ >= 2 && (config.size() < 2 || search.granularity_ <= config.size());
    if (!valid_config || !valid_granularity)
      throw std::invalid_argument("Ddmin state: invalid config or granularity");
    search.start_step();
    for (const auto observation : kObservations) {
      if (options.variant == DdminVariant::Improved) {
        for (const Subset& subset :
             state.at("cache").at(to_string(observation)).get<std::vector<Subset>>())
          search.cache_[subset] = observation;
      } else {
        for (const size_t test :
             state.at("step_results").at(to_string(observation)).get<std::vector<size_t>>()) {
          if (test >= search.tests_.size())
            throw std::invalid_argument("Ddmin state: step result for a test that does not exist");
          search.results_[test] = observation;
        }
      }
    }
    search.done_ = false;
    search.advance();
    return search;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("Ddmin state: malformed JSON: ") + error.what());
  }
}

}  // namespace faultline::bisect
