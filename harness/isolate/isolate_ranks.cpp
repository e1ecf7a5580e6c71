// Phase 2c: which rank disagrees. The step: where the ranks' own parameters part (data parallel
// keeps them bitwise equal), or else where a multi-rank run's parameters leave a 1-rank run that
// replays the same global batches (N-fold accumulation). There every rank is fed the same batch
// from the state before the step (a replica check) and compared with a 1-rank replay of that
// batch: gradients, then parameters. Spare host labels then tell a bad host from a bad rank.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

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
// rank shows here next to the fingerprint verdicts. A time the trainer does not measure is null.
std::map<int, json> timing_by_rank(store::Store& store, int64_t run_id) {
  std::map<int, std::vector<double>> step_ms, data_ms, comm_ms;
  for (const auto& record : store.steps(run_id)) {
    step_ms[record.rank];  // every rank gets its entry
    if (record.step_ms) step_ms[record.rank].push_back(*record.step_ms);
    if (record.data_ms) data_ms[record.rank].push_back(*record.data_ms);
    if (record.comm_ms) comm_ms[record.rank].push_back(*record.comm_ms);
  }
  std::map<int, json> timing;
  for (const auto& [rank, values] : step_ms)
    timing[rank] = {{"median_step_ms", number_or_null(detectors::median(values))},
                    {"median_data_ms", number_or_null(detectors::median(data_ms[rank]))},
                    {"median_comm_ms", number_or_null(detectors::median(comm_ms[rank]))}};
  return timing;
}

// The last step before `step` with a params fingerprint of rank 0 among `prints` (0: none).
int64_t fingerprinted_before(const std::vector<FingerprintRecord>& prints, int64_t step) {
  int64_t last = 0;
  for (const auto& record : prints)
    if (record.is(Fingerprinted::Params) && record.rank == 0 && record.step < step)
      last = std::max(last, record.step);
  return last;
}

void require_ran(const Outcome& outcome, const std::string& what) {
  if (outcome.verdict == Verdict::InfraError) throw_not_run(outcome, what);
}

// A run that fingerprints sparsely (a stored run) dates a step only to after its last agreeing
// fingerprint, `agreed`: the window (agreed, step] replayed at the run's ranks from the
// checkpoint before it, with a fingerprint every step. nullopt when no window is needed.
std::optional<Outcome> exact_window(Context& context, const TrialSpec& spec, const Outcome& outcome,
                                    int64_t agreed, int64_t step) {
  if (agreed == step - 1) return std::nullopt;
  const auto& trainer = context.trainer;
  auto from = contract::last_before(checkpoints_of(context, outcome), agreed + 1);
  context.begin_phase("ranks: replay steps " + std::to_string((from ? from->step : 0) + 1) + ".." +
                          std::to_string(step) + " fingerprinting every step",
                      1);
  Outcome window = context.run(
      trainer.prefix(trainer.fingerprints_every_step(trainer.resume(spec, from)), step));
  require_ran(window, "the replay of the diverging window");
  return window;
}

// One replica check and its verdict.
struct Checked {
  std::optional<ReplicaCheck> check;
  Outcome reference;  // one rank fed the same batch
  std::vector<RankAgreement> agreement;
  Fingerprinted compared = Fingerprinted::Grads;  // Params where the gradients agreed
};

// Every rank fed the same batch at `step` from the state before it, against one rank fed it.
// Their local gradients are compared first; where those agree, their parameters after the step:
// a rank that applied the same gradient differently (its optimizer or its state, or a corruption
// after the allreduce). location.ranks is empty when every rank agrees on both.
void replica_check_at(Context& context, const TrialSpec& spec, const Outcome& located, int64_t step,
                      const std::vector<std::string>& failing_hosts, RankLocation& location,
                      Checked& checked) {
  context.begin_phase("ranks: replica check at step " + std::to_string(step), 2);
  checked.check.emplace(context, spec, located, step);
  location = RankLocation{};
  location.step = step;
  location.replica_spec = checked.check->replica(failing_hosts);
  location.replica_from = checked.check->from_step();
  location.replica_outcome = context.run(location.replica_spec);
  require_ran(location.replica_outcome, "the replica check");
  checked.reference = context.run(checked.check->reference(location.replica_outcome));
  require_ran(checked.reference, "the 1-rank reference replay");
  const auto replica_prints = context.store.fingerprints(location.replica_outcome.run_id);
  const auto reference_prints = context.store.fingerprints(checked.reference.run_id);
  for (Fingerprinted what : {Fingerprinted::Grads, Fingerprinted::Params}) {
    checked.compared = what;
    checked.agreement = compare_ranks(replica_prints, print_at(reference_prints, what, step), step,
                                      kRankTolerance, what);
    location.ranks = odd_ranks(checked.agreement);
    if (!location.ranks.empty()) break;
  }
  location.phase = to_string(checked.compared == Fingerprinted::Params ? AnomalyPhase::Optimizer
                                                                       : AnomalyPhase::Backward);
}

