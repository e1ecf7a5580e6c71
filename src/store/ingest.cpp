// Batch inserts of parsed metrics records: one transaction per batch, one prepared statement
// per record type kept for the handle's lifetime.
#include <nlohmann/json.hpp>

#include "store/cache.hpp"
#include "store/real_codec.hpp"
#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

namespace {
using detail::bind_real;
using detail::encode_reals;
using detail::Statement;

// Prepares `statement` on first use; SQLITE_PREPARE_PERSISTENT since it lives for many batches.
Statement& prepared(Statement& statement, sqlite3* db, const std::string& path, const char* sql) {
  if (!statement.prepared()) statement = Statement(db, path, sql, true);
  return statement;
}

void bind_optional(Statement& statement, int index, const std::optional<int64_t>& value) {
  statement.bind(index, value);
}

constexpr const char* kStepInsert =
    "INSERT INTO metrics (run_id, rank, step, t, loss, grad_norm, lr, step_ms, data_ms, "
    "comm_ms, tokens, mem_bytes, mem_total_bytes, param_norm, update_ratio, nonfinite, "
    "collectives, skipped, loss_scale) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "?, ?)";

void bind_step(Statement& insert, int64_t run_id, const StepRecord& step) {
  insert.bind(1, run_id);
  insert.bind(2, step.rank);
  insert.bind(3, step.step);
  bind_real(insert, 4, step.t);
  bind_real(insert, 5, step.loss);
  bind_real(insert, 6, step.has_grad_norm ? std::optional<double>(step.grad_norm) : std::nullopt);
  bind_real(insert, 7, step.has_lr ? std::optional<double>(step.lr) : std::nullopt);
  bind_real(insert, 8, step.step_ms);
  bind_real(insert, 9, step.data_ms);
  bind_real(insert, 10, step.comm_ms);
  bind_optional(insert, 11, step.tokens);
  bind_optional(insert, 12, step.mem_bytes);
  bind_optional(insert, 13, step.mem_total_bytes);
  bind_real(insert, 14, step.param_norm);
  bind_real(insert, 15, step.update_ratio);
  bind_optional(insert, 16, step.nonfinite);
  bind_optional(insert, 17, step.collectives);
  insert.bind(18, int64_t{step.skipped ? 1 : 0});
  bind_real(insert, 19, step.loss_scale);
}
}  // namespace

void Store::add_steps(int64_t run_id, const std::vector<StepRecord>& steps) {
  if (steps.empty()) return;
  detail::Transaction transaction(db_, path_, tx_depth_);
  // One row per statement run: measured faster than multi-row VALUES (docs/store.md).
  Statement& insert = prepared(cache_->insert_step, db_, cache_->path, kStepInsert);
  for (const StepRecord& step : steps) {
    bind_step(insert, run_id, step);
    insert.run();
  }
  transaction.commit();
}

void Store::add_anomalies(int64_t run_id, const std::vector<AnomalyRecord>& anomalies) {
  if (anomalies.empty()) return;
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement& insert = prepared(
      cache_->insert_anomaly, db_, cache_->path,
      "INSERT INTO anomalies (run_id, rank, t, step, kind, phase, \"where\", detail, samples, "
      "shards, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const AnomalyRecord& anomaly : anomalies) {
    insert.bind(1, run_id);
    insert.bind(2, anomaly.rank);
    bind_real(insert, 3, anomaly.t);
    insert.bind(4, anomaly.step);
    insert.bind(5, anomaly.kind);
    insert.bind(6, anomaly.phase);
    insert.bind(7, anomaly.where);
    insert.bind(8, anomaly.detail);
    insert.bind(9, nlohmann::json(anomaly.samples).dump());
    insert.bind(10, nlohmann::json(anomaly.shards).dump());
    insert.bind(11, anomaly.json);
    insert.run();
  }
  transaction.commit();
}

void Store::add_events(int64_t run_id, const std::vector<EventRecord>& events) {
  if (events.empty()) return;
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement& insert =
      prepared(cache_->insert_event, db_, cache_->path,
               "INSERT INTO events (run_id, rank, t, name, step, json) VALUES (?, ?, ?, ?, ?, ?)");
  for (const EventRecord& event : events) {
    insert.bind(1, run_id);
    insert.bind(2, event.rank);
    bind_real(insert, 3, event.t);
    insert.bind(4, event.name);
    bind_optional(insert, 5, event.step);
    insert.bind(6, event.json);
    insert.run();
  }
  transaction.commit();
}

void Store::add_fingerprints(int64_t run_id, const std::vector<FingerprintRecord>& fingerprints) {
  if (fingerprints.empty()) return;
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement& insert = prepared(cache_->insert_fingerprint, db_, cache_->path,
                               "INSERT INTO fingerprints (run_id, rank, t, step, what, hash, "
                               "norm, sketch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  for (const FingerprintRecord& fingerprint : fingerprints) {
    insert.bind(1, run_id);
    insert.bind(2, fingerprint.rank);
    bind_real(insert, 3, fingerprint.t);
    insert.bind(4, fingerprint.step);
    insert.bind(5, fingerprint.what);
    insert.bind(6, fingerprint.hash);
    bind_real(insert, 7, fingerprint.norm);
    insert.bind(8, encode_reals(fingerprint.sketch));
    insert.run();
  }
  transaction.commit();
}

void Store::add_gpu_records(int64_t run_id, const std::vector<GpuRecord>& intervals) {
  if (intervals.empty()) return;
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement& insert =
      prepared(cache_->insert_gpu, db_, cache_->path,
               "INSERT INTO gpu_intervals (run_id, rank, t, device, unix_t0, unix_t1, busy_ms, "
               "compute_ms, nccl_ms, overlap_ms, memcpy_ms, idle_ms, max_gap_ms, kernels, "
               "nccl_kernels, memcpys, late) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
               "?, ?)");
  for (const GpuRecord& gpu : intervals) {
    insert.bind(1, run_id);
    insert.bind(2, gpu.rank);
    bind_real(insert, 3, gpu.t);
    insert.bind(4, gpu.device);
    int column = 5;
    for (double value : {gpu.unix_t0, gpu.unix_t1, gpu.busy_ms, gpu.compute_ms, gpu.nccl_ms,
                         gpu.overlap_ms, gpu.memcpy_ms, gpu.idle_ms, gpu.max_gap_ms})
      bind_real(insert, column++, value);
    insert.bind(14, gpu.kernels);
    insert.bind(15, gpu.nccl_kernels);
    insert.bind(16, gpu.memcpys);
    insert.bind(17, gpu.late);
    insert.run();
  }
  transaction.commit();
}

}  // namespace faultline::store
