// Reading a run's metrics back: step, anomaly, event, fingerprint and gpu records, and the summary
// that `faultline runs` and the smoke gate print.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "store/real_codec.hpp"
#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

namespace {
using detail::decode_reals;
using detail::read_opt_real;
using detail::read_real;
using detail::Statement;

constexpr const char* kStepColumns =
    "SELECT rank, t, step, loss, grad_norm, lr, step_ms, data_ms, comm_ms, tokens, mem_bytes, "
    "mem_total_bytes, param_norm, update_ratio, nonfinite, collectives, skipped, loss_scale";

StepRecord read_step(const Statement& query) {
  StepRecord step;
  step.rank = static_cast<int>(query.int64(0));
  step.t = read_real(query, 1);
  step.step = query.int64(2);
  step.loss = read_real(query, 3);
  step.grad_norm = read_real(query, 4);
  step.lr = read_real(query, 5);
  step.has_grad_norm = !query.is_null(4);
  step.has_lr = !query.is_null(5);
  step.step_ms = read_opt_real(query, 6);
  step.data_ms = read_opt_real(query, 7);
  step.comm_ms = read_opt_real(query, 8);
  step.tokens = query.opt_int64(9);
  step.mem_bytes = query.opt_int64(10);
  step.mem_total_bytes = query.opt_int64(11);
  step.param_norm = read_opt_real(query, 12);
  step.update_ratio = read_opt_real(query, 13);
  step.nonfinite = query.opt_int64(14);
  step.collectives = query.opt_int64(15);
  step.skipped = query.int64(16) != 0;
  step.loss_scale = read_opt_real(query, 17);
  return step;
}

// The first and last metrics rowid of a run (from the index alone); nullopt: no step records.
std::optional<std::pair<int64_t, int64_t>> metrics_id_range(sqlite3* db, const std::string& path,
                                                            int64_t run_id) {
  Statement query(db, path, "SELECT min(id), max(id) FROM metrics WHERE run_id = ?");
  query.bind(1, run_id);
  if (!query.step() || query.is_null(0)) return std::nullopt;
  return std::make_pair(query.int64(0), query.int64(1));
}

std::optional<double> loss_at(sqlite3* db, const std::string& path, int64_t run_id, int rank,
                              const char* order) {
  Statement query(db, path,
                  std::string("SELECT loss FROM metrics WHERE run_id = ? AND rank = ? ORDER BY "
                              "step ") +
                      order + ", id " + order + " LIMIT 1");
  query.bind(1, run_id);
  query.bind(2, rank);
  if (!query.step()) return std::nullopt;
  return read_real(query, 0);
}

// The rows of a query of (rank, t, name, step, json), in its order.
std::vector<EventRecord> read_events(Statement& query) {
  std::vector<EventRecord> events;
  while (query.step()) {
    EventRecord event;
    event.rank = static_cast<int>(query.int64(0));
    event.t = read_real(query, 1);
    event.name = query.text(2);
    event.step = query.opt_int64(3);
    event.json = query.text(4);
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace

std::vector<StepRecord> Store::steps(int64_t run_id, int rank) const {
  std::vector<StepRecord> steps;
  if (rank >= 0) {  // one rank: the (run, rank, step) index
    Statement query(db_, path_,
                    std::string(kStepColumns) +
                        " FROM metrics WHERE run_id = ?1 AND rank = ?2 ORDER BY rank, step, id");
    query.bind(1, run_id);
    query.bind(2, rank);
    while (query.step()) steps.push_back(read_step(query));
    return steps;
  }
  // All ranks: the run's rowid range read in file order, then sorted here; walking the index
  // would visit each table page once per rank.
  each_step(run_id, [&](const StepRecord& record) { steps.push_back(record); });
  std::stable_sort(steps.begin(), steps.end(), [](const StepRecord& a, const StepRecord& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.step < b.step;
  });
  return steps;
}

void Store::each_step(int64_t run_id, const std::function<void(const StepRecord&)>& visit) const {
  const auto range = metrics_id_range(db_, path_, run_id);
  if (!range) return;
  Statement query(db_, path_,
                  std::string(kStepColumns) +
                      " FROM metrics NOT INDEXED WHERE id BETWEEN ?2 AND ?3 AND run_id = ?1 "
                      "ORDER BY id");
  query.bind(1, run_id);
  query.bind(2, range->first);
  query.bind(3, range->second);
  while (query.step()) visit(read_step(query));
}

std::optional<std::pair<int64_t, int64_t>> Store::step_span(int64_t run_id) const {
  Statement query(db_, path_, "SELECT min(step), max(step) FROM metrics WHERE run_id = ?");
  query.bind(1, run_id);
  if (!query.step() || query.is_null(0)) return std::nullopt;
  return std::make_pair(query.int64(0), query.int64(1));
}

std::vector<StepRecord> Store::steps_between(int64_t run_id, int64_t first, int64_t last,
                                             int rank) const {
  // Rank by rank, each an index range; with every rank, the ranks themselves are found by one
  // index seek each.
  Statement query(db_, path_,
                  std::string(kStepColumns) +
                      " FROM metrics WHERE run_id = ? AND rank = ? AND step BETWEEN ? AND ? "
                      "ORDER BY step, id");
  std::vector<StepRecord> steps;
  auto read_rank = [&](int64_t of) {
    query.reset();
    query.bind(1, run_id);
    query.bind(2, of);
    query.bind(3, first);
    query.bind(4, last);
    while (query.step()) steps.push_back(read_step(query));
  };
  if (rank >= 0) {
    read_rank(rank);
    return steps;
  }
  Statement next_rank(db_, path_,
                      "SELECT rank FROM metrics WHERE run_id = ? AND rank >= ? ORDER BY rank "
                      "LIMIT 1");
  for (int64_t at = 0;; ++at) {
    next_rank.reset();
    next_rank.bind(1, run_id);
    next_rank.bind(2, at);
    if (!next_rank.step()) break;
    at = next_rank.int64(0);
    read_rank(at);
  }
  return steps;
}

std::vector<AnomalyRecord> Store::anomalies(int64_t run_id) const {
  Statement query(db_, path_,
                  "SELECT rank, t, step, kind, phase, \"where\", detail, samples, shards, json "
                  "FROM anomalies WHERE run_id = ? ORDER BY id");
  query.bind(1, run_id);
  std::vector<AnomalyRecord> anomalies;
  while (query.step()) {
    AnomalyRecord anomaly;
    anomaly.rank = static_cast<int>(query.int64(0));
    anomaly.t = read_real(query, 1);
    anomaly.step = query.int64(2);
    anomaly.kind = query.text(3);
    anomaly.phase = query.text(4);
    anomaly.where = query.text(5);
    anomaly.detail = query.text(6);
    anomaly.samples = nlohmann::json::parse(query.text(7)).get<std::vector<uint64_t>>();
    anomaly.shards = nlohmann::json::parse(query.text(8)).get<std::vector<std::string>>();
    anomaly.json = query.text(9);
    anomalies.push_back(std::move(anomaly));
  }
  return anomalies;
}

std::vector<EventRecord> Store::events(int64_t run_id) const {
  Statement query(db_, path_,
                  "SELECT rank, t, name, step, json FROM events WHERE run_id = ? ORDER BY id");
  query.bind(1, run_id);
  return read_events(query);
}

std::vector<EventRecord> Store::events(int64_t run_id,
                                       const std::vector<std::string>& names) const {
  if (names.empty()) return {};
  const std::vector<std::string> marks(names.size(), "?");
  Statement query(db_, path_,
                  fmt::format("SELECT rank, t, name, step, json FROM events WHERE run_id = ? AND "
                              "name IN ({}) ORDER BY id",
                              fmt::join(marks, ", ")));
  query.bind(1, run_id);
  for (size_t i = 0; i < names.size(); ++i) query.bind(static_cast<int>(i) + 2, names[i]);
  return read_events(query);
}

std::vector<FingerprintRecord> Store::fingerprints(int64_t run_id) const {
  Statement query(db_, path_,
                  "SELECT rank, t, step, what, hash, norm, sketch FROM fingerprints "
                  "WHERE run_id = ? ORDER BY id");
  query.bind(1, run_id);
  std::vector<FingerprintRecord> fingerprints;
  while (query.step()) {
    fingerprints.push_back({static_cast<int>(query.int64(0)), read_real(query, 1), query.int64(2),
                            query.text(3), query.text(4), read_opt_real(query, 5),
                            decode_reals(query.text(6))});
  }
  return fingerprints;
}

void Store::each_gpu_record(int64_t run_id, int rank,
                            const std::function<void(const GpuRecord&)>& visit) const {
  // One rank: the (run, rank) index, not a scan of every rank's rows.
  Statement query(db_, path_,
                  std::string("SELECT rank, t, device, unix_t0, unix_t1, busy_ms, compute_ms, "
                              "nccl_ms, overlap_ms, memcpy_ms, idle_ms, max_gap_ms, kernels, "
                              "nccl_kernels, memcpys, late FROM gpu_intervals WHERE run_id = ?1") +
                      (rank >= 0 ? " AND rank = ?2" : "") + " ORDER BY rank, id");
  query.bind(1, run_id);
  if (rank >= 0) query.bind(2, rank);
  while (query.step()) {
    GpuRecord gpu;
    gpu.rank = static_cast<int>(query.int64(0));
    gpu.t = read_real(query, 1);
    gpu.device = static_cast<int>(query.int64(2));
    int column = 3;
    for (double* value : {&gpu.unix_t0, &gpu.unix_t1, &gpu.busy_ms, &gpu.compute_ms, &gpu.nccl_ms,
                          &gpu.overlap_ms, &gpu.memcpy_ms, &gpu.idle_ms, &gpu.max_gap_ms})
      *value = read_real(query, column++);
    gpu.kernels = query.int64(12);
    gpu.nccl_kernels = query.int64(13);
    gpu.memcpys = query.int64(14);
    gpu.late = query.int64(15);
    visit(gpu);
  }
}

std::vector<GpuRecord> Store::gpu_records(int64_t run_id, int rank) const {
  std::vector<GpuRecord> intervals;
  each_gpu_record(run_id, rank, [&](const GpuRecord& gpu) { intervals.push_back(gpu); });
  return intervals;
}

std::vector<int> Store::gpu_ranks(int64_t run_id) const {
  Statement query(db_, path_,
                  "SELECT DISTINCT rank FROM gpu_intervals WHERE run_id = ? ORDER BY rank");
  query.bind(1, run_id);
  std::vector<int> ranks;
  while (query.step()) ranks.push_back(static_cast<int>(query.int64(0)));
  return ranks;
}

MetricsSummary Store::summarize(int64_t run_id) const {
  MetricsSummary summary;
  // Per rank: its token rate over its own timed steps (finite step_ms only); ranks run side by
  // side, so the run's rate is their sum.
  const auto range = metrics_id_range(db_, path_, run_id);
  Statement per_rank(db_, path_,
                     "SELECT rank, count(*), max(step), sum(tokens), "
                     "sum(CASE WHEN typeof(step_ms) = 'real' AND step_ms BETWEEN 0 AND 1e300 "
                     "THEN step_ms ELSE 0 END), "
                     "max(CASE WHEN typeof(step_ms) = 'real' AND step_ms BETWEEN 0 AND 1e300 "
                     "THEN step_ms ELSE 0 END), sum(skipped) FROM metrics NOT INDEXED "
                     "WHERE id BETWEEN ?2 AND ?3 AND run_id = ?1 GROUP BY rank ORDER BY rank");
  per_rank.bind(2, range ? range->first : 1);
  per_rank.bind(3, range ? range->second : 0);
  per_rank.bind(1, run_id);
  std::optional<int> lowest_rank;
  while (per_rank.step()) {
    if (!lowest_rank) lowest_rank = static_cast<int>(per_rank.int64(0));
    ++summary.ranks;
    summary.steps += per_rank.int64(1);
    summary.last_step = std::max(summary.last_step, per_rank.int64(2));
    const double ms = per_rank.real_raw(4);
    if (ms > 0) summary.tokens_per_s += static_cast<double>(per_rank.int64(3)) / (ms / 1000.0);
    summary.slowest_step_ms = std::max(summary.slowest_step_ms, per_rank.real_raw(5));
    summary.skipped_steps = std::max(summary.skipped_steps, per_rank.int64(6));
  }
  if (lowest_rank) {
    summary.first_loss = loss_at(db_, path_, run_id, *lowest_rank, "ASC");
    summary.last_loss = loss_at(db_, path_, run_id, *lowest_rank, "DESC");
  }
  Statement anomalies(db_, path_, "SELECT count(*) FROM anomalies WHERE run_id = ?");
  anomalies.bind(1, run_id);
  if (anomalies.step()) summary.anomalies = anomalies.int64(0);
  return summary;
}

}  // namespace faultline::store
