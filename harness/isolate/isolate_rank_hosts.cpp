// Phase 2c, last part: a bad host or a bad rank. The odd ranks of a replica check are checked
// again with spare host labels standing in: the fault follows the rank, or ddmin over the hosts
// taking part names the host.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "bisect/ddmin.hpp"
#include "bisect/drive.hpp"
#include "harness/isolate/rank_agreement.hpp"
#include "harness/isolate/replica_check.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

namespace {

// The host labels each rank gets when only `kept` of the failing run's hosts take part: the
// others are replaced, in rank order, by spare labels. nullopt: not enough spares.
std::optional<std::vector<std::string>> hosts_keeping(const std::vector<std::string>& failing,
                                                      const std::vector<std::string>& spares,
                                                      const std::vector<size_t>& kept) {
  std::vector<std::string> hosts;
  size_t spare = 0;
  for (size_t rank = 0; rank < failing.size(); ++rank) {
    if (std::find(kept.begin(), kept.end(), rank) != kept.end()) {
      hosts.push_back(failing[rank]);
    } else {
      if (spare >= spares.size()) return std::nullopt;
      hosts.push_back(spares[spare++]);
    }
  }
  return hosts;
}

}  // namespace

std::string locate_rank_host(Context& context, const TrialSpec& spec, const ReplicaCheck& check,
                             const FingerprintRecord* expected, Fingerprinted what,
                             const std::vector<std::string>& failing_hosts,
                             const std::vector<std::string>& rank_hosts, RankLocation& location) {
  const int world = spec.ranks;
  auto host_of = [&](int rank) { return isolate::host_of(rank_hosts, rank); };
  if (location.ranks.size() == 1) location.host = host_of(location.ranks[0]);
  // Several odd ranks are one host's when they are exactly the ranks on it (a bad node of a
  // Slurm job with several tasks per node).
  if (location.ranks.size() > 1 && !host_of(location.ranks[0]).empty()) {
    bool exactly_its_ranks = true;
    for (int rank = 0; rank < world; ++rank)
      exactly_its_ranks = exactly_its_ranks && (host_of(rank) == host_of(location.ranks[0])) ==
                                                   has_rank(location.ranks, rank);
    if (exactly_its_ranks) location.host = host_of(location.ranks[0]);
  }

  const std::vector<std::string> spares(
      spec.hosts.begin() + static_cast<std::ptrdiff_t>(failing_hosts.size()), spec.hosts.end());
  if (location.ranks.empty() || failing_hosts.size() != static_cast<size_t>(world) ||
      spares.empty())
    return "";
  // Where the odd ranks of a replica check with `kept` ranks on their own hosts (the others on
  // spares) are: an odd rank on a spare took its fault with it, whatever the kept hosts do.
  enum class Odd { Nowhere, OnKeptHosts, OnSpares };
  auto odd_where = [&](const std::vector<std::string>& labels, const std::vector<size_t>& kept) {
    Outcome replica = context.run(check.replica(labels));
    if (replica.verdict == Verdict::InfraError)
      throw_not_run(replica, "a replica check on other hosts");
    const auto odd = odd_ranks(compare_ranks(context.store.fingerprints(replica.run_id), expected,
                                             check.step(), kRankTolerance, what));
    if (odd.empty()) return Odd::Nowhere;
    for (int rank : odd)
      if (std::find(kept.begin(), kept.end(), static_cast<size_t>(rank)) == kept.end())
        return Odd::OnSpares;
    return Odd::OnKeptHosts;
  };
  const std::string follows_rank = "; it stays with the rank on spare hosts too: not a host fault";
  context.begin_phase("ranks: which hosts", static_cast<int64_t>(2 * world));
  // First the odd ranks alone onto spares (one spare per odd rank is enough): still odd there,
  // the fault follows the rank. With one spare for two ranks, keeping the healthy rank's host
  // and moving the odd one was read by the search below as "that host is needed" before.
  std::vector<size_t> healthy;
  for (int rank = 0; rank < world; ++rank)
    if (!has_rank(location.ranks, rank)) healthy.push_back(static_cast<size_t>(rank));
  if (auto moved = hosts_keeping(failing_hosts, spares, healthy);
      moved && odd_where(*moved, healthy) == Odd::OnSpares) {
    location.host.clear();
    return follows_rank;
  }
  bool took_its_fault = false;  // a rank on a spare was odd: the fault is the rank's
  bisect::Ddmin search(static_cast<size_t>(world));
  bisect::drive(search, 1, [&](const std::vector<bisect::Subset>& proposals) {
    std::vector<bisect::Observation> observed;
    for (const auto& subset : proposals) {
      std::vector<size_t> kept(subset.begin(), subset.end());
      auto labels = hosts_keeping(failing_hosts, spares, kept);
      if (!labels || took_its_fault) {
        observed.push_back(bisect::Observation::Skip);
        continue;
      }
      const Odd odd = odd_where(*labels, kept);
      took_its_fault = took_its_fault || odd == Odd::OnSpares;
      observed.push_back(odd == Odd::OnKeptHosts ? bisect::Observation::Bad
                         : odd == Odd::Nowhere   ? bisect::Observation::Good
                                                 : bisect::Observation::Skip);
    }
    return observed;
  });
  if (took_its_fault) {
    location.host.clear();
    return follows_rank;
  }
  std::vector<std::string> found;
  for (size_t rank : search.failing_subset()) found.push_back(failing_hosts[rank]);
  location.host = found.size() == 1 ? found[0] : "";
  return fmt::format("; ddmin over the hosts taking part (spares standing in) needs {}",
                     fmt::join(found, ","));
}

}  // namespace faultline::harness::isolate
