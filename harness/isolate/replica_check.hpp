// The replica check of the ranks phase (internal to harness/isolate/): every rank fed the same
// batch at one step from the state before it, and the 1-rank reference replay of that batch.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "harness/isolate/isolate_phases.hpp"
#include "harness/trial/run_facts.hpp"
#include "trainer/sampler.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness::isolate {

// Whether `rank` is among `ranks`.
inline bool has_rank(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// The host label of `rank` (rank_hosts), "" when it has none.
inline std::string host_of(const std::vector<std::string>& hosts, int rank) {
  return static_cast<size_t>(rank) < hosts.size() ? hosts[static_cast<size_t>(rank)] : "";
}

class ReplicaCheck {
 public:
  ReplicaCheck(Context& context, const TrialSpec& spec, const Outcome& outcome, int64_t step)
      : context_(context), spec_(spec), step_(step) {
    // Rank 0's share of the step: one micro-batch every rank can hold. A command trainer's
    // batch is its own: its `batch` event of the step says which (its first 1/N here).
    if (context.trainer.is_command()) {
      auto batch = batch_event(context.store, outcome.run_id, step);
      if (batch.empty())
        throw InfraError("the trainer wrote no batch event for step " + std::to_string(step) +
                         " (run " + std::to_string(outcome.run_id) +
                         "): the replica check needs it (faultline_probe.py writes it)");
      batch.resize(std::max<size_t>(1, batch.size() / static_cast<size_t>(spec.ranks)));
      samples_ = batch;
    } else {
      const auto config = trainer::load_train_config(spec.config_path, trial_overrides(spec));
      trainer::BatchSampler sampler(static_cast<uint64_t>(config.train.seed),
                                    samples_used(context.store, outcome.run_id),
                                    static_cast<uint64_t>(config.train.batch_size));
      samples_ = trainer::BatchSampler::rank_slice(sampler.global_batch(step), 0, spec.ranks);
    }
    if (auto before = contract::last_before(checkpoints_of(context, outcome), step)) {
      from_ = before->step;
      from_path_ = before->path;
    }
  }

  // Every rank fed the same batch, from the state before the step, on these hosts.
  TrialSpec replica(const std::vector<std::string>& hosts) const {
    const auto& trainer = context_.trainer;
    TrialSpec spec = trainer.replica(replay_spec());
    // The 1-rank replay needs the state of step - 1: written here when no checkpoint has it.
    spec = trainer.checkpoint_every(spec, from_ == step_ - 1 ? 0 : 1);
    spec.resume = from_path_;
    spec.stop_after = step_;
    spec.hosts = hosts;
    return spec;
  }

  // The same batch on one rank (no host label: anywhere), from the same state.
  TrialSpec reference(const Outcome& replica) const {
    TrialSpec spec = context_.trainer.checkpoint_every(replay_spec(), 0);
    spec.ranks = 1;
    spec.hosts.clear();
    spec.stop_after = step_;
    spec.resume = step_ == 1 ? "" : from_ == step_ - 1 ? from_path_ : written_before_step(replica);
    return spec;
  }

  int64_t step() const { return step_; }
  int64_t from_step() const { return from_; }  // the checkpoint its replays start from; 0: none

 private:
  TrialSpec replay_spec() const {
    const auto& trainer = context_.trainer;
    TrialSpec spec = trainer.fingerprints_every_step(spec_);
    spec = trainer.checkpoint_on_halt(spec, false);
    return trainer.replay(spec, step_, samples_);
  }

  std::string written_before_step(const Outcome& replica) const {
    auto written = contract::at_step(checkpoints_of(context_, replica), step_ - 1);
    if (!written)
      throw InfraError("the replica check wrote no checkpoint of step " +
                       std::to_string(step_ - 1) + " (run " + std::to_string(replica.run_id) + ")");
    return written->path;
  }

  Context& context_;
  const TrialSpec& spec_;
  int64_t step_;
  std::vector<uint64_t> samples_;
  int64_t from_ = 0;
  std::string from_path_;
};

// A bad host or a bad rank (isolate_rank_hosts.cpp): with spare labels after the run's own
// `failing_hosts` (`spec.hosts` beyond its ranks), the replica check is run again on other hosts
// and compared on `what` with `expected`. Sets location.host ("" when not one host); returns the
// note the finding's detail ends with.
std::string locate_rank_host(Context& context, const TrialSpec& spec, const ReplicaCheck& check,
                             const FingerprintRecord* expected, Fingerprinted what,
                             const std::vector<std::string>& failing_hosts,
                             const std::vector<std::string>& rank_hosts, RankLocation& location);

}  // namespace faultline::harness::isolate
