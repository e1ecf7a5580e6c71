// What a search may ask of a trainer; each trainer declares which it can do (DESIGN.md, "The
// trainer contract"). One table of names, for recipes and messages.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace faultline::harness::contract {

enum class Capability {
  Prefix,               // stop after step N
  Resume,               // continue bitwise from a checkpoint
  Checkpoints,          // write a checkpoint every N steps, and the last good state on a halt
  DataFraction,         // train on a fraction of the data
  CheaperWithLessData,  // ... and a smaller fraction makes a trial cheaper (epoch-bound runs)
  Accumulate,           // one rank replays an N-rank global batch with N-fold accumulation
  FullProbes,           // per-module probes from step k
  ReplaySamples,        // replay step k on a subset of its samples
  ReplicaMode,          // every rank fed the same batch
  Fingerprints,         // a bitwise digest of grads and params every step
};
const char* to_string(Capability capability);
std::optional<Capability> parse_capability(const std::string& name);
std::vector<std::string> capability_names();
// Every capability (what faultline-train and a script using faultline_probe.py provide).
const std::vector<Capability>& all_capabilities();
// Carried only by the metrics protocol (probes, sample replays, replicas, fingerprints): a
// log-only trainer's records are the lines it prints, so it cannot have these.
bool needs_metrics_protocol(Capability capability);

}  // namespace faultline::harness::contract
