// The SQLite store: every run, its resolved config, its metrics and events, its verdict; later
// trials, searches and findings. One file (default ./faultline.db), WAL mode, a busy timeout,
// every write in a transaction, schema versioned with PRAGMA user_version and migrated on open.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"

struct sqlite3;

namespace faultline::store {

constexpr int kSchemaVersion = 11;

enum class RunStatus { Running, Finished, Interrupted };

struct RunFailure {
  std::string kind;   // a failure kind of DESIGN.md: nonfinite, hang, crash, ...
  int64_t step = -1;  // -1: not tied to a step
  int rank = -1;      // -1: not tied to a rank
  std::string detail;
  int64_t shown_by = -1;  // the step by which its evidence is complete, when later than `step`
};

// Lines of one rank's metrics file that were not the protocol (docs/metrics-protocol.md):
// counted, never fatal, kept with the run.
struct RankMalformed {
  int rank = 0;
  int64_t lines = 0;
  std::string first_line;  // the first of them, cut to 200 bytes
  std::string first_error;
};

struct RunInfo {
  int64_t id = 0;
  std::string config_path;
  std::string config;  // resolved config text
  std::string config_hash;
  int ranks = 1;
  int64_t steps = 0;  // steps asked for
  double data_fraction = 1;
  std::string argv_json;  // JSON array of the rank-0 argv
  std::string out_dir;    // the run's directory as the harness made it; "" when not known
  std::string launcher = "local";
  std::string launcher_sets_json = "[]";  // the --set launcher.* keys it was placed with
  std::string started_at;                 // ISO-8601 UTC; create_run fills in now when empty
  std::string ended_at;                   // finish_run fills in now when empty; "" while running
  RunStatus status = RunStatus::Running;
  std::optional<int> exit_code;       // of the first rank that failed, or 0
  std::optional<std::string> signal;  // "SIGSEGV", ...
  std::string verdict;                // "pass" | "fail" | "skip" | "infra_error" | "" while running
  std::string infra_detail;           // why an infra_error run could not run, with its log's tail
  std::vector<RunFailure> failures;
  std::vector<RankMalformed> malformed;  // ranks with malformed metrics lines, by rank
  std::string parent;                    // e.g. "smoke:<id>" for rungs of a smoke gate; free text
  // Who runs it, so a later harness can tell a live run from an interrupted one.
  int64_t owner_pid = 0;  // 0: unknown
  std::string owner_host;
};

// A trial whose result is cached by the content hash of its spec: a search that is killed and
// resumed finds it here instead of running it again. Specs and outcomes are JSON documents
// owned by the caller (the harness's TrialSpec/Outcome, or a commit verdict).
struct StoredTrial {
  int64_t id = 0;
  std::string spec_hash;
  std::string spec_json;
  std::optional<std::string> outcome_json;  // nullopt: started, result not known yet
  std::optional<int64_t> run_id;            // the run it produced, if any
  std::string created_at;
};

// A search (isolate, bisect ...) and its serialized state machine.
enum class SearchStatus { Running, Done, Failed };

struct SearchInfo {
  int64_t id = 0;
  std::string kind;        // "isolate", "bisect-steps", "bisect-commits", ...
  std::string state_json;  // the search's own state, JSON
  SearchStatus status = SearchStatus::Running;
  std::string created_at, updated_at;
};

// What a search concluded: kind of failure, where, the evidence and how to reproduce it.
struct FindingInfo {
  int64_t id = 0;
  std::string kind;         // a failure kind of DESIGN.md
  std::string fields_json;  // JSON object: step, rank, where, samples, evidence, ...
  std::string repro_json;   // JSON: the trial spec (and argv) that reproduces it
  std::optional<int64_t> search_id;
  std::string created_at;
};

// A named reference: healthy runs of one config (seeds) that loss curves are judged against.
struct ReferenceInfo {
  int64_t id = 0;
  std::string name;
  std::vector<int64_t> run_ids;          // in the order given
  std::string config_path, config_hash;  // of the first run
  std::string created_at;
};

struct MetricsSummary {
  int64_t steps = 0;                            // step records stored
  std::optional<double> first_loss, last_loss;  // lowest rank's lowest / highest step
  double tokens_per_s = 0;                      // all ranks, from step_ms and tokens
  int ranks = 0;                                // distinct ranks with step records
  int64_t last_step = -1;                       // highest step of any rank; -1: none
  int64_t anomalies = 0;                        // anomaly records stored
  double slowest_step_ms = 0;                   // of any rank, finite step_ms only; 0: none
  int64_t skipped_steps = 0;                    // a loss scaler's skips, most of any rank
};

// How a handle talks to the file. The defaults are what the harness uses; the benchmark and
// the tests vary them.
struct Options {
  int busy_timeout_ms = 5000;           // wait this long for another writer before giving up
  std::string synchronous = "NORMAL";   // NORMAL (WAL's usual choice), FULL or OFF
  int cache_kib = 16384;                // page cache per handle
  int page_size = 16384;                // only for a new file; docs/store.md has the measurements
  int wal_autocheckpoint_pages = 1000;  // copy the WAL into the file past this many pages
};

// One handle per thread (it keeps prepared statements); any number of handles and processes
// may share a file, readers alongside one writer at a time.
class Store {
 public:
  // Opens or creates the file and migrates it. A file with a newer schema than this build knows,
  // or that is not a faultline store, is refused with a UserError naming the path.
  static Store open(const std::string& path);
  static Store open(const std::string& path, const Options& options);
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  int schema_version() const;
  const std::string& path() const { return path_; }
  // SQLite's quick_check over the whole file (a scan: about 0.2 s for 85 MB here): a damaged
  // page elsewhere is written around without an error until something reads it. Throws
  // UserError naming the path when the file is damaged.
  void check_not_damaged() const;

