// CommitBisect (declared in commit_graph.hpp): git bisect as a state machine, choosing commits
// the way git's bisect.c does, so that `faultline bisect commits` tests what git would test.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "bisect/commit_graph.hpp"

namespace faultline::bisect {
namespace {

// skip_away()'s pseudo-random numbers, as in git's bisect.c: get_prn() is "man 3 rand" seeded
// with the count of untried commits, sqrti() a float Newton iteration.
unsigned git_prn(unsigned count) {
  count = count * 1103515245u + 12345u;
  return (count / 65536u) % 32768u;
}

int git_sqrti(int value) {
  if (value == 0) return 0;
  float x = static_cast<float>(value), step = 0.0f;
  do {
    const float y = (x + static_cast<float>(value) / x) / 2;
    step = y > x ? y - x : x - y;
    x = y;
  } while (step >= 0.5f);
  return static_cast<int>(x);
}

// Where skip_away() lands among `count` untried commits ranked best first: at about
// count * r^1.5 for r uniform in [0, 1), so mostly near the top but not next to the skipped
// best one, which is how git escapes a cluster of untestable commits.
std::size_t git_skip_away_index(std::size_t count) {
  const unsigned prn = git_prn(static_cast<unsigned>(count));
  const long long scaled = static_cast<long long>(count) * prn / 32768;
  return static_cast<std::size_t>(scaled * git_sqrti(static_cast<int>(prn)) / git_sqrti(32768));
}

}  // namespace

CommitBisect::CommitBisect(std::vector<Commit> commits, std::vector<std::string> good,
                           std::string bad)
    : graph_(std::move(commits)), initial_good_(std::move(good)), initial_bad_(std::move(bad)) {
  skipped_.assign(graph_.size(), 0);
  known_bad_.assign(graph_.size(), 0);
  // A good missing from the list lies behind the boundary of `rev-list BAD ^GOOD`: every
  // listed commit is already outside its ancestry, so it removes nothing.
  for (const std::string& id : initial_good_) {
    if (graph_.contains(id)) goods_.push_back(graph_.index(id));
  }
  bads_.push_back(graph_.index(initial_bad_));
  known_bad_[bads_.front()] = 1;
  refresh();
  if (list_.empty())
    throw std::invalid_argument("commit bisect: bad commit '" + initial_bad_ +
                                "' is an ancestor of a good one; nothing to bisect");
}

void CommitBisect::refresh() {
  in_set_ = candidate_marks(graph_, bads_, goods_);
  list_.clear();
  for (std::size_t node = graph_.size(); node-- > 0;) {
    if (in_set_[node]) list_.push_back(node);
  }
  reach_ = graph_.ancestor_sums(in_set_, std::vector<double>(graph_.size(), 1.0));
}

bool CommitBisect::testable(std::size_t node) const {
  return in_set_[node] && !skipped_[node] && !known_bad_[node];
}

CommitBisectStatus CommitBisect::status() const {
  if (list_.empty()) return CommitBisectStatus::Inconsistent;
  if (list_.size() == 1) return CommitBisectStatus::Found;
  for (const std::size_t node : list_) {
    if (testable(node)) return CommitBisectStatus::Searching;
  }
  return CommitBisectStatus::OnlySkippedLeft;
}

// git's find_bisection() when nothing was skipped: it counts merges first (in list order),
// then single-parent commits pass by pass over the list, and returns the first commit it
// counts at exactly half way; failing that, the first best in list order (best_bisection()).
std::size_t CommitBisect::git_rev_list_choice() const {
  const double n = static_cast<double>(list_.size());
  std::vector<long> position(graph_.size(), 0);
  for (std::size_t i = 0; i < list_.size(); ++i) position[list_[i]] = static_cast<long>(i);
  // (pass, position) at which git's fill loop counts a single-parent commit; roots and merges
  // are known before the first pass.
  std::vector<std::pair<long, long>> counted_at(graph_.size(), {1, -1});
  std::vector<std::size_t> merges, strands;
  for (const std::size_t node : graph_.topological()) {
    if (!in_set_[node]) continue;
    std::size_t inside = 0, parent = 0;
    for (const std::size_t p : graph_.parents(node)) {
      if (in_set_[p]) ++inside, parent = p;
    }
    if (inside >= 2) merges.push_back(node);
    if (inside != 1) continue;
    const auto [pass, at] = counted_at[parent];
    counted_at[node] = {at < position[node] ? pass : pass + 1, position[node]};
    strands.push_back(node);
  }
  std::sort(merges.begin(), merges.end(),
            [&](std::size_t a, std::size_t b) { return position[a] < position[b]; });
  std::sort(strands.begin(), strands.end(),
            [&](std::size_t a, std::size_t b) { return counted_at[a] < counted_at[b]; });
  merges.insert(merges.end(), strands.begin(), strands.end());
  for (const std::size_t node : merges) {
    if (std::abs(2 * reach_[node] - n) <= 1) return node;
  }
  std::size_t best = list_.front();
  double best_distance = -1;
  for (const std::size_t node : list_) {
    const double distance = std::min(reach_[node], n - reach_[node]);
    if (distance > best_distance) best = node, best_distance = distance;
  }
  return best;
}

// One commit. Once anything was skipped git ranks all candidates by min(X, N-X), then by
// object id (for full hex ids the same as comparing the strings), and takes the best one
// unless it was skipped, in which case skip_away() picks among the untried ones.
std::vector<std::size_t> CommitBisect::choose_one() const {
  const bool any_skipped = std::find(skipped_.begin(), skipped_.end(), 1) != skipped_.end();
  if (!any_skipped && pending_.empty()) return {git_rev_list_choice()};
  const double n = static_cast<double>(list_.size());
  std::vector<std::size_t> ranked;
  for (const std::size_t node : list_) {
    if (std::find(pending_.begin(), pending_.end(), node) == pending_.end()) ranked.push_back(node);
  }
  auto distance = [&](std::size_t node) { return std::min(reach_[node], n - reach_[node]); };
  std::sort(ranked.begin(), ranked.end(), [&](std::size_t a, std::size_t b) {
    if (distance(a) != distance(b)) return distance(a) > distance(b);
    return graph_.id(a) < graph_.id(b);
  });
  if (ranked.empty()) return {};
  std::size_t choice = ranked.front();
  if (skipped_[choice]) {
    ranked.erase(std::remove_if(ranked.begin(), ranked.end(),
                                [&](std::size_t node) { return skipped_[node] != 0; }),
                 ranked.end());
    if (ranked.empty()) return {};
    std::size_t at = git_skip_away_index(ranked.size());
    if (known_bad_[ranked[at]] && at > 0) --at;  // git never hands back the bad commit
    choice = ranked[at];
  }
  if (!testable(choice)) return {};
  return {choice};
}

// Several commits at once: the testable ones whose X lies closest to N/(K+1), 2N/(K+1), ...
std::vector<std::size_t> CommitBisect::choose_spread(std::size_t count) const {
  const double n = static_cast<double>(list_.size());
  std::vector<char> taken(graph_.size(), 0);
  for (const std::size_t node : pending_) taken[node] = 1;
  std::vector<std::size_t> chosen;
  for (std::size_t part = 1; part <= count; ++part) {
    const double target = n * static_cast<double>(part) / static_cast<double>(count + 1);
    std::size_t best = std::numeric_limits<std::size_t>::max();
    double best_gap = std::numeric_limits<double>::infinity();
    for (const std::size_t node : list_) {
      if (taken[node] || !testable(node) || std::abs(reach_[node] - target) >= best_gap) continue;
      best = node;
      best_gap = std::abs(reach_[node] - target);
    }
    if (best == std::numeric_limits<std::size_t>::max()) break;
    taken[best] = 1;
    chosen.push_back(best);
  }
  return chosen;
}

std::vector<std::string> CommitBisect::next(std::size_t slots) {
  std::vector<std::string> out;
  if (done()) return out;
  while (out.size() < slots && !reissue_.empty()) {
    out.push_back(graph_.id(reissue_.front()));
    reissue_.erase(reissue_.begin());
  }
  const std::size_t free_slots = slots - out.size();
  if (free_slots == 0) return out;
  for (const std::size_t node : free_slots == 1 ? choose_one() : choose_spread(free_slots)) {
    pending_.push_back(node);
    out.push_back(graph_.id(node));
  }
  return out;
}

void CommitBisect::observe(const std::string& commit, Observation observation) {
  const std::size_t node = graph_.index(commit);
  const auto found = std::find(pending_.begin(), pending_.end(), node);
  if (found == pending_.end())
    throw std::logic_error("commit bisect: '" + commit +
                           "' is not an outstanding proposal (observe each commit next() "
                           "returned, once)");
  pending_.erase(found);
  reissue_.erase(std::remove(reissue_.begin(), reissue_.end(), node), reissue_.end());
  apply(node, observation);
}

void CommitBisect::apply(std::size_t node, Observation observation) {
  log_.emplace_back(graph_.id(node), observation);
  switch (observation) {
    case Observation::Good:
      goods_.push_back(node);
      break;
    case Observation::Bad:
      bads_.push_back(node);
      known_bad_[node] = 1;
      break;
    case Observation::Skip:
      skipped_[node] = 1;
      return;  // the candidate set is unchanged
  }
  refresh();
}

std::vector<std::string> CommitBisect::candidates() const {
  std::vector<std::string> out;
  for (std::size_t node = 0; node < graph_.size(); ++node) {
    if (in_set_[node]) out.push_back(graph_.id(node));
  }
  return out;
}

CommitBisectResult CommitBisect::result() const {
  CommitBisectResult result;
  result.status = status();
  result.evaluations = evaluations();
  result.verdicts = commit_detail::count_verdicts(log_);
  for (const auto& [commit, observation] : log_) {
    if (observation == Observation::Skip) result.skipped.push_back(commit);
  }
  if (result.status == CommitBisectStatus::Found) {
    result.culprit = graph_.id(list_.front());
    result.parents = graph_.commits()[list_.front()].parents;
  } else if (result.status == CommitBisectStatus::OnlySkippedLeft) {
    result.possible = candidates();
  }
  return result;
}

nlohmann::json CommitBisect::to_json() const {
  nlohmann::json pending = nlohmann::json::array();
  for (const std::size_t node : pending_) pending.push_back(graph_.id(node));
  return {{"kind", kStateKind},
          {"version", 1},
          {"commits", commit_detail::commits_to_json(graph_.commits())},
          {"good", initial_good_},
          {"bad", initial_bad_},
          {"observations", commit_detail::log_to_json(log_)},
          {"pending", pending}};
}

// The state is the input plus the verdicts in order; replaying them rebuilds every derived
// field exactly, and the proposals that were out are handed out again by next().
CommitBisect CommitBisect::from_json(const nlohmann::json& state) {
  try {
    if (state.at("kind") != kStateKind || state.at("version") != 1)
      throw std::invalid_argument("commit bisect state: not a version 1 commit_bisect state");
    CommitBisect search(commit_detail::commits_from_json(state.at("commits")),
                        state.at("good").get<std::vector<std::string>>(),
                        state.at("bad").get<std::string>());
    for (const auto& [commit, observation] : commit_detail::log_from_json(state.at("observations")))
      search.apply(search.graph_.index(commit), observation);
    for (const auto& commit : state.at("pending"))
      search.pending_.push_back(search.graph_.index(commit.get<std::string>()));
    search.reissue_ = search.pending_;
    return search;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("commit bisect state: ") + error.what());
  }
}

}  // namespace faultline::bisect
