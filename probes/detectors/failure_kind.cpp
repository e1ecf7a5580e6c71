// Names of the failure kinds: the one table that spells them.
#include "probes/detectors/failure_kind.hpp"

#include <array>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace faultline::detectors {

namespace {

struct KindInfo {
  FailureKind kind;
  const char* name;
  Severity severity;
  const char* hint;
};

constexpr Severity F = Severity::Failure;
constexpr std::array<KindInfo, 21> kNames = {{
    {FailureKind::Nonfinite, "nonfinite", F, ""},
    {FailureKind::Data, "data", F, ""},
    {FailureKind::LossSpike, "loss_spike", F,
     "a rise from the run's start is a learning rate too high for the model or a missing LR "
     "warm-up; a spike later is that step's batch or its LR: compare the step's lr and "
     "grad_norm with the steps before it"},
    {FailureKind::Stalled, "stalled", F,
     "the loss does not fall: a learning rate far too low, or parameters that are not trained "
     "(frozen, detached from the loss, or not given to the optimizer)"},
    {FailureKind::GradExplode, "grad_explode", F,
     "gradients stay far above normal: a learning rate too high, or no gradient clipping (or "
     "a clip applied before the loss scale is undone)"},
    {FailureKind::GradVanish, "grad_vanish", F,
     "gradients near zero: parameters detached from the loss, a loss multiplied by zero "
     "(a mask that drops every token), or saturated activations"},
    {FailureKind::LrAnomaly, "lr_anomaly", F, ""},
    {FailureKind::Memory, "memory", F,
     "memory that grows each step is usually tensors kept across steps (a loss or logits "
     "appended to a list without .item() or .detach()); near the limit: a smaller batch or "
     "activation checkpointing"},
    {FailureKind::Slow, "slow", F, ""},
    {FailureKind::Straggler, "straggler", F,
     "one rank computes slower than its peers: its host or device (clock, throttling, a busy "
     "neighbour) or more work given to that rank; a rerun without that host (on Slurm: --set "
     "launcher.exclude=NODE) tells which"},
    {FailureKind::DataStall, "data_stall", F,
     "the rank waits for its batches: more loader workers or prefetching, or faster storage "
     "for its shards"},
    {FailureKind::RankDivergence, "rank_divergence", F,
     "one rank computes other numbers from the same state: its host or device computes wrongly "
     "(silent data corruption: take it out of service and rerun there) or its code or data "
     "differ from the others'"},
    {FailureKind::Nondeterministic, "nondeterministic", F,
     "two runs of one config differ: a nondeterministic kernel (atomic adds in scatter, "
     "index_add or embedding backward on a GPU, benchmark-chosen algorithms) or a random "
     "source not seeded from the config"},
    {FailureKind::Crash, "crash", F, ""},
    {FailureKind::Hang, "hang", F, ""},
    {FailureKind::Oom, "oom", F, ""},
    {FailureKind::Anomaly, "anomaly", F, ""},
    {FailureKind::LossRegression, "loss_regression", F,
     "compare the run's config with the reference's (learning rate, batch size, warm-up, weight "
     "decay); `faultline reference show NAME` lists its runs"},
    {FailureKind::BadInit, "bad_init", Severity::Warning,
     "the model starts miscalibrated: check model.init_std and the output layer's init (a "
     "uniform prediction gives ln(vocab size))"},
    {FailureKind::SlowComm, "slow_comm", Severity::Warning,
     "its NCCL kernels run longer: a slow link or GPU at that rank, or it reaches each collective "
     "first and waits for late peers; `faultline check nccl` measures the links"},
    {FailureKind::TeardownCrash, "teardown_crash", Severity::Warning,
     "every step trained and its records and checkpoints are whole; the process died as it shut "
     "down (a process group, DDP model or thread torn down at interpreter exit while a peer "
     "was still connected is the usual cause), which a scheduler still counts as a failed job"},
}};

}  // namespace

const char* to_string(FailureKind kind) {
  for (const auto& each : kNames)
    if (each.kind == kind) return each.name;
  return "?";
}

Severity severity(FailureKind kind) {
  for (const auto& each : kNames)
    if (each.kind == kind) return each.severity;
  return Severity::Failure;
}

const char* to_string(Severity severity) {
  return severity == Severity::Warning ? "warning" : "failure";
}

const char* hint(FailureKind kind) {
  for (const auto& each : kNames)
    if (each.kind == kind) return each.hint;
  return "";
}

const char* hint(std::string_view kind_name) {
  const auto kind = parse_failure_kind(kind_name);
  return kind ? hint(*kind) : "";
}

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (const auto& each : kNames)
    if (name == each.name) return each.kind;
  return std::nullopt;
}

std::vector<std::string> failure_kind_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) names.emplace_back(entry.name);
  return names;
}

bool is_timing(FailureKind kind) {
  return kind == FailureKind::Straggler || kind == FailureKind::DataStall ||
         kind == FailureKind::Slow;
}

bool is_seen_at_its_step(FailureKind kind) {
  switch (kind) {
    case FailureKind::Nonfinite:
    case FailureKind::Data:
    case FailureKind::LossSpike:
    case FailureKind::Crash:
    case FailureKind::Hang:
    case FailureKind::Oom:
    case FailureKind::Anomaly:
      return true;
    default:
      return false;
  }
}

bool is_curve(FailureKind kind) {
  return kind == FailureKind::LossRegression;
}

int localization_rank(FailureKind kind) {
  switch (kind) {
    case FailureKind::Crash:
    case FailureKind::Oom:
    case FailureKind::Hang:
      return 0;
    case FailureKind::Nonfinite:
    case FailureKind::Data:
      return 1;
    case FailureKind::LrAnomaly:
      return 2;
    case FailureKind::GradExplode:
      return 3;
    case FailureKind::LossSpike:
      return 4;
    default:
      return 9;
  }
}

void to_json(nlohmann::json& json, FailureKind kind) {
  json = to_string(kind);
}

void from_json(const nlohmann::json& json, FailureKind& kind) {
  const auto name = json.get<std::string>();
  auto parsed = parse_failure_kind(name);
  if (!parsed) throw std::invalid_argument("unknown failure kind '" + name + "'");
  kind = *parsed;
}

}  // namespace faultline::detectors