  int64_t create_run(const RunInfo& run);  // returns its id; status Running
  // The command line, once it is known (it names the run's directory, which needs the id).
  void set_run_argv(int64_t id, const std::string& argv_json);
  void set_run_out_dir(int64_t id, const std::string& out_dir);
  // Its length, once it is known (an imported run without a config: its records' last step,
  // known when the last rank's file has been stored).
  void set_run_steps(int64_t id, int64_t steps);
  // Status, end, exit, verdict; failures and malformed counts replace the stored ones.
  void finish_run(int64_t id, const RunInfo& result);

  // Batch inserts in one transaction: ingest must keep up with the trainer.
  void add_steps(int64_t run_id, const std::vector<StepRecord>& steps);
  void add_anomalies(int64_t run_id, const std::vector<AnomalyRecord>& anomalies);
  void add_events(int64_t run_id, const std::vector<EventRecord>& events);
  void add_fingerprints(int64_t run_id, const std::vector<FingerprintRecord>& fingerprints);
  void add_gpu_records(int64_t run_id, const std::vector<GpuRecord>& intervals);

  // Runs `writes` (calls of this handle) in one transaction, e.g. one ingest poll's steps,
  // anomalies and events; nothing of it is stored if it throws. May nest (savepoints).
  void in_transaction(const std::function<void()>& writes);

  // Marks runs still 'running' whose owner process is gone as interrupted; keeps their rows.
  // Returns how many changed; runs already finished or interrupted are left alone.
  int mark_interrupted(const std::vector<int64_t>& run_ids);
  std::vector<int64_t> running_run_ids() const;  // oldest first
  // The runs whose parent is `parent` (e.g. "import:DIR": the imports of a directory), oldest
  // first.
  std::vector<int64_t> run_ids_with_parent(const std::string& parent) const;

