// Schema versions 1 to 10, and the migration runner. Number columns of metrics have no declared
// type on purpose: no affinity, so REAL keeps -0.0 and a NaN can be TEXT (see real_codec.hpp).
#include "store/schema.hpp"

#include "common/error.hpp"
#include "store/sqlite_util.hpp"

namespace faultline::store::detail {

namespace {
const char* const kVersion1 = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  config_path TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL DEFAULT '',          -- resolved config text
  config_hash TEXT NOT NULL DEFAULT '',
  ranks INTEGER NOT NULL DEFAULT 1,
  steps INTEGER NOT NULL DEFAULT 0,         -- steps asked for
  data_fraction REAL NOT NULL DEFAULT 1,
  argv TEXT NOT NULL DEFAULT '[]',          -- JSON array, rank 0
  launcher TEXT NOT NULL DEFAULT 'local',
  started_at TEXT NOT NULL,                 -- ISO-8601 UTC
  ended_at TEXT,                            -- NULL while running
  status TEXT NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'finished', 'interrupted')),
  exit_code INTEGER,
  signal TEXT,
  verdict TEXT NOT NULL DEFAULT '',
  parent TEXT NOT NULL DEFAULT '',
  owner_pid INTEGER NOT NULL DEFAULT 0,
  owner_host TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_status ON runs(status);

CREATE TABLE run_failures (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  kind TEXT NOT NULL,
  step INTEGER NOT NULL DEFAULT -1,
  rank INTEGER NOT NULL DEFAULT -1,
  detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX run_failures_by_run ON run_failures(run_id);

CREATE TABLE metrics (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  t, loss, grad_norm, lr, step_ms, data_ms, comm_ms,  -- REAL, or TEXT for a NaN
  tokens INTEGER NOT NULL,
  mem_bytes INTEGER NOT NULL,
  mem_total_bytes INTEGER,                            -- NULL: not reported
  param_norm, update_ratio,                           -- NULL: not reported
  nonfinite INTEGER,
  collectives INTEGER
);
CREATE INDEX metrics_by_run_rank_step ON metrics(run_id, rank, step);

CREATE TABLE anomalies (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  t,
  step INTEGER NOT NULL,
  kind TEXT NOT NULL,
  phase TEXT NOT NULL DEFAULT '',
  "where" TEXT NOT NULL DEFAULT '',
  detail TEXT NOT NULL DEFAULT '',
  samples TEXT NOT NULL DEFAULT '[]',       -- JSON array of sample indices
  shards TEXT NOT NULL DEFAULT '[]',        -- JSON array of shard names
  json TEXT NOT NULL DEFAULT ''             -- the whole record
);
CREATE INDEX anomalies_by_run ON anomalies(run_id, step);

CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  t,
  name TEXT NOT NULL,
  step INTEGER,
  json TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_run ON events(run_id);

CREATE TABLE fingerprints (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  t,
  step INTEGER NOT NULL,
  what TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX fingerprints_by_run_step ON fingerprints(run_id, step, what);

-- The search work: the trial cache, resumable searches (state as JSON), findings.
CREATE TABLE trials (
  id INTEGER PRIMARY KEY,
  spec_hash TEXT NOT NULL UNIQUE,
  spec TEXT NOT NULL,                       -- JSON TrialSpec
  outcome TEXT,                             -- JSON Outcome; NULL until known
  run_id INTEGER REFERENCES runs(id),
  created_at TEXT NOT NULL DEFAULT ''
);
CREATE TABLE searches (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT '{}',         -- JSON state machine
  status TEXT NOT NULL DEFAULT 'running',
  created_at TEXT NOT NULL DEFAULT '',
  updated_at TEXT NOT NULL DEFAULT ''
);
CREATE TABLE findings (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  fields TEXT NOT NULL DEFAULT '{}',        -- JSON: what broke, where, evidence
  repro TEXT NOT NULL DEFAULT '{}',         -- JSON TrialSpec that replays it
  search_id INTEGER REFERENCES searches(id),
  created_at TEXT NOT NULL DEFAULT ''
);
)sql";

// Version 2: fingerprints carry the buffer's norm and a signed sketch (comma-separated
// numbers), so two runs' buffers can be compared with a tolerance, not only bitwise.
const char* const kVersion2 = R"sql(
ALTER TABLE fingerprints ADD COLUMN norm;
ALTER TABLE fingerprints ADD COLUMN sketch TEXT NOT NULL DEFAULT '';
)sql";

