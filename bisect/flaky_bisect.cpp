// Bayesian flake-aware bisection over git's candidate set (FlakyBisect) and the
// majority-of-k-reruns baseline (MajorityBisect).
#include "bisect/flaky_bisect.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace faultline::bisect {
namespace {

// A verdict the model calls impossible (noise 0) must not zero out every hypothesis at once,
// so no likelihood goes below this.
constexpr double kLikelihoodFloor = 1e-12;
// Below this many bits a run is not worth making.
constexpr double kNoGain = 1e-9;

double entropy_bits(double p) {
  if (p <= 0.0 || p >= 1.0) return 0.0;
  return -p * std::log2(p) - (1.0 - p) * std::log2(1.0 - p);
}

void check(const FlakyOptions& o) {
  const bool ok = o.p_bad_looks_good >= 0 && o.p_bad_looks_good < 1 && o.p_good_looks_bad >= 0 &&
                  o.p_good_looks_bad < 1 && o.p_bad_looks_good + o.p_good_looks_bad < 1 &&
                  o.prior_no_culprit >= 0 && o.prior_no_culprit < 1 && o.confidence > 0 &&
                  o.confidence <= 1 && o.max_executions >= 1;
  if (!ok)
    throw std::invalid_argument(
        "flaky bisect: options out of range (noise in [0, 1) summing below 1, prior_no_culprit "
        "in [0, 1), confidence in (0, 1], max_executions >= 1)");
}

}  // namespace

FlakyBisect::FlakyBisect(std::vector<Commit> commits, std::vector<std::string> good,
                         std::string bad, FlakyOptions options)
    : graph_(std::move(commits)),
      initial_good_(std::move(good)),
      initial_bad_(std::move(bad)),
      options_(options) {
  check(options_);
  std::vector<std::size_t> goods;
  // A good missing from the list lies behind the boundary of `rev-list BAD ^GOOD`: every
  // listed commit is already outside its ancestry, so it removes nothing.
  for (const std::string& id : initial_good_) {
    if (graph_.contains(id)) goods.push_back(graph_.index(id));
  }
  in_set_ = candidate_marks(graph_, {graph_.index(initial_bad_)}, goods);
  for (std::size_t node = graph_.size(); node-- > 0;) {
    if (in_set_[node]) list_.push_back(node);
  }
  if (list_.empty())
    throw std::invalid_argument("flaky bisect: bad commit '" + initial_bad_ +
                                "' is an ancestor of a good one; nothing to bisect");
  skipped_.assign(graph_.size(), 0);
  culprit_.assign(graph_.size(), 0.0);
  for (const std::size_t node : list_)
    culprit_[node] = (1.0 - options_.prior_no_culprit) / static_cast<double>(list_.size());
  no_culprit_ = options_.prior_no_culprit;
  refresh();
}

// Bayes' rule for one run of `node`: hypotheses whose culprit is an ancestor-or-self of node
// predict "bad" with 1 - p_bad_looks_good; all others (no culprit included) p_good_looks_bad.
void FlakyBisect::apply(std::size_t node, Observation observation) {
  log_.emplace_back(graph_.id(node), observation);
  if (observation == Observation::Skip) {
    skipped_[node] = 1;  // a build that fails once fails again: do not propose it any more
    refresh();
    return;
  }
  const bool bad = observation == Observation::Bad;
  const double p_bl = options_.p_bad_looks_good, p_gb = options_.p_good_looks_bad;
  const double if_included = std::max(bad ? 1.0 - p_bl : p_bl, kLikelihoodFloor);
  const double if_clean = std::max(bad ? p_gb : 1.0 - p_gb, kLikelihoodFloor);
  const std::vector<char> included = graph_.ancestors({node});
  double total = no_culprit_ *= if_clean;
  for (const std::size_t k : list_) total += culprit_[k] *= included[k] ? if_included : if_clean;
  for (const std::size_t k : list_) culprit_[k] /= total;
  no_culprit_ /= total;
  refresh();
}

// A run of c shows bad with q = A(1 - p_bl) + (1 - A) p_gb, where A is the posterior mass of
// culprits at or before c; its information is H(q) - A H(p_bl) - (1 - A) H(p_gb).
void FlakyBisect::refresh() {
  const double p_bl = options_.p_bad_looks_good, p_gb = options_.p_good_looks_bad;
  const std::vector<double> mass = graph_.ancestor_sums(in_set_, culprit_);
  gain_.assign(graph_.size(), 0.0);
  double best_gain = 0.0, best_posterior = no_culprit_;
  for (const std::size_t node : list_) {
    best_posterior = std::max(best_posterior, culprit_[node]);
    if (skipped_[node]) continue;
    const double a = std::clamp(mass[node], 0.0, 1.0);
    const double q = a * (1.0 - p_bl) + (1.0 - a) * p_gb;
    gain_[node] = entropy_bits(q) - a * entropy_bits(p_bl) - (1.0 - a) * entropy_bits(p_gb);
    best_gain = std::max(best_gain, gain_[node]);
  }
  if (best_posterior >= options_.confidence)
    stop_ = FlakyStop::Confident;
  else if (evaluations() >= options_.max_executions)
    stop_ = FlakyStop::BudgetSpent;
  else if (best_gain <= kNoGain)
    stop_ = FlakyStop::NothingInformative;
  else
    stop_ = FlakyStop::Searching;
}

