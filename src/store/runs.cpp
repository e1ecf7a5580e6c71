// Run rows: create, finish (with failures and malformed-line counts), interrupt, list and get.
#include <stdexcept>

#include "store/real_codec.hpp"
#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

namespace {

using detail::Statement;

// One column of one run's row, once it is known; an unknown run is the caller's bug.
template <typename Value>
void set_run_column(sqlite3* db, const std::string& path, int64_t id, const char* column,
                    const Value& value) {
  Statement update(db, path, std::string("UPDATE runs SET ") + column + " = ? WHERE id = ?");
  update.bind(1, value);
  update.bind(2, id);
  update.run();
  if (sqlite3_changes(db) != 1)
    throw std::runtime_error(std::string("store: set_run_") + column + " of unknown run " +
                             std::to_string(id));
}

constexpr const char* kRunColumns =
    "id, config_path, config, config_hash, ranks, steps, data_fraction, argv, launcher, "
    "started_at, ended_at, status, exit_code, signal, verdict, parent, owner_pid, owner_host, "
    "out_dir, infra_detail, launcher_sets";

RunInfo read_run(const Statement& row) {
  RunInfo run;
  run.id = row.int64(0);
  run.config_path = row.text(1);
  run.config = row.text(2);
  run.config_hash = row.text(3);
  run.ranks = static_cast<int>(row.int64(4));
  run.steps = row.int64(5);
  run.data_fraction = row.real_raw(6);
  run.argv_json = row.text(7);
  run.launcher = row.text(8);
  run.started_at = row.text(9);
  run.ended_at = row.text(10);
  run.status = run_status_from_string(row.text(11));
  if (!row.is_null(12)) run.exit_code = static_cast<int>(row.int64(12));
  if (!row.is_null(13)) run.signal = row.text(13);
  run.verdict = row.text(14);
  run.parent = row.text(15);
  run.owner_pid = row.int64(16);
  run.owner_host = row.text(17);
  run.out_dir = row.text(18);
  run.infra_detail = row.text(19);
  run.launcher_sets_json = row.text(20);
  return run;
}

std::vector<RunFailure> read_failures(sqlite3* db, const std::string& path, int64_t run_id) {
  Statement query(db, path,
                  "SELECT kind, step, rank, detail, shown_by FROM run_failures WHERE run_id = ? "
                  "ORDER BY id");
  query.bind(1, run_id);
  std::vector<RunFailure> failures;
  while (query.step()) {
    failures.push_back({query.text(0), query.int64(1), static_cast<int>(query.int64(2)),
                        query.text(3), query.int64(4)});
  }
  return failures;
}

std::vector<RankMalformed> read_malformed(sqlite3* db, const std::string& path, int64_t run_id) {
  Statement query(db, path,
                  "SELECT rank, lines, first_line, first_error FROM run_malformed "
                  "WHERE run_id = ? ORDER BY rank");
  query.bind(1, run_id);
  std::vector<RankMalformed> malformed;
  while (query.step()) {
    malformed.push_back(
        {static_cast<int>(query.int64(0)), query.int64(1), query.text(2), query.text(3)});
  }
  return malformed;
}

// The run's evidence rows, read after its row.
void read_evidence(sqlite3* db, const std::string& path, RunInfo& run) {
  run.failures = read_failures(db, path, run.id);
  run.malformed = read_malformed(db, path, run.id);
}
}  // namespace

int64_t Store::create_run(const RunInfo& run) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement insert(db_, path_,
                   "INSERT INTO runs (config_path, config, config_hash, ranks, steps, "
                   "data_fraction, argv, launcher, started_at, status, parent, owner_pid, "
                   "owner_host, launcher_sets) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, "
                   "?, ?)");
  insert.bind(1, run.config_path);
  insert.bind(2, run.config);
  insert.bind(3, run.config_hash);
  insert.bind(4, run.ranks);
  insert.bind(5, run.steps);
  insert.bind_double_raw(6, run.data_fraction);
  insert.bind(7, run.argv_json.empty() ? std::string("[]") : run.argv_json);
  insert.bind(8, run.launcher);
  insert.bind(9, run.started_at.empty() ? detail::now_utc() : run.started_at);
  insert.bind(10, run.parent);
  insert.bind(11, run.owner_pid);
  insert.bind(12, run.owner_host);
  insert.bind(13, run.launcher_sets_json.empty() ? std::string("[]") : run.launcher_sets_json);
  insert.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  transaction.commit();
  return id;
}

void Store::set_run_argv(int64_t id, const std::string& argv_json) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  set_run_column(db_, path_, id, "argv", argv_json);
  transaction.commit();
}