// Version 3: per rank, how many lines of a run's metrics file were malformed (not the protocol),
// with the first of them as evidence; ranks without any have no row.
const char* const kVersion3 = R"sql(
CREATE TABLE run_malformed (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  lines INTEGER NOT NULL,
  first_line TEXT NOT NULL DEFAULT '',      -- cut to 200 bytes
  first_error TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, rank)
);
)sql";

// Version 4: named references of healthy runs (seeds of one config) that `smoke --reference`
// judges loss curves against (loss_regression); the runs are kept in order.
const char* const kVersion4 = R"sql(
CREATE TABLE loss_references (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  config_path TEXT NOT NULL DEFAULT '',     -- of the first run
  config_hash TEXT NOT NULL DEFAULT '',     -- of the first run
  created_at TEXT NOT NULL DEFAULT ''
);
CREATE TABLE loss_reference_runs (
  reference_id INTEGER NOT NULL REFERENCES loss_references(id),
  position INTEGER NOT NULL,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  PRIMARY KEY (reference_id, position)
);
)sql";

// Version 5: a failure's `shown_by`, the step by which its evidence is complete when later than
// its step (a sustained streak is dated by its first step, a leak by its first fitted one):
// `isolate --run` replays a stored run up to it, and a replay that stops at the step shows
// nothing.
const char* const kVersion5 = R"sql(
ALTER TABLE run_failures ADD COLUMN shown_by INTEGER NOT NULL DEFAULT -1;
)sql";

// Version 6: a step the loss scaler skipped (fp16 overflow) and the loss scale, so a stored run's
// non-finite grad norms of skipped steps are not read as its failure.
const char* const kVersion6 = R"sql(
ALTER TABLE metrics ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metrics ADD COLUMN loss_scale;                        -- NULL: not reported
)sql";

// Version 7: the run's own directory (its rank logs and metrics files, and checkpoints when the
// trainer writes them there), as the harness made it: before, it was guessed from the argv, and a
// trainer whose command names no directory (a log-only script) had none that `show` or `gc` knew.
// '' for runs stored before and for imports (whose directory is the user's).
const char* const kVersion7 = R"sql(
ALTER TABLE runs ADD COLUMN out_dir TEXT NOT NULL DEFAULT '';
)sql";

// Version 8: a step's tokens and mem_bytes may be NULL, as its timings already could: a trainer
// that does not measure them (a log-only script) had them stored as 0 tokens and 0 bytes, and
// exports and plots showed the zeros. SQLite cannot drop a NOT NULL, so the table is rebuilt, every
// row copied as it is (older files' unmeasured values stay 0: they cannot be told apart).
const char* const kVersion8 = R"sql(
CREATE TABLE metrics_v8 (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  t, loss, grad_norm, lr, step_ms, data_ms, comm_ms,  -- REAL, TEXT for a NaN, NULL: not reported
  tokens INTEGER,                                     -- NULL: not reported
  mem_bytes INTEGER,                                  -- NULL: not reported
  mem_total_bytes INTEGER,
  param_norm, update_ratio,
  nonfinite INTEGER,
  collectives INTEGER,
  skipped INTEGER NOT NULL DEFAULT 0,
  loss_scale
);
INSERT INTO metrics_v8 SELECT id, run_id, rank, step, t, loss, grad_norm, lr, step_ms, data_ms,
  comm_ms, tokens, mem_bytes, mem_total_bytes, param_norm, update_ratio, nonfinite, collectives,
  skipped, loss_scale FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_v8 RENAME TO metrics;
CREATE INDEX metrics_by_run_rank_step ON metrics(run_id, rank, step);
)sql";