std::vector<std::string> FlakyBisect::next(std::size_t slots) {
  std::vector<std::string> out;
  if (done()) return out;
  while (out.size() < slots && !reissue_.empty()) {
    out.push_back(graph_.id(reissue_.front()));
    reissue_.erase(reissue_.begin());
  }
  const long budget = options_.max_executions - evaluations() - static_cast<long>(pending_.size());
  const std::size_t wanted =
      std::min(slots - out.size(), static_cast<std::size_t>(std::max(0L, budget)));
  std::vector<std::size_t> ranked;  // positions in list_
  for (std::size_t at = 0; at < list_.size(); ++at) {
    const std::size_t node = list_[at];
    if (gain_[node] > kNoGain &&
        std::find(pending_.begin(), pending_.end(), node) == pending_.end())
      ranked.push_back(at);
  }
  const std::size_t take = std::min(wanted, ranked.size());
  // Most informative first; equal gains go to the older commit (list_ is oldest first).
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<long>(take), ranked.end(),
                    [&](std::size_t a, std::size_t b) {
                      const double gain_a = gain_[list_[a]], gain_b = gain_[list_[b]];
                      return gain_a != gain_b ? gain_a > gain_b : a < b;
                    });
  for (std::size_t i = 0; i < take; ++i) {
    pending_.push_back(list_[ranked[i]]);
    out.push_back(graph_.id(list_[ranked[i]]));
  }
  return out;
}

void FlakyBisect::observe(const std::string& commit, Observation observation) {
  const std::size_t node = graph_.index(commit);
  const auto found = std::find(pending_.begin(), pending_.end(), node);
  if (found == pending_.end())
    throw std::logic_error("flaky bisect: '" + commit +
                           "' is not an outstanding proposal (observe each commit next() "
                           "returned, once)");
  pending_.erase(found);
  const auto again = std::find(reissue_.begin(), reissue_.end(), node);
  if (again != reissue_.end()) reissue_.erase(again);
  apply(node, observation);
}

double FlakyBisect::posterior(const std::string& commit) const {
  return culprit_[graph_.index(commit)];
}

FlakyBisectResult FlakyBisect::result() const {
  FlakyBisectResult result;
  result.stop = stop_;
  result.executions = evaluations();
  result.verdicts = commit_detail::count_verdicts(log_);
  for (const auto& [commit, observation] : log_) {
    if (observation == Observation::Skip) result.skipped.push_back(commit);
  }
  std::size_t best = list_.front();
  for (const std::size_t node : list_) {
    if (culprit_[node] > culprit_[best]) best = node;
  }
  if (no_culprit_ > culprit_[best]) {
    result.answer = FlakyAnswer::NoCulprit;
    result.confidence = no_culprit_;
  } else {
    result.answer = FlakyAnswer::Culprit;
    result.culprit = graph_.id(best);
    result.parents = graph_.commits()[best].parents;
    result.confidence = culprit_[best];
  }
  return result;
}

nlohmann::json FlakyBisect::to_json() const {
  nlohmann::json pending = nlohmann::json::array();
  for (const std::size_t node : pending_) pending.push_back(graph_.id(node));
  return {{"kind", kStateKind},
          {"version", 1},
          {"commits", commit_detail::commits_to_json(graph_.commits())},
          {"good", initial_good_},
          {"bad", initial_bad_},
          {"options",
           {{"p_bad_looks_good", options_.p_bad_looks_good},
            {"p_good_looks_bad", options_.p_good_looks_bad},
            {"prior_no_culprit", options_.prior_no_culprit},
            {"confidence", options_.confidence},
            {"max_executions", options_.max_executions}}},
          {"observations", commit_detail::log_to_json(log_)},
          {"pending", pending}};
}

// Replaying the verdicts in order recomputes the posterior bit for bit.
FlakyBisect FlakyBisect::from_json(const nlohmann::json& state) {
  try {
    if (state.at("kind") != kStateKind || state.at("version") != 1)
      throw std::invalid_argument("flaky bisect state: not a version 1 flaky_bisect state");
    const nlohmann::json& o = state.at("options");
    FlakyOptions options{o.at("p_bad_looks_good").get<double>(),
                         o.at("p_good_looks_bad").get<double>(),
                         o.at("prior_no_culprit").get<double>(), o.at("confidence").get<double>(),
                         o.at("max_executions").get<int>()};
    FlakyBisect search(commit_detail::commits_from_json(state.at("commits")),
                       state.at("good").get<std::vector<std::string>>(),
                       state.at("bad").get<std::string>(), options);
    for (const auto& [commit, observation] : commit_detail::log_from_json(state.at("observations")))
      search.apply(search.graph_.index(commit), observation);
    for (const auto& commit : state.at("pending"))
      search.pending_.push_back(search.graph_.index(commit.get<std::string>()));
    search.reissue_ = search.pending_;
    return search;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("flaky bisect state: ") + error.what());
  }
}

}  // namespace faultline::bisect