void Store::set_run_out_dir(int64_t id, const std::string& out_dir) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  set_run_column(db_, path_, id, "out_dir", out_dir);
  transaction.commit();
}

void Store::set_run_steps(int64_t id, int64_t steps) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  set_run_column(db_, path_, id, "steps", steps);
  transaction.commit();
}

void Store::finish_run(int64_t id, const RunInfo& result) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement update(db_, path_,
                   "UPDATE runs SET status = ?, ended_at = ?, exit_code = ?, signal = ?, "
                   "verdict = ?, infra_detail = ? WHERE id = ?");
  const RunStatus status =
      result.status == RunStatus::Running ? RunStatus::Finished : result.status;
  update.bind(1, to_string(status));
  update.bind(2, result.ended_at.empty() ? detail::now_utc() : result.ended_at);
  if (result.exit_code) {
    update.bind(3, *result.exit_code);
  } else {
    update.bind_null(3);
  }
  if (result.signal) {
    update.bind(4, *result.signal);
  } else {
    update.bind_null(4);
  }
  update.bind(5, result.verdict);
  update.bind(6, result.infra_detail);
  update.bind(7, id);
  update.run();
  if (sqlite3_changes(db_) != 1) {
    throw std::runtime_error("store: finish_run of unknown run " + std::to_string(id));
  }
  // The failures are the verdict's evidence: a second finish replaces them.
  Statement clear(db_, path_, "DELETE FROM run_failures WHERE run_id = ?");
  clear.bind(1, id);
  clear.run();
  Statement insert(db_, path_,
                   "INSERT INTO run_failures (run_id, kind, step, rank, detail, shown_by) "
                   "VALUES (?, ?, ?, ?, ?, ?)");
  for (const RunFailure& failure : result.failures) {
    insert.bind(1, id);
    insert.bind(2, failure.kind);
    insert.bind(3, failure.step);
    insert.bind(4, failure.rank);
    insert.bind(5, failure.detail);
    insert.bind(6, failure.shown_by);
    insert.run();
  }
  Statement clear_malformed(db_, path_, "DELETE FROM run_malformed WHERE run_id = ?");
  clear_malformed.bind(1, id);
  clear_malformed.run();
  Statement insert_malformed(db_, path_,
                             "INSERT INTO run_malformed (run_id, rank, lines, first_line, "
                             "first_error) VALUES (?, ?, ?, ?, ?)");
  for (const RankMalformed& rank : result.malformed) {
    insert_malformed.bind(1, id);
    insert_malformed.bind(2, rank.rank);
    insert_malformed.bind(3, rank.lines);
    insert_malformed.bind(4, rank.first_line.substr(0, 200));
    insert_malformed.bind(5, rank.first_error);
    insert_malformed.run();
  }
  transaction.commit();
}

int Store::mark_interrupted(const std::vector<int64_t>& run_ids) {
  if (run_ids.empty()) return 0;
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement update(db_, path_,
                   "UPDATE runs SET status = 'interrupted', ended_at = ? "
                   "WHERE id = ? AND status = 'running'");
  const std::string now = detail::now_utc();
  int changed = 0;
  for (int64_t id : run_ids) {
    update.bind(1, now);
    update.bind(2, id);
    update.run();
    changed += sqlite3_changes(db_);
  }
  transaction.commit();
  return changed;
}

std::vector<int64_t> Store::running_run_ids() const {
  Statement query(db_, path_, "SELECT id FROM runs WHERE status = 'running' ORDER BY id");
  std::vector<int64_t> ids;
  while (query.step()) ids.push_back(query.int64(0));
  return ids;
}

std::vector<int64_t> Store::run_ids_with_parent(const std::string& parent) const {
  Statement query(db_, path_, "SELECT id FROM runs WHERE parent = ? ORDER BY id");
  query.bind(1, parent);
  std::vector<int64_t> ids;
  while (query.step()) ids.push_back(query.int64(0));
  return ids;
}

std::vector<RunInfo> Store::list_runs(int limit) const {
  Statement query(db_, path_,
                  std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id DESC LIMIT ?");
  query.bind(1, limit < 0 ? int64_t{-1} : int64_t{limit});
  std::vector<RunInfo> runs;
  while (query.step()) runs.push_back(read_run(query));
  for (RunInfo& run : runs) read_evidence(db_, path_, run);
  return runs;
}

std::optional<RunInfo> Store::get_run(int64_t id) const {
  Statement query(db_, path_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  RunInfo run = read_run(query);
  read_evidence(db_, path_, run);
  return run;
}

}  // namespace faultline::store
