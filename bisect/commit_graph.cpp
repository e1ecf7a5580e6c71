// The commit DAG and git-compatible bisection: the candidate set, git's choice of the next
// commit (rev-list --bisect, bisect's skip_away()), k-way proposals and the JSON state.
#include "bisect/commit_graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace faultline::bisect {

CommitGraph::CommitGraph(std::vector<Commit> commits) : commits_(std::move(commits)) {
  if (commits_.empty()) throw std::invalid_argument("commit graph: no commits given");
  for (std::size_t i = 0; i < commits_.size(); ++i) {
    const std::string& id = commits_[i].id;
    if (id.empty()) throw std::invalid_argument("commit graph: a commit has an empty id");
    if (!index_.emplace(id, i).second)
      throw std::invalid_argument("commit graph: commit '" + id + "' is listed twice");
  }
  parents_.resize(commits_.size());
  for (std::size_t i = 0; i < commits_.size(); ++i) {
    for (const std::string& parent : commits_[i].parents) {
      const auto found = index_.find(parent);
      if (found == index_.end()) continue;  // the boundary of the history we were given
      std::vector<std::size_t>& list = parents_[i];
      if (std::find(list.begin(), list.end(), found->second) == list.end())
        list.push_back(found->second);
    }
  }
  // Depth-first post-order emits parents before children and finds cycles on the way; walks
  // start oldest first (the input is newest first) so the order follows the history.
  enum class Mark : char { New, Open, Closed };
  std::vector<Mark> mark(size(), Mark::New);
  std::vector<std::pair<std::size_t, std::size_t>> stack;  // node, next parent to visit
  for (std::size_t start = size(); start-- > 0;) {
    if (mark[start] != Mark::New) continue;
    mark[start] = Mark::Open;
    stack.emplace_back(start, 0);
    while (!stack.empty()) {
      const std::size_t node = stack.back().first;
      if (stack.back().second < parents_[node].size()) {
        const std::size_t parent = parents_[node][stack.back().second++];
        if (mark[parent] == Mark::Open)
          throw std::invalid_argument("commit graph: a cycle runs through '" + id(parent) + "'");
        if (mark[parent] == Mark::New) {
          mark[parent] = Mark::Open;
          stack.emplace_back(parent, 0);
        }
      } else {
        mark[node] = Mark::Closed;
        topological_.push_back(node);
        stack.pop_back();
      }
    }
  }
}

std::size_t CommitGraph::index(const std::string& id) const {
  const auto found = index_.find(id);
  if (found == index_.end())
    throw std::invalid_argument("commit graph: unknown commit '" + id + "'");
  return found->second;
}

std::vector<char> CommitGraph::ancestors(const std::vector<std::size_t>& from) const {
  std::vector<char> marks(size(), 0);
  std::vector<std::size_t> stack;
  for (const std::size_t node : from) {
    if (!marks[node]) stack.push_back(node);
    marks[node] = 1;
  }
  while (!stack.empty()) {
    const std::size_t node = stack.back();
    stack.pop_back();
    for (const std::size_t parent : parents_[node]) {
      if (!marks[parent]) stack.push_back(parent);
      marks[parent] = 1;
    }
  }
  return marks;
}

std::vector<double> CommitGraph::ancestor_sums(const std::vector<char>& in_set,
                                               const std::vector<double>& value) const {
  std::vector<double> sums(size(), 0.0);
  std::vector<std::size_t> seen(size(), std::numeric_limits<std::size_t>::max());
  std::vector<std::size_t> stack;
  for (const std::size_t node : topological_) {
    if (!in_set[node]) continue;
    std::size_t inside = 0, parent = 0;
    for (const std::size_t p : parents_[node]) {
      if (in_set[p]) ++inside, parent = p;
    }
    if (inside <= 1) {  // one strand: the parent's count plus this commit
      sums[node] = (inside == 1 ? sums[parent] : 0.0) + value[node];
      continue;
    }
    // A merge: its branches share ancestors, so adding the parents' sums would count twice.
    double total = 0.0;
    seen[node] = node;
    stack.assign(1, node);
    while (!stack.empty()) {
      const std::size_t at = stack.back();
      stack.pop_back();
      total += value[at];
      for (const std::size_t p : parents_[at]) {
        if (in_set[p] && seen[p] != node) seen[p] = node, stack.push_back(p);
      }
    }
    sums[node] = total;
  }
  return sums;
}

std::vector<char> candidate_marks(const CommitGraph& graph, const std::vector<std::size_t>& bads,
                                  const std::vector<std::size_t>& goods) {
  std::vector<std::size_t> distinct = bads;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<std::size_t> hits(graph.size(), 0);
  for (const std::size_t bad : distinct) {
    const std::vector<char> marks = graph.ancestors({bad});
    for (std::size_t i = 0; i < graph.size(); ++i) hits[i] += marks[i];
  }
  const std::vector<char> good = graph.ancestors(goods);
  std::vector<char> marks(graph.size(), 0);
  for (std::size_t i = 0; i < graph.size(); ++i)
    marks[i] = !distinct.empty() && hits[i] == distinct.size() && !good[i];
  return marks;
}

namespace commit_detail {

std::vector<CommitVerdicts> count_verdicts(
    const std::vector<std::pair<std::string, Observation>>& log) {
  std::vector<CommitVerdicts> verdicts;
  std::unordered_map<std::string, std::size_t> where;
  for (const auto& [commit, observation] : log) {
    const auto found = where.emplace(commit, verdicts.size());
    if (found.second) verdicts.push_back(CommitVerdicts{commit});
    CommitVerdicts& counts = verdicts[found.first->second];
    ++(observation == Observation::Good  ? counts.good
       : observation == Observation::Bad ? counts.bad
                                         : counts.skip);
  }
  return verdicts;
}

nlohmann::json commits_to_json(const std::vector<Commit>& commits) {
  nlohmann::json out = nlohmann::json::array();
  for (const Commit& commit : commits)
    out.push_back({{"id", commit.id}, {"parents", commit.parents}});
  return out;
}

std::vector<Commit> commits_from_json(const nlohmann::json& json) {
  std::vector<Commit> commits;
  for (const auto& item : json)
    commits.push_back(
        {item.at("id").get<std::string>(), item.at("parents").get<std::vector<std::string>>()});
  return commits;
}

nlohmann::json log_to_json(const std::vector<std::pair<std::string, Observation>>& log) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [commit, observation] : log)
    out.push_back({{"commit", commit}, {"verdict", to_string(observation)}});
  return out;
}

std::vector<std::pair<std::string, Observation>> log_from_json(const nlohmann::json& json) {
  std::vector<std::pair<std::string, Observation>> log;
  for (const auto& item : json)
    log.emplace_back(item.at("commit").get<std::string>(),
                     observation_from_string(item.at("verdict").get<std::string>()));
  return log;
}

}  // namespace commit_detail
}  // namespace faultline::bisect