// How the step was found: the first part of the detail, and its evidence.
struct StepFound {
  std::string how;
  json evidence;
};

// 1. Data parallel keeps every rank's parameters bitwise equal: where the run's own params
// fingerprints part, after agreeing, a rank applied an update of its own, and a replica check at
// that step shows which. No 1-rank replay is needed. nullopt: none parted (`split`, the run's
// first_params_split), or the replica check there shows no odd rank (then the 1-rank replay
// below searches).
std::optional<StepFound> at_params_split(Context& context, const TrialSpec& spec,
                                         const Outcome& outcome, std::optional<ParamsSplit> split,
                                         const std::vector<std::string>& failing_hosts,
                                         RankLocation& location, Checked& checked) {
  // Ranks whose parameters never agreed hold different ones by design (model parallelism).
  if (!split || split->agreed < 0) return std::nullopt;
  Outcome located = outcome;
  if (auto window = exact_window(context, spec, outcome, split->agreed, split->step)) {
    auto exact = first_params_split(context.store.fingerprints(window->run_id));
    if (!exact) return std::nullopt;  // the replay's ranks agree: the split did not come again
    split = exact;
    located = *window;
  }
  replica_check_at(context, spec, located, split->step, failing_hosts, location, checked);
  if (location.ranks.empty()) return std::nullopt;
  return StepFound{
      fmt::format("the ranks' parameters parted after step {} (rank(s) {} differ from rank 0's; "
                  "data parallel keeps them bitwise equal)",
                  split->step, fmt::join(split->ranks, ",")),
      {{"params_split_step", split->step}}};
}

// One checkpoint interval of the run, (from, to].
struct Interval {
  std::optional<contract::Checkpoint> from;  // nullopt: step 0
  int64_t to = 0;
};

// 2. The first step whose update leaves a 1-rank replay of the same global batches, checked by a
// replica check there. Each checkpoint interval is replayed on one rank from the run's own
// checkpoint: the whole run once at 1/N of its rank-steps, and the reduction-order drift starts
// again from 0 each interval. nullopt: the ranks agree.
std::optional<StepFound> at_replay_divergence(Context& context, const TrialSpec& spec,
                                              const Outcome& outcome,
                                              const std::vector<FingerprintRecord>& run_prints,
                                              const std::vector<std::string>& failing_hosts,
                                              RankLocation& location, Checked& checked) {
  const auto& trainer = context.trainer;
  const TrialSpec single = trainer.fingerprints_every_step(
      trainer.accumulate(spec, 1, trainer.grad_accum(spec) * spec.ranks));
  std::vector<Interval> intervals;
  std::optional<contract::Checkpoint> start;
  for (const auto& checkpoint : checkpoints_of(context, outcome)) {
    if (checkpoint.step >= outcome.last_step) break;
    intervals.push_back({start, checkpoint.step});
    start = checkpoint;
  }
  intervals.push_back({start, outcome.last_step});
  context.begin_phase(
      "ranks: compare with 1 rank, " + std::to_string(intervals.size()) + " interval(s)",
      static_cast<int64_t>(intervals.size()));
  std::vector<TrialSpec> replays;
  for (const auto& interval : intervals)
    replays.push_back(trainer.prefix(trainer.resume(single, interval.from), interval.to));
  std::vector<int64_t> alone_run_ids;                        // one per interval, in step order
  std::vector<std::vector<FingerprintRecord>> alone_prints;  // read once, for every candidate
  for (const auto& alone : context.run(replays)) {
    require_ran(alone, "the 1-rank replay");
    alone_run_ids.push_back(alone.run_id);
    alone_prints.push_back(context.store.fingerprints(alone.run_id));
  }
  // The first candidate after `after`, interval by interval.
  auto next_candidate =
      [&](int64_t after,
          const std::vector<FingerprintRecord>& prints) -> std::optional<Divergence> {
    for (size_t i = 0; i < intervals.size(); ++i) {
      const int64_t from = intervals[i].from ? intervals[i].from->step : 0;
      if (intervals[i].to <= after) continue;
      std::vector<FingerprintRecord> inside;
      for (const auto& record : prints)
        if (record.step > from && record.step <= intervals[i].to) inside.push_back(record);
      if (auto found = first_divergence(inside, alone_prints[i], Fingerprinted::Params,
                                        kRankTolerance, std::max(after, from)))
        return found;
    }
    return std::nullopt;
  };

  // The replica check at each candidate step. Drift that jumped by chance shows no odd rank
  // there: the next candidate after it is tried, up to kCandidates.
  constexpr int kCandidates = 3;
  int64_t after = 0;
  for (int candidate = 0; candidate < kCandidates; ++candidate) {
    auto divergence = next_candidate(after, run_prints);
    if (!divergence) return std::nullopt;
    Outcome located = outcome;
    const int64_t agreed = fingerprinted_before(run_prints, divergence->step);
    if (auto window = exact_window(context, spec, outcome, agreed, divergence->step)) {
      // The run's own fingerprints before the window keep the drift measured so far.
      auto prints = context.store.fingerprints(window->run_id);
      int64_t first = INT64_MAX;
      for (const auto& record : prints) first = std::min(first, record.step);
      for (const auto& record : run_prints)
        if (record.step < first) prints.push_back(record);
      if (auto exact = next_candidate(after, prints)) {
        divergence = exact;
        located = *window;
      }
    }
    replica_check_at(context, spec, located, divergence->step, failing_hosts, location, checked);
    if (!location.ranks.empty())
      return StepFound{fmt::format("step {}'s update differs from a 1-rank replay (distance "
                                   "{:.3g} > {:g})",
                                   divergence->step, divergence->distance, kRankTolerance),
                       {{"healthy_max_distance", divergence->healthy_max},
                        {"divergence_distance", number_or_null(divergence->distance)},
                        {"one_rank_run", alone_run_ids.front()},
                        {"one_rank_runs", alone_run_ids}}};
    after = divergence->step;
  }
  return std::nullopt;  // drift only: every candidate's ranks agree
}

}  // namespace

