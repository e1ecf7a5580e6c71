// MajorityBisect (declared in flaky_bisect.hpp): git's bisection with every probe re-run k
// times and judged by majority, the usual answer to flaky tests and the flaky bench's baseline.
#include <algorithm>
#include <stdexcept>

#include "bisect/flaky_bisect.hpp"

namespace faultline::bisect {

MajorityBisect::MajorityBisect(std::vector<Commit> commits, std::vector<std::string> good,
                               std::string bad, int reruns)
    : MajorityBisect(CommitBisect(std::move(commits), std::move(good), std::move(bad)), reruns) {}

MajorityBisect::MajorityBisect(CommitBisect inner, int reruns)
    : inner_(std::move(inner)), reruns_(reruns) {
  if (reruns_ < 1) throw std::invalid_argument("majority bisect: reruns must be at least 1");
}

std::vector<std::string> MajorityBisect::next(std::size_t slots) {
  std::vector<std::string> out;
  if (done()) return out;
  if (!probe_) {
    const std::vector<std::string> proposal = inner_.next(1);
    if (proposal.empty()) return out;
    probe_ = proposal.front();
  }
  for (; out.size() < slots && reissue_ > 0; --reissue_) out.push_back(*probe_);
  for (; out.size() < slots && good_ + bad_ + skip_ + outstanding_ < reruns_; ++outstanding_)
    out.push_back(*probe_);
  return out;
}

void MajorityBisect::observe(const std::string& commit, Observation observation) {
  if (!probe_ || commit != *probe_ || outstanding_ == 0)
    throw std::logic_error("majority bisect: '" + commit +
                           "' is not an outstanding proposal (observe each run next() "
                           "returned, once)");
  --outstanding_;
  reissue_ = std::min(reissue_, outstanding_);
  runs_.emplace_back(commit, observation);
  ++(observation == Observation::Good ? good_ : observation == Observation::Bad ? bad_ : skip_);
  if (good_ + bad_ + skip_ < reruns_) return;
  const Observation verdict = bad_ > good_   ? Observation::Bad
                              : good_ > bad_ ? Observation::Good
                                             : Observation::Skip;
  inner_.observe(*probe_, verdict);
  probe_.reset();
  good_ = bad_ = skip_ = 0;
}

CommitBisectResult MajorityBisect::result() const {
  CommitBisectResult result = inner_.result();
  result.verdicts = commit_detail::count_verdicts(runs_);
  result.evaluations = evaluations();
  return result;
}

nlohmann::json MajorityBisect::to_json() const {
  return {{"kind", kStateKind},
          {"version", 1},
          {"reruns", reruns_},
          {"inner", inner_.to_json()},
          {"probe", probe_ ? nlohmann::json(*probe_) : nlohmann::json(nullptr)},
          {"votes", {{"good", good_}, {"bad", bad_}, {"skip", skip_}}},
          {"outstanding", outstanding_},
          {"runs", commit_detail::log_to_json(runs_)}};
}

// Runs that were out when the state was saved are handed out again by next().
MajorityBisect MajorityBisect::from_json(const nlohmann::json& state) {
  try {
    if (state.at("kind") != kStateKind || state.at("version") != 1)
      throw std::invalid_argument("majority bisect state: not a version 1 majority_bisect state");
    MajorityBisect search(CommitBisect::from_json(state.at("inner")),
                          state.at("reruns").get<int>());
    if (!state.at("probe").is_null()) search.probe_ = state.at("probe").get<std::string>();
    search.good_ = state.at("votes").at("good").get<int>();
    search.bad_ = state.at("votes").at("bad").get<int>();
    search.skip_ = state.at("votes").at("skip").get<int>();
    search.outstanding_ = search.reissue_ = state.at("outstanding").get<int>();
    search.runs_ = commit_detail::log_from_json(state.at("runs"));
    return search;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("majority bisect state: ") + error.what());
  }
}

}  // namespace faultline::bisect
