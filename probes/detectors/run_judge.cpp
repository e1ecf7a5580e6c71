// Feeds records to every detector family and collects one Failure per kind.
#include "probes/detectors/run_judge.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "common/event_names.hpp"

namespace faultline::detectors {

int64_t history_needed(FailureKind kind, const Thresholds& thresholds) {
  return kind == FailureKind::LossSpike ? thresholds.loss_spike.warmup_steps : 0;
}

RunJudge::RunJudge(Thresholds thresholds, RunContext context)
    : thresholds_(std::move(thresholds)), context_(context) {
  add_dynamics_detectors(detectors_, thresholds_, context_);
  add_loss_scaler_detector(detectors_, thresholds_);
  add_start_detector(detectors_, thresholds_, context_);
  add_lr_detector(detectors_, thresholds_, context_);
  add_resource_detectors(detectors_, thresholds_);
  add_straggler_detector(detectors_, thresholds_);
  add_gpu_detector(detectors_, thresholds_);
}

void RunJudge::observe(const StepRecord& record) {
  ++step_records_;
  max_rank_ = std::max(max_rank_, record.rank);
  for (auto& detector : detectors_) detector->observe(record);
}

void RunJudge::observe(const AnomalyRecord& record) {
  max_rank_ = std::max(max_rank_, record.rank);
  for (auto& detector : detectors_) detector->observe(record);
}

void RunJudge::observe(const EventRecord& record) {
  max_rank_ = std::max(max_rank_, record.rank);
  for (auto& detector : detectors_) detector->observe(record);
  if (record.name != kStartEvent && record.name != kEndEvent) return;
  // Events keep their free fields in the raw line; a malformed one is simply not used.
  nlohmann::json fields = nlohmann::json::parse(record.json, nullptr, false);
  if (!fields.is_object()) return;
  auto world = fields.find("world_size");
  if (record.name == kStartEvent && world != fields.end() && world->is_number_integer())
    start_world_size_ = std::max(start_world_size_, world->get<int>());
  auto rate = fields.find("tokens_per_s");
  if (record.name == kEndEvent && rate != fields.end() && rate->is_number())
    tokens_per_s_[record.rank] = rate->get<double>();
}

void RunJudge::observe(const MetricsRecord& record) {
  if (const auto* step = std::get_if<StepRecord>(&record)) observe(*step);
  if (const auto* anomaly = std::get_if<AnomalyRecord>(&record)) observe(*anomaly);
  if (const auto* event = std::get_if<EventRecord>(&record)) observe(*event);
  if (const auto* gpu = std::get_if<GpuRecord>(&record))
    for (auto& detector : detectors_) detector->observe(*gpu);
}

std::vector<Failure> RunJudge::judge(bool final) const {
  Findings findings;
  for (const auto& detector : detectors_) detector->judge(findings, final);
  return findings.sorted();
}

std::vector<Failure> RunJudge::failures_so_far() const {
  return judge(false);
}

bool RunJudge::fatal() const {
  auto failures = failures_so_far();
  return std::any_of(failures.begin(), failures.end(), is_fatal);
}

std::vector<Failure> RunJudge::finish() const {
  return judge(true);
}

int RunJudge::world_size() const {
  if (context_.world_size > 0) return context_.world_size;
  return std::max(start_world_size_, max_rank_ + 1);
}

std::optional<double> RunJudge::tokens_per_s() const {
  double total = 0;
  for (const auto& [rank, rate] : tokens_per_s_) total += rate;
  if (!(total > 0)) return std::nullopt;  // under 3 steps the trainer reports 0: not measured
  return total;
}

}  // namespace faultline::detectors