std::optional<RankLocation> locate_diverging_ranks(Context& context, const TrialSpec& spec,
                                                   const Outcome& outcome) {
  if (spec.ranks < 2) return std::nullopt;
  std::vector<std::string> failing_hosts = spec.hosts;
  failing_hosts.resize(std::min(spec.hosts.size(), static_cast<size_t>(spec.ranks)));
  const auto run_prints = context.store.fingerprints(outcome.run_id);
  const auto split = first_params_split(run_prints);
  RankLocation location;
  Checked checked;
  auto found = at_params_split(context, spec, outcome, split, failing_hosts, location, checked);
  if (!found)
    found =
        at_replay_divergence(context, spec, outcome, run_prints, failing_hosts, location, checked);
  if (!found) return std::nullopt;

  // A bad host or a bad rank: with spare labels, the hosts taking part are searched.
  const auto hosts = rank_hosts(context.store, location.replica_outcome.run_id);
  const auto reference_prints = context.store.fingerprints(checked.reference.run_id);
  const std::string host_note =
      locate_rank_host(context, spec, *checked.check,
                       print_at(reference_prints, checked.compared, checked.check->step()),
                       checked.compared, failing_hosts, hosts, location);

  // The evidence: one row per rank.
  const auto timing = timing_by_rank(context.store, outcome.run_id);
  json table = json::array();
  for (const auto& rank : checked.agreement) {
    json row = {{"rank", rank.rank},
                {"host", host_of(hosts, rank.rank)},
                {fmt::format("{}_hash", to_string(checked.compared)), rank.hash},
                {"distance", number_or_null(rank.distance)},
                {"agreeing_peers", rank.peers},
                {"verdict", has_rank(location.ranks, rank.rank) ? "odd" : "agrees"}};
    if (timing.count(rank.rank)) row.update(timing.at(rank.rank));
    table.push_back(row);
  }
  location.evidence = found->evidence;
  location.evidence.update({{"ranks", table},
                            {"compared", to_string(checked.compared)},
                            {"tolerance", kRankTolerance},
                            {"reference_run", checked.reference.run_id},
                            {"replica_run", location.replica_outcome.run_id}});
  const std::string odd = fmt::format("{}", fmt::join(location.ranks, ","));
  location.detail = fmt::format(
      "{}; fed the same batch, rank(s) {} {}{}{}", found->how, odd,
      checked.compared == Fingerprinted::Params
          ? "compute the same gradients as the others but end the step with other parameters: "
            "they applied the update differently (the optimizer or its state there, or a "
            "corruption after the allreduce)"
          : "compute different local gradients",
      location.host.empty() ? "" : " (host " + location.host + ")", host_note);
  // Found by the 1-rank replay, yet the odd ranks' parameters parted earlier, in a split that a
  // replay from before it did not repeat: said, not hidden.
  if (split && split->agreed >= 0 && split->step < location.step &&
      std::all_of(split->ranks.begin(), split->ranks.end(),
                  [&](int rank) { return has_rank(location.ranks, rank); })) {
    location.evidence["params_split_step"] = split->step;
    location.detail += fmt::format(
        "; but their parameters already differed from rank 0's after step {}: that step's "
        "update was applied differently on rank(s) {}, which a replay from before it did not "
        "repeat",
        split->step, fmt::join(split->ranks, ","));
  }
  return location;
}

}  // namespace faultline::harness::isolate
