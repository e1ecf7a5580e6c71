// Replays a finding and compares the new run with its evidence run, record by record.
#include "harness/isolate/repro.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/error.hpp"

#include "harness/contract/recipe.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/isolate/rank_agreement.hpp"
#include "harness/trial/run_facts.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

using nlohmann::json;

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_bits(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || same_bits(*a, *b));
}

bool records_equal(const StepRecord& a, const StepRecord& b) {
  return a.rank == b.rank && a.step == b.step && same_bits(a.loss, b.loss) &&
         same_bits(a.grad_norm, b.grad_norm) && same_bits(a.lr, b.lr) &&
         same_bits(a.param_norm, b.param_norm) && same_bits(a.update_ratio, b.update_ratio);
}

// "" when the recipe the finding names, with the finding's overrides, still resolves to the config
// the replay ran (the evidence run's config with the same overrides on top).
std::string recipe_change(const TrialSpec& spec, const std::string& stored_hash) {
  if (!std::filesystem::exists(spec.config_path))
    return "the recipe " + spec.config_path + " no longer exists";
  try {
    const auto now = contract::load_recipe(spec.config_path, trial_overrides(spec));
    if (now.hash == stored_hash) return "";
    return "the recipe " + spec.config_path + " changed since the finding (config hash " +
           stored_hash + ", now " + now.hash + ")";
  } catch (const UserError& error) {
    return "the recipe " + spec.config_path + " changed since the finding and no longer loads (" +
           error.what() + ")";
  }
}

// The fingerprints a rank_divergence finding compared (findings stored before parameters were
// compared: gradients), known before its replay runs.
Fingerprinted compared_prints(const store::FindingInfo& finding, const json& evidence) {
  const std::string text = evidence.value("compared", to_string(Fingerprinted::Grads));
  if (auto what = parse_fingerprinted(text)) return *what;
  throw UserError("F" + std::to_string(finding.id) + " compared '" + text +
                      "' fingerprints, which this faultline does not know",
                  "finding F" + std::to_string(finding.id) + ", evidence.compared",
                  "it compares grads or params; a newer faultline stored this finding");
}

}  // namespace