// Version 9: the CUPTI probe's gpu records (one per device and short interval), stored as the
// trainer's other records are: they were judged and dropped, so a report could not show what
// the GPU did per step. They are joined with the steps when read (probes/detectors/gpu_time.hpp),
// through each rank's start event.
const char* const kVersion9 = R"sql(
CREATE TABLE gpu_intervals (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  t,
  device INTEGER NOT NULL DEFAULT 0,
  unix_t0, unix_t1,                                    -- Unix seconds
  busy_ms, compute_ms, nccl_ms, overlap_ms, memcpy_ms, idle_ms, max_gap_ms,
  kernels INTEGER NOT NULL DEFAULT 0,
  nccl_kernels INTEGER NOT NULL DEFAULT 0,
  memcpys INTEGER NOT NULL DEFAULT 0,
  late INTEGER NOT NULL DEFAULT 0                      -- activities the probe dropped
);
CREATE INDEX gpu_intervals_by_run ON gpu_intervals(run_id, rank);
)sql";

// Version 10: why an infra_error run could not run (a trainer that rejected its arguments, or
// wrote no step record), with the end of its log: it was printed once and lost, so `show` and
// `report` of such a run said nothing of it, and `gc` removed the log that did.
const char* const kVersion10 = R"sql(
ALTER TABLE runs ADD COLUMN infra_detail TEXT NOT NULL DEFAULT '';
)sql";

// The --set launcher.* keys a run was placed with (JSON array): a command trainer's argv does not
// carry them, and a replay of a Slurm run lost its nodes and exclusions.
const char* const kVersion11 = R"sql(
ALTER TABLE runs ADD COLUMN launcher_sets TEXT NOT NULL DEFAULT '[]';
)sql";

int read_int_pragma(sqlite3* db, const std::string& path, const char* pragma) {
  Statement statement(db, path, std::string("PRAGMA ") + pragma);
  return statement.step() ? static_cast<int>(statement.int64(0)) : 0;
}

bool has_tables(sqlite3* db, const std::string& path) {
  Statement statement(db, path, "SELECT count(*) FROM sqlite_master");
  return statement.step() && statement.int64(0) > 0;
}

}  // namespace

// Refuses files that are not ours or too new. Called outside and inside the step transactions.
int check_file(sqlite3* db, const std::string& path, int known) {
  const int application_id = read_int_pragma(db, path, "application_id");
  const int version = read_user_version(db, path);
  const bool fresh = application_id == 0 && version == 0 && !has_tables(db, path);
  if (application_id != kApplicationId && !fresh) {
    throw UserError("not a faultline store (a SQLite database of another program)", path,
                    "point --db (or FAULTLINE_DB) at a faultline store or a new file");
  }
  if (version > known) {
    throw UserError("the store has schema version " + std::to_string(version) +
                        ", newer than this faultline's " + std::to_string(known),
                    path, "use a newer faultline, or point --db at another file");
  }
  return version;
}

const std::vector<std::string>& builtin_migrations() {
  static const std::vector<std::string> steps = {kVersion1, kVersion2,  kVersion3, kVersion4,
                                                 kVersion5, kVersion6,  kVersion7, kVersion8,
                                                 kVersion9, kVersion10, kVersion11};
  return steps;
}

int read_user_version(sqlite3* db, const std::string& path) {
  return read_int_pragma(db, path, "user_version");
}

int migrate(sqlite3* db, const std::string& path, const std::vector<std::string>& steps) {
  const int known = static_cast<int>(steps.size());
  int version = check_file(db, path, known);
  int depth = 0;
  while (version < known) {
    Transaction transaction(db, path, depth);
    // Another process may have migrated between our check and our write lock: look again.
    version = check_file(db, path, known);
    if (version >= known) break;
    exec(db, path, steps[static_cast<size_t>(version)]);
    exec(db, path, "PRAGMA application_id = " + std::to_string(kApplicationId));
    exec(db, path, "PRAGMA user_version = " + std::to_string(version + 1));
    transaction.commit();
    ++version;
  }
  return version;
}

}  // namespace faultline::store::detail
