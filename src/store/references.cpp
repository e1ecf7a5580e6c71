// Named references of runs (loss_regression's reference band): add, get, list.
#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

namespace {
using detail::Statement;

std::vector<int64_t> reference_runs(sqlite3* db, const std::string& path, int64_t id) {
  Statement query(db, path,
                  "SELECT run_id FROM loss_reference_runs WHERE reference_id = ? ORDER BY "
                  "position");
  query.bind(1, id);
  std::vector<int64_t> runs;
  while (query.step()) runs.push_back(query.int64(0));
  return runs;
}

constexpr const char* kColumns =
    "SELECT id, name, config_path, config_hash, created_at FROM "
    "loss_references";

ReferenceInfo read_reference(sqlite3* db, const std::string& path, const Statement& row) {
  ReferenceInfo reference;
  reference.id = row.int64(0);
  reference.name = row.text(1);
  reference.config_path = row.text(2);
  reference.config_hash = row.text(3);
  reference.created_at = row.text(4);
  reference.run_ids = reference_runs(db, path, reference.id);
  return reference;
}
}  // namespace

int64_t Store::add_reference(const ReferenceInfo& reference) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  Statement insert(db_, path_,
                   "INSERT INTO loss_references (name, config_path, config_hash, created_at) "
                   "VALUES (?, ?, ?, ?)");
  insert.bind(1, reference.name);
  insert.bind(2, reference.config_path);
  insert.bind(3, reference.config_hash);
  insert.bind(4, reference.created_at.empty() ? detail::now_utc() : reference.created_at);
  insert.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  Statement add_run(db_, path_,
                    "INSERT INTO loss_reference_runs (reference_id, position, run_id) "
                    "VALUES (?, ?, ?)");
  for (size_t i = 0; i < reference.run_ids.size(); ++i) {
    add_run.bind(1, id);
    add_run.bind(2, static_cast<int64_t>(i));
    add_run.bind(3, reference.run_ids[i]);
    add_run.run();
  }
  transaction.commit();
  return id;
}

std::optional<ReferenceInfo> Store::get_reference(const std::string& name) const {
  Statement query(db_, path_, std::string(kColumns) + " WHERE name = ?");
  query.bind(1, name);
  if (!query.step()) return std::nullopt;
  return read_reference(db_, path_, query);
}

std::vector<ReferenceInfo> Store::list_references() const {
  Statement query(db_, path_, std::string(kColumns) + " ORDER BY name");
  std::vector<ReferenceInfo> references;
  while (query.step()) references.push_back(read_reference(db_, path_, query));
  return references;
}

}  // namespace faultline::store