ReproReport reproduce_finding(store::Store& store, TrialCache& cache,
                              const store::FindingInfo& finding, const ReproOptions& options) {
  const json repro = json::parse(finding.repro_json);
  const json fields = json::parse(finding.fields_json);
  TrialSpec spec = spec_from_json(repro.at("spec"));
  spec.parent = "repro:F" + std::to_string(finding.id);
  ReproReport report;
  report.evidence_run = fields.value("evidence_run", int64_t{0});
  report.tolerance = options.tolerance.value_or(fields.value("tolerance", kReproTolerance));
  // The finding stands alone: it replays the resolved config its evidence run ran, whatever
  // became of the recipe file since.
  const TrialSpec as_found = spec;
  const auto evidence_info = store.get_run(report.evidence_run);
  const bool replays_stored_config = evidence_info && !evidence_info->config.empty();
  if (replays_stored_config)
    spec.config_path =
        write_run_config(*evidence_info, options.work_dir, "finding-F" + std::to_string(finding.id),
                         "the resolved config of run " + std::to_string(evidence_info->id) +
                             ", the evidence of F" + std::to_string(finding.id));

  const auto& evidence = fields.at("evidence");
  const auto kind = detectors::parse_failure_kind(finding.kind);
  // A loss regression is a verdict against reference losses: the replay is judged against the
  // same run's. Without one it could only ever "not reproduce", which would be a false answer.
  const int64_t reference = evidence.value("loss_reference_run", int64_t{0});
  if (reference)
    cache.judge_against(reference);
  else if (kind == detectors::FailureKind::LossRegression)
    throw UserError("F" + std::to_string(finding.id) +
                        " is a loss regression stored without the run its losses were judged "
                        "against, so a replay cannot be judged",
                    "finding F" + std::to_string(finding.id),
                    "findings stored before the reference was kept cannot be replayed; run the "
                    "isolate with its --baseline again to store one that can");
  std::optional<Fingerprinted> compared;
  if (kind == detectors::FailureKind::RankDivergence) compared = compared_prints(finding, evidence);
  Outcome outcome = cache.run(spec, CacheUse::Rerun).outcome;
  // Cut short, the replay says nothing of the finding: not "not reproduced".
  if (outcome.interrupted) throw Interrupted();
  if (outcome.verdict == Verdict::InfraError) throw_not_run(outcome, "the reproduction");
  report.run_id = outcome.run_id;
  // Compared with the replay, not the evidence run: the reproduction's overrides (stop_after at
  // the failure step, say) change the hash of both sides alike.
  if (replays_stored_config)
    if (auto replay = store.get_run(outcome.run_id))
      report.recipe_changed = recipe_change(as_found, replay->config_hash);
  const json expected_step = evidence.value("failure_step", json());
  if (!expected_step.is_null()) report.expected_step = expected_step.get<int64_t>();
  for (const auto& failure : outcome.failures) {
    if (failure.kind != kind) continue;
    report.failure_step = failure.step;
    // A loss regression is judged from a share of the run's steps on: the reproduction, cut
    // where the evidence showed it, is judged from an earlier step and may show it sooner.
    const bool curve = kind && detectors::is_curve(*kind);
    report.reproduced = !report.expected_step || *report.expected_step == failure.step ||
                        (curve && failure.step <= *report.expected_step);
  }
  if (kind == detectors::FailureKind::RankDivergence) {
    // No detector judges it: the same ranks must again disagree with the stored 1-rank reference,
    // on what the finding compared.
    const int64_t step = expected_step.get<int64_t>();
    const auto reference = store.fingerprints(evidence.value("reference_run", int64_t{0}));
    const auto odd = odd_ranks(compare_ranks(store.fingerprints(outcome.run_id),
                                             print_at(reference, *compared, step), step,
                                             kRankTolerance, *compared));
    report.failure_step = odd.empty() ? -1 : step;
    report.reproduced = !odd.empty() && json(odd) == fields.value("ranks", json::array());
  }

  // Ranks' records interleave in whatever order they arrived: compare them by (rank, step).
  auto by_rank_step = [](auto records) {
    std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
      return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    return records;
  };
  // The reproduction may be a prefix of the evidence run (a loss regression's is cut at the step
  // that showed it): the evidence is compared up to the step the reproduction stops after.
  auto within_replay = [&spec](auto records) {
    if (spec.stop_after > 0)
      records.erase(std::remove_if(records.begin(), records.end(),
                                   [&](const auto& r) { return r.step > spec.stop_after; }),
                    records.end());
    return records;
  };
  const auto before = by_rank_step(within_replay(store.steps(report.evidence_run)));
  const auto now = by_rank_step(store.steps(outcome.run_id));
  bool identical = before.size() == now.size();
  report.records_compared = static_cast<int64_t>(now.size());
  std::map<std::pair<int, int64_t>, double> old_loss;
  for (const auto& record : before) old_loss[{record.rank, record.step}] = record.loss;
  for (size_t i = 0; i < now.size(); ++i) {
    if (identical && !records_equal(before[i], now[i])) identical = false;
    auto it = old_loss.find({now[i].rank, now[i].step});
    if (it == old_loss.end() || !std::isfinite(it->second) || !std::isfinite(now[i].loss)) continue;
    const double scale = std::max(std::fabs(it->second), 1e-12);
    report.max_rel_loss_diff =
        std::max(report.max_rel_loss_diff, std::fabs(now[i].loss - it->second) / scale);
  }
  const auto old_prints = by_rank_step(within_replay(store.fingerprints(report.evidence_run)));
  const auto new_prints = by_rank_step(store.fingerprints(outcome.run_id));
  identical = identical && old_prints.size() == new_prints.size();
  for (size_t i = 0; identical && i < new_prints.size(); ++i)
    identical =
        old_prints[i].hash == new_prints[i].hash && old_prints[i].step == new_prints[i].step;
  report.bitwise_identical = identical;
  report.within_tolerance = report.max_rel_loss_diff <= report.tolerance;

  const json old_facts = start_event(store, report.evidence_run);
  const json new_facts = start_event(store, outcome.run_id);
  for (const char* key : bit_deciding_facts()) {
    const json a = old_facts.value(key, json()), b = new_facts.value(key, json());
    if (a != b)
      report.differing_facts.push_back(std::string(key) + ": " + a.dump() + " -> " + b.dump());
  }
  // Bits are promised on the same machine facts; where one differs, the stored tolerance holds.
  report.verdict = !report.reproduced         ? ReproVerdict::NotReproduced
                   : report.bitwise_identical ? ReproVerdict::Identical
                   : !report.differing_facts.empty() && report.within_tolerance
                       ? ReproVerdict::WithinTolerance
                       : ReproVerdict::Differs;
  return report;
}

}  // namespace faultline::harness
