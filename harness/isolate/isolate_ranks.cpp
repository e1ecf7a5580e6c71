// Phase 2c: which rank disagrees. A multi-rank run's parameters after each step are compared with
// a 1-rank run that replays the same global batches (N-fold accumulation); at the first step they
// part, every rank is fed the same batch from the state before the step (a replica check) and
// compared with a 1-rank replay of that batch. Spare host labels then tell a bad host from a bad
// rank: ddmin over the hosts taking part, healthy spares standing in for the others.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "bisect/ddmin.hpp"
#include "bisect/drive.hpp"
#include "harness/isolate/isolate_phases.hpp"
#include "harness/isolate/rank_agreement.hpp"
#include "harness/isolate/replica_check.hpp"
#include "harness/trial/run_facts.hpp"
#include "probes/detectors/stats.hpp"
#include "store/store.hpp"
#include "trainer/sampler.hpp"

namespace faultline::harness::isolate {

namespace {

using nlohmann::json;

json number_or_null(double value) {
  return std::isfinite(value) ? json(value) : json();
}

// Step, data and collective time of each rank in the run (its medians): a straggler or starved
// rank shows here next to the fingerprint verdicts.
std::map<int, json> timing_by_rank(store::Store& store, int64_t run_id) {
  std::map<int, std::vector<double>> step_ms, data_ms, comm_ms;
  for (const auto& record : store.steps(run_id)) {
    step_ms[record.rank].push_back(record.step_ms);
    data_ms[record.rank].push_back(record.data_ms);
    comm_ms[record.rank].push_back(record.comm_ms);
  }
  std::map<int, json> timing;
  for (const auto& [rank, values] : step_ms)
    timing[rank] = {{"median_step_ms", number_or_null(detectors::median(values))},
                    {"median_data_ms", number_or_null(detectors::median(data_ms[rank]))},
                    {"median_comm_ms", number_or_null(detectors::median(comm_ms[rank]))}};
  return timing;
}

// The steps of rank 0's params fingerprints in a run.
std::vector<int64_t> fingerprinted_steps(store::Store& store, int64_t run_id) {
  std::vector<int64_t> steps;
  for (const auto& record : store.fingerprints(run_id))
    if (record.what == "params" && record.rank == 0) steps.push_back(record.step);
  return steps;
}

// nullopt when the step before `step` is fingerprinted (the divergence is exact); else the
// window after the last fingerprinted step, replayed at the run's ranks with a fingerprint
// every step.
std::optional<Outcome> exact_window(Context& context, const TrialSpec& spec, const Outcome& outcome,
                                    int64_t step) {
  int64_t agreed = 0;
  for (int64_t fingerprinted : fingerprinted_steps(context.store, outcome.run_id))
    if (fingerprinted < step) agreed = std::max(agreed, fingerprinted);
  if (agreed == step - 1) return std::nullopt;
  const auto& trainer = context.trainer;
  auto from = contract::last_before(checkpoints_of(context, outcome), agreed + 1);
  context.begin_phase("ranks: replay steps " + std::to_string((from ? from->step : 0) + 1) + ".." +
                          std::to_string(step) + " fingerprinting every step",
                      1);
  return context.run(
      trainer.prefix(trainer.fingerprints_every_step(trainer.resume(spec, from)), step));
}

// One checkpoint interval of the run, (from, to], and its 1-rank replay.
struct Interval {
  std::optional<contract::Checkpoint> from;  // nullopt: step 0
  int64_t to = 0;
  int64_t alone_run = 0;
};

void require_ran(const Outcome& outcome, const std::string& what) {
  if (outcome.verdict == Verdict::InfraError)
    throw InfraError(what + " could not run (run " + std::to_string(outcome.run_id) +
                     "): " + outcome.infra_detail);
}

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

std::optional<RankLocation> locate_diverging_ranks(Context& context, const TrialSpec& spec,
                                                   const Outcome& outcome) {
  const int world = spec.ranks;
  if (world < 2) return std::nullopt;

  // 1. The first step whose update leaves a 1-rank replay of the same global batches. Each
  // checkpoint interval is replayed on one rank from the run's own checkpoint: the whole run once
  // at 1/N of its rank-steps, and the reduction-order drift starts again from 0 each interval.
  const auto& trainer = context.trainer;
  const TrialSpec single = trainer.fingerprints_every_step(
      trainer.accumulate(spec, 1, trainer.grad_accum(spec) * world));
  std::vector<Interval> intervals;
  std::optional<contract::Checkpoint> start;
  for (const auto& checkpoint : checkpoints_of(context, outcome)) {
    if (checkpoint.step >= outcome.last_step) break;
    intervals.push_back({start, checkpoint.step, 0});
    start = checkpoint;
  }
  intervals.push_back({start, outcome.last_step, 0});
  context.begin_phase(
      "ranks: compare with 1 rank, " + std::to_string(intervals.size()) + " interval(s)",
      static_cast<int64_t>(intervals.size()));
  std::vector<TrialSpec> replays;
  for (const auto& interval : intervals)
    replays.push_back(trainer.prefix(trainer.resume(single, interval.from), interval.to));
  const auto alone_runs = context.run(replays);
  for (size_t i = 0; i < intervals.size(); ++i) {
    require_ran(alone_runs[i], "the 1-rank replay");
    intervals[i].alone_run = alone_runs[i].run_id;
  }
  const int64_t alone_run = alone_runs.front().run_id;
  const auto run_prints = context.store.fingerprints(outcome.run_id);
  // The first candidate after `after`, interval by interval.
  auto next_candidate =
      [&](int64_t after,
          const std::vector<FingerprintRecord>& prints) -> std::optional<Divergence> {
    for (const auto& interval : intervals) {
      const int64_t from = interval.from ? interval.from->step : 0;
      if (interval.to <= after) continue;
      std::vector<FingerprintRecord> inside;
      for (const auto& record : prints)
        if (record.step > from && record.step <= interval.to) inside.push_back(record);
      if (auto found = first_divergence(inside, context.store.fingerprints(interval.alone_run),
                                        "params", kRankTolerance, std::max(after, from)))
        return found;
    }
    return std::nullopt;
  };

  // 2. The replica check at each candidate step. Drift that jumped by chance shows no odd rank
  // there: the next candidate after it is tried, up to kCandidates.
  constexpr int kCandidates = 3;
  std::vector<std::string> failing_hosts = spec.hosts;
  failing_hosts.resize(std::min(spec.hosts.size(), static_cast<size_t>(world)));
  std::optional<Divergence> divergence;
  std::optional<ReplicaCheck> check;
  RankLocation location;
  std::vector<RankAgreement> agreement;
  Outcome reference;
  int64_t after = 0;
  for (int candidate = 0; candidate < kCandidates; ++candidate) {
    divergence = next_candidate(after, run_prints);
    if (!divergence) return std::nullopt;
    // A run that fingerprints sparsely (a stored run) dates the divergence only to after its
    // last agreeing fingerprint: that window is replayed at its ranks, fingerprinting every
    // step, from the checkpoint before it.
    Outcome located = outcome;
    if (auto window = exact_window(context, spec, outcome, divergence->step)) {
      require_ran(*window, "the replay of the diverging window");
      // The run's own fingerprints before the window keep the drift measured so far.
      auto prints = context.store.fingerprints(window->run_id);
      int64_t first = INT64_MAX;
      for (const auto& record : prints) first = std::min(first, record.step);
      for (const auto& record : context.store.fingerprints(outcome.run_id))
        if (record.step < first) prints.push_back(record);
      if (auto exact = next_candidate(after, prints)) {
        divergence = exact;
        located = *window;
      }
    }
    context.begin_phase("ranks: replica check at step " + std::to_string(divergence->step), 2);
    check.emplace(context, spec, located, divergence->step);
    location = RankLocation{};
    location.step = divergence->step;
    location.replica_spec = check->replica(failing_hosts);
    location.replica_from = check->from_step();
    location.replica_outcome = context.run(location.replica_spec);
    require_ran(location.replica_outcome, "the replica check");
    reference = context.run(check->reference(location.replica_outcome));
    require_ran(reference, "the 1-rank reference replay");
    agreement = compare_ranks(context.store.fingerprints(location.replica_outcome.run_id),
                              grads_at(context.store.fingerprints(reference.run_id), check->step()),
                              check->step(), kRankTolerance);
    location.ranks = odd_ranks(agreement);
    if (!location.ranks.empty()) break;
    after = divergence->step;
  }
  if (location.ranks.empty()) return std::nullopt;  // drift only: every candidate's ranks agree
  const auto reference_prints = context.store.fingerprints(reference.run_id);
  const FingerprintRecord* expected = grads_at(reference_prints, check->step());

  // 3. A bad host or a bad rank: with spare labels, the hosts taking part are searched.
  const auto hosts = rank_hosts(context.store, location.replica_outcome.run_id);
  auto host_of = [&](int rank) {
    return static_cast<size_t>(rank) < hosts.size() ? hosts[static_cast<size_t>(rank)] : "";
  };
  std::string host_note;
  if (location.ranks.size() == 1) location.host = host_of(location.ranks[0]);
  // Several odd ranks are one host's when they are exactly the ranks on it (a bad node of a
  // Slurm job with several tasks per node).
  if (location.ranks.size() > 1 && !host_of(location.ranks[0]).empty()) {
    bool exactly_its_ranks = true;
    for (int rank = 0; rank < world; ++rank)
      exactly_its_ranks =
          exactly_its_ranks && (host_of(rank) == host_of(location.ranks[0])) ==
                                   (std::find(location.ranks.begin(), location.ranks.end(), rank) !=
                                    location.ranks.end());
    if (exactly_its_ranks) location.host = host_of(location.ranks[0]);
  }
  const std::vector<std::string> spares(
      spec.hosts.begin() + static_cast<std::ptrdiff_t>(failing_hosts.size()), spec.hosts.end());
  if (!location.ranks.empty() && failing_hosts.size() == static_cast<size_t>(world) &&
      !spares.empty()) {
    auto disagrees = [&](const std::vector<std::string>& labels) {
      Outcome replica = context.run(check->replica(labels));
      require_ran(replica, "a replica check on other hosts");
      return !odd_ranks(compare_ranks(context.store.fingerprints(replica.run_id), expected,
                                      check->step(), kRankTolerance))
                  .empty();
    };
    context.begin_phase("ranks: which hosts", static_cast<int64_t>(2 * world));
    auto none_kept = hosts_keeping(failing_hosts, spares, {});
    if (none_kept && disagrees(*none_kept)) {
      location.host.clear();
      host_note = "; it stays with the rank on spare hosts too: not a host fault";
    } else {
      bisect::Ddmin search(static_cast<size_t>(world));
      bisect::drive(search, 1, [&](const std::vector<bisect::Subset>& proposals) {
        std::vector<bisect::Observation> observed;
        for (const auto& subset : proposals) {
          std::vector<size_t> kept(subset.begin(), subset.end());
          auto labels = hosts_keeping(failing_hosts, spares, kept);
          observed.push_back(!labels              ? bisect::Observation::Skip
                             : disagrees(*labels) ? bisect::Observation::Bad
                                                  : bisect::Observation::Good);
        }
        return observed;
      });
      std::string found;
      for (size_t rank : search.failing_subset())
        found += (found.empty() ? "" : ",") + failing_hosts[rank];
      location.host = search.failing_subset().size() == 1 ? found : "";
      host_note = "; ddmin over the hosts taking part (spares standing in) needs " + found;
    }
  }

  // The evidence: one row per rank.
  const auto timing = timing_by_rank(context.store, outcome.run_id);
  json table = json::array();
  for (const auto& rank : agreement) {
    json row = {{"rank", rank.rank},
                {"host", host_of(rank.rank)},
                {"grads_hash", rank.hash},
                {"distance", number_or_null(rank.distance)},
                {"agreeing_peers", rank.peers},
                {"verdict", std::find(location.ranks.begin(), location.ranks.end(), rank.rank) !=
                                    location.ranks.end()
                                ? "odd"
                                : "agrees"}};
    if (timing.count(rank.rank)) row.update(timing.at(rank.rank));
    table.push_back(row);
  }
  location.evidence = {{"ranks", table},
                       {"tolerance", kRankTolerance},
                       {"healthy_max_distance", divergence->healthy_max},
                       {"divergence_distance", number_or_null(divergence->distance)},
                       {"one_rank_run", alone_run},
                       {"reference_run", reference.run_id},
                       {"replica_run", location.replica_outcome.run_id}};
  location.detail = fmt::format(
      "step {}'s update differs from a 1-rank replay (distance {:.3g} > {:g}); fed the same "
      "batch, rank(s) {} compute different local gradients{}{}",
      location.step, divergence->distance, kRankTolerance, fmt::join(location.ranks, ","),
      location.host.empty() ? "" : " (host " + location.host + ")", host_note);
  // Parameters that parted before the gradients did: the odd ranks applied an update of their
  // own (the same averaged gradient, another result: the optimizer or its state on those ranks,
  // or a corruption after the allreduce), and the gradients of the step after show it.
  if (auto split = first_params_split(run_prints);
      split && split->step < location.step &&
      std::all_of(split->ranks.begin(), split->ranks.end(), [&](int rank) {
        return std::find(location.ranks.begin(), location.ranks.end(), rank) !=
               location.ranks.end();
      })) {
    location.evidence["params_split_step"] = split->step;
    location.detail += fmt::format(
        "; but their parameters already differed from rank 0's after step {}: that step's "
        "update was applied differently on rank(s) {} (the averaged gradient, the optimizer or "
        "its state there), and the gradients of step {} only show it",
        split->step, fmt::join(split->ranks, ","), location.step);
  }
  return location;
}

}  // namespace faultline::harness::isolate