  std::vector<RunInfo> list_runs(int limit = 50) const;  // newest first
  std::optional<RunInfo> get_run(int64_t id) const;
  // Ordered by rank, then step, then insertion.
  std::vector<StepRecord> steps(int64_t run_id, int rank = -1) const;  // -1: all ranks
  // Only steps first..last (inclusive), from the (run, rank, step) index: a window of a big
  // job's run without loading the rest of it.
  std::vector<StepRecord> steps_between(int64_t run_id, int64_t first, int64_t last,
                                        int rank = -1) const;
  // Every step record of the run, one at a time in insertion order (ranks interleaved as they
  // were stored, each rank's own in the order it wrote them): a big job's run read without
  // holding it.
  void each_step(int64_t run_id, const std::function<void(const StepRecord&)>& visit) const;
  // The lowest and highest step of the run's records; nullopt: none.
  std::optional<std::pair<int64_t, int64_t>> step_span(int64_t run_id) const;
  std::vector<AnomalyRecord> anomalies(int64_t run_id) const;  // insertion order
  std::vector<EventRecord> events(int64_t run_id) const;       // insertion order
  // Only the events of these names (a big job's run holds a collective heartbeat per step and
  // rank, which a caller after its start or checkpoint events should not load).
  std::vector<EventRecord> events(int64_t run_id, const std::vector<std::string>& names) const;
  std::vector<FingerprintRecord> fingerprints(int64_t run_id) const;  // insertion order
  // The CUPTI probe's records: by rank, then insertion; -1: all ranks. A day's job holds
  // millions of them: each_gpu_record reads them one at a time.
  std::vector<GpuRecord> gpu_records(int64_t run_id, int rank = -1) const;
  void each_gpu_record(int64_t run_id, int rank,
                       const std::function<void(const GpuRecord&)>& visit) const;
  std::vector<int> gpu_ranks(int64_t run_id) const;  // the ranks that have them, ascending
  MetricsSummary summarize(int64_t run_id) const;

  // Trial cache. put_trial inserts, or replaces the outcome and run of the same spec_hash.
  std::optional<StoredTrial> find_trial(const std::string& spec_hash) const;
  std::optional<StoredTrial> trial_of_run(int64_t run_id) const;  // the cached trial that ran it
  void put_trial(const std::string& spec_hash, const std::string& spec_json,
                 const std::optional<std::string>& outcome_json, std::optional<int64_t> run_id);

  // Searches: the state is rewritten after every observation, in one transaction.
  int64_t create_search(const std::string& kind, const std::string& state_json);
  void update_search(int64_t id, const std::string& state_json, SearchStatus status);
  std::optional<SearchInfo> get_search(int64_t id) const;
  std::vector<SearchInfo> list_searches(int limit = 50) const;  // newest first

  int64_t add_finding(const FindingInfo& finding);  // returns its id
  std::optional<FindingInfo> get_finding(int64_t id) const;
  std::vector<FindingInfo> list_findings(int limit = 50) const;  // newest first

  // References: add_reference returns the id; a name already taken is a bug of the caller
  // (std::runtime_error): look it up first.
  int64_t add_reference(const ReferenceInfo& reference);
  std::optional<ReferenceInfo> get_reference(const std::string& name) const;
  std::vector<ReferenceInfo> list_references() const;  // by name

  // Test hooks (tests may not talk to SQLite themselves).
  // Opens with `extra` migration steps after the built-in ones (versions kSchemaVersion + 1...).
  static Store open_with_extra_migrations_for_tests(const std::string& path,
                                                    const std::vector<std::string>& extra);
  // Runs `sql` on a plain connection to `path`, without any of open()'s checks or migrations.
  static void raw_exec_for_tests(const std::string& path, const std::string& sql);

 private:
  struct Cache;  // prepared statements reused across batches
  Store(sqlite3* db, std::string path, Options options);
  static Store open_impl(const std::string& path, const Options& options,
                         const std::vector<std::string>& extra);
  sqlite3* db_ = nullptr;
  std::string path_;
  Options options_;
  std::unique_ptr<Cache> cache_;
  int tx_depth_ = 0;  // open transactions (outermost BEGIN, inner SAVEPOINTs) on this handle
};

const char* to_string(RunStatus status);
RunStatus run_status_from_string(const std::string& text);  // throws std::invalid_argument
const char* to_string(SearchStatus status);
SearchStatus search_status_from_string(const std::string& text);  // throws std::invalid_argument

}  // namespace faultline::store
