// Vote: counts the outcomes of repeated identical trials and stops once more trials cannot
// change the verdict.
#include "bisect/vote.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace faultline::bisect {
namespace {

const char* to_string(StopRule rule) {
  return rule == StopRule::WhenDecided ? "when_decided" : "all_runs";
}

StopRule parse_stop_rule(const std::string& text) {
  if (text == "when_decided") return StopRule::WhenDecided;
  if (text == "all_runs") return StopRule::AllRuns;
  throw std::invalid_argument("Vote state: unknown stop_rule '" + text + "'");
}

}  // namespace

const char* to_string(Consistency consistency) {
  return consistency == Consistency::Consistent ? "consistent" : "inconsistent";
}

Vote::Vote(VoteOptions options) : options_(options) {
  if (options_.max_runs == 0) throw std::invalid_argument("Vote: max_runs must be >= 1");
  if (options_.needed == 0) options_.needed = options_.max_runs / 2 + 1;
  if (options_.needed <= options_.max_runs / 2 || options_.needed > options_.max_runs)
    throw std::invalid_argument("Vote: needed (" + std::to_string(options_.needed) +
                                ") must be a majority of max_runs (" +
                                std::to_string(options_.max_runs) + ")");
}

size_t Vote::count(Observation observation) const {
  return static_cast<size_t>(std::count_if(
      runs_.begin(), runs_.end(), [&](const auto& run) { return run.second == observation; }));
}

// A side has won, or the runs not yet observed cannot lift either side to `needed`.
bool Vote::decided() const {
  const size_t good = count(Observation::Good), bad = count(Observation::Bad);
  const size_t unobserved = options_.max_runs - runs_.size();
  if (good >= options_.needed || bad >= options_.needed) return true;
  return good + unobserved < options_.needed && bad + unobserved < options_.needed;
}

bool Vote::done() const {
  if (runs_.size() == options_.max_runs) return true;
  return options_.stop_rule == StopRule::WhenDecided && decided();
}

std::vector<size_t> Vote::next(size_t slots) {
  std::vector<size_t> runs;
  if (done()) return runs;
  size_t wanted = options_.max_runs - runs_.size() - outstanding_.size();
  if (options_.stop_rule == StopRule::WhenDecided) {
    // Even if every outstanding run agrees with the leader, it still needs `short_by` more.
    const size_t leader = std::max(count(Observation::Good), count(Observation::Bad));
    const size_t short_by = options_.needed - leader;
    wanted = std::min(wanted, short_by > outstanding_.size() ? short_by - outstanding_.size() : 0);
  }
  wanted = std::min(wanted, slots);
  for (size_t run = 0; run < options_.max_runs && runs.size() < wanted; ++run) {
    if (runs_.count(run) || outstanding_.count(run)) continue;
    runs.push_back(run);
    outstanding_.insert(run);
  }
  return runs;
}

void Vote::observe(size_t run, Observation observation) {
  if (const auto known = runs_.find(run); known != runs_.end()) {
    if (known->second == observation) return;
    throw std::logic_error("Vote: run " + std::to_string(run) + " observed " +
                           to_string(known->second) + " and now " + to_string(observation));
  }
  if (outstanding_.erase(run) == 0)
    throw std::logic_error("Vote: run " + std::to_string(run) + " was never proposed");
  runs_[run] = observation;
}

VoteResult Vote::result() const {
  VoteResult result;
  result.good = count(Observation::Good);
  result.bad = count(Observation::Bad);
  result.skipped = count(Observation::Skip);
  if (result.good >= options_.needed) result.verdict = Observation::Good;
  if (result.bad >= options_.needed) result.verdict = Observation::Bad;
  const bool both_seen = result.good > 0 && result.bad > 0;
  result.consistency = both_seen ? Consistency::Inconsistent : Consistency::Consistent;
  return result;
}

nlohmann::json Vote::to_json() const {
  nlohmann::json state = {{"search", "vote"},
                          {"version", 1},
                          {"max_runs", options_.max_runs},
                          {"needed", options_.needed},
                          {"stop_rule", to_string(options_.stop_rule)},
                          {"good", nlohmann::json::array()},
                          {"bad", nlohmann::json::array()},
                          {"skip", nlohmann::json::array()}};
  for (const auto& [run, observation] : runs_) state[to_string(observation)].push_back(run);
  return state;
}

Vote Vote::from_json(const nlohmann::json& state) {
  try {
    if (state.at("search") != "vote" || state.at("version") != 1)
      throw std::invalid_argument("Vote state: not a version-1 vote state");
    VoteOptions options;
    options.max_runs = state.at("max_runs").get<size_t>();
    options.needed = state.at("needed").get<size_t>();
    options.stop_rule = parse_stop_rule(state.at("stop_rule").get<std::string>());
    Vote vote(options);
    for (const auto observation : {Observation::Good, Observation::Bad, Observation::Skip}) {
      for (const size_t run : state.at(to_string(observation)).get<std::vector<size_t>>()) {
        if (run >= options.max_runs || vote.runs_.count(run))
          throw std::invalid_argument("Vote state: bad or repeated run " + std::to_string(run));
        vote.runs_[run] = observation;
      }
    }
    return vote;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("Vote state: malformed JSON: ") + error.what());
  }
}

}  // namespace faultline::bisect
