// Trial cache, search states and findings: the rows that make a search resumable and its
// conclusions durable.
#include <stdexcept>

#include "common/enum_names.hpp"
#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

namespace {
using detail::Statement;

SearchInfo read_search(const Statement& row) {
  SearchInfo search;
  search.id = row.int64(0);
  search.kind = row.text(1);
  search.state_json = row.text(2);
  search.status = search_status_from_string(row.text(3));
  search.created_at = row.text(4);
  search.updated_at = row.text(5);
  return search;
}

FindingInfo read_finding(const Statement& row) {
  FindingInfo finding;
  finding.id = row.int64(0);
  finding.kind = row.text(1);
  finding.fields_json = row.text(2);
  finding.repro_json = row.text(3);
  finding.search_id = row.opt_int64(4);
  finding.created_at = row.text(5);
  return finding;
}

constexpr const char* kSearchColumns = "id, kind, state, status, created_at, updated_at";
constexpr const char* kFindingColumns = "id, kind, fields, repro, search_id, created_at";

StoredTrial read_trial(const Statement& query) {
  StoredTrial trial;
  trial.id = query.int64(0);
  trial.spec_hash = query.text(1);
  trial.spec_json = query.text(2);
  if (!query.is_null(3)) trial.outcome_json = query.text(3);
  trial.run_id = query.opt_int64(4);
  trial.created_at = query.text(5);
  return trial;
}

constexpr const char* kTrialColumns =
    "SELECT id, spec_hash, spec, outcome, run_id, created_at FROM trials ";
}  // namespace

std::optional<StoredTrial> Store::find_trial(const std::string& spec_hash) const {
  Statement query(db_, path_, std::string(kTrialColumns) + "WHERE spec_hash = ?");
  query.bind(1, spec_hash);
  if (!query.step()) return std::nullopt;
  return read_trial(query);
}

std::optional<StoredTrial> Store::trial_of_run(int64_t run_id) const {
  Statement query(db_, path_, std::string(kTrialColumns) + "WHERE run_id = ? ORDER BY id DESC");
  query.bind(1, run_id);
  if (!query.step()) return std::nullopt;
  return read_trial(query);
}

void Store::put_trial(const std::string& spec_hash, const std::string& spec_json,
                      const std::optional<std::string>& outcome_json,
                      std::optional<int64_t> run_id) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement upsert(db_, path_,
                   "INSERT INTO trials (spec_hash, spec, outcome, run_id, created_at) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT(spec_hash) DO UPDATE SET "
                   "outcome = excluded.outcome, run_id = excluded.run_id");
  upsert.bind(1, spec_hash);
  upsert.bind(2, spec_json);
  if (outcome_json) {
    upsert.bind(3, *outcome_json);
  } else {
    upsert.bind_null(3);
  }
  upsert.bind(4, run_id);
  upsert.bind(5, detail::now_utc());
  upsert.run();
  transaction.commit();
}

int64_t Store::create_search(const std::string& kind, const std::string& state_json) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement insert(db_, path_,
                   "INSERT INTO searches (kind, state, status, created_at, updated_at) "
                   "VALUES (?, ?, 'running', ?, ?)");
  const std::string now = detail::now_utc();
  insert.bind(1, kind);
  insert.bind(2, state_json);
  insert.bind(3, now);
  insert.bind(4, now);
  insert.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  transaction.commit();
  return id;
}

void Store::update_search(int64_t id, const std::string& state_json, SearchStatus status) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement update(db_, path_,
                   "UPDATE searches SET state = ?, status = ?, updated_at = ? WHERE id = ?");
  update.bind(1, state_json);
  update.bind(2, to_string(status));
  update.bind(3, detail::now_utc());
  update.bind(4, id);
  update.run();
  if (sqlite3_changes(db_) != 1) {
    throw std::runtime_error("update_search: no search " + std::to_string(id));
  }
  transaction.commit();
}

std::optional<SearchInfo> Store::get_search(int64_t id) const {
  Statement query(db_, path_,
                  std::string("SELECT ") + kSearchColumns + " FROM searches WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_search(query);
}

std::vector<SearchInfo> Store::list_searches(int limit) const {
  Statement query(
      db_, path_,
      std::string("SELECT ") + kSearchColumns + " FROM searches ORDER BY id DESC LIMIT ?");
  query.bind(1, limit);
  std::vector<SearchInfo> searches;
  while (query.step()) searches.push_back(read_search(query));
  return searches;
}

int64_t Store::add_finding(const FindingInfo& finding) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement insert(db_, path_,
                   "INSERT INTO findings (kind, fields, repro, search_id, created_at) "
                   "VALUES (?, ?, ?, ?, ?)");
  insert.bind(1, finding.kind);
  insert.bind(2, finding.fields_json.empty() ? std::string("{}") : finding.fields_json);
  insert.bind(3, finding.repro_json.empty() ? std::string("{}") : finding.repro_json);
  insert.bind(4, finding.search_id);
  insert.bind(5, finding.created_at.empty() ? detail::now_utc() : finding.created_at);
  insert.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  transaction.commit();
  return id;
}

std::optional<FindingInfo> Store::get_finding(int64_t id) const {
  Statement query(db_, path_,
                  std::string("SELECT ") + kFindingColumns + " FROM findings WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_finding(query);
}

std::vector<FindingInfo> Store::list_findings(int limit) const {
  Statement query(
      db_, path_,
      std::string("SELECT ") + kFindingColumns + " FROM findings ORDER BY id DESC LIMIT ?");
  query.bind(1, limit);
  std::vector<FindingInfo> findings;
  while (query.step()) findings.push_back(read_finding(query));
  return findings;
}

namespace {
constexpr std::pair<SearchStatus, const char*> kSearchStatusNames[] = {
    {SearchStatus::Running, "running"},
    {SearchStatus::Done, "done"},
    {SearchStatus::Failed, "failed"}};
}  // namespace

const char* to_string(SearchStatus status) {
  return name_of(kSearchStatusNames, status);
}

SearchStatus search_status_from_string(const std::string& text) {
  if (const auto status = value_of(kSearchStatusNames, text)) return *status;
  throw std::invalid_argument("unknown search status '" + text + "'");
}

}  // namespace faultline::store
