// Test support for the migration tests: takes a store file back to what a build of an older
// schema version wrote, by undoing the later migration steps (src/store/schema.cpp) newest first.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace faultline::testing {

inline void downgrade_store(const std::string& path, int version) {
  // undo[i] takes a file from version i + 2 back to version i + 1.
  static const std::vector<std::string> undo = {
      "ALTER TABLE fingerprints DROP COLUMN sketch; ALTER TABLE fingerprints DROP COLUMN norm;",
      "DROP TABLE run_malformed;",
      "DROP TABLE loss_reference_runs; DROP TABLE loss_references;",
      "ALTER TABLE run_failures DROP COLUMN shown_by;",
      "ALTER TABLE metrics DROP COLUMN skipped; ALTER TABLE metrics DROP COLUMN loss_scale;",
      "ALTER TABLE runs DROP COLUMN out_dir;",
      // Version 7's metrics: tokens and mem_bytes NOT NULL (an unreported one was stored as 0).
      "CREATE TABLE metrics_v7 (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES "
      "runs(id), rank INTEGER NOT NULL, step INTEGER NOT NULL, t, loss, grad_norm, lr, step_ms, "
      "data_ms, comm_ms, tokens INTEGER NOT NULL, mem_bytes INTEGER NOT NULL, mem_total_bytes "
      "INTEGER, param_norm, update_ratio, nonfinite INTEGER, collectives INTEGER, skipped INTEGER "
      "NOT NULL DEFAULT 0, loss_scale); "
      "INSERT INTO metrics_v7 SELECT id, run_id, rank, step, t, loss, grad_norm, lr, step_ms, "
      "data_ms, comm_ms, coalesce(tokens, 0), coalesce(mem_bytes, 0), mem_total_bytes, "
      "param_norm, update_ratio, nonfinite, collectives, skipped, loss_scale FROM metrics; "
      "DROP TABLE metrics; ALTER TABLE metrics_v7 RENAME TO metrics; "
      "CREATE INDEX metrics_by_run_rank_step ON metrics(run_id, rank, step);",
      "DROP TABLE gpu_intervals;",
      "ALTER TABLE runs DROP COLUMN infra_detail;",
      "ALTER TABLE runs DROP COLUMN launcher_sets;",
  };
  // A new migration step needs its undo here, or the tests of older files test nothing new.
  if (undo.size() + 1 != static_cast<size_t>(store::kSchemaVersion))
    throw std::logic_error("downgrade_store: no undo for schema version " +
                           std::to_string(store::kSchemaVersion));
  for (int v = store::kSchemaVersion; v > version; --v)
    store::Store::raw_exec_for_tests(path, undo[static_cast<size_t>(v - 2)]);
  store::Store::raw_exec_for_tests(path, "PRAGMA user_version = " + std::to_string(version));
}

}  // namespace faultline::testing
