// Opening a store (identity and version checks, WAL, busy timeout, migrations), the handle's
// lifetime, transactions spanning several writes, and the test hooks.
#include "store/store.hpp"

#include <algorithm>

#include <stdexcept>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "store/cache.hpp"
#include "store/schema.hpp"
#include "store/sqlite_util.hpp"

namespace faultline::store {

namespace {
using detail::exec;

// A raw connection that closes itself unless released into a Store.
struct Handle {
  sqlite3* db = nullptr;
  ~Handle() { sqlite3_close_v2(db); }
  sqlite3* release() {
    sqlite3* out = db;
    db = nullptr;
    return out;
  }
};

sqlite3* connect(const std::string& path, int busy_timeout_ms, Handle& handle) {
  const int rc =
      sqlite3_open_v2(path.c_str(), &handle.db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) detail::throw_sqlite(handle.db, rc, path, "opening");
  sqlite3_extended_result_codes(handle.db, 1);
  sqlite3_busy_timeout(handle.db, busy_timeout_ms);
  return handle.db;
}

void check_synchronous(const std::string& value) {
  if (value != "NORMAL" && value != "FULL" && value != "OFF") {
    throw std::invalid_argument("store: synchronous must be NORMAL, FULL or OFF, not " + value);
  }
}
}  // namespace

Store Store::open(const std::string& path) {
  return open_impl(path, Options{}, {});
}

Store Store::open(const std::string& path, const Options& options) {
  return open_impl(path, options, {});
}

Store Store::open_with_extra_migrations_for_tests(const std::string& path,
                                                  const std::vector<std::string>& extra) {
  return open_impl(path, Options{}, extra);
}

Store Store::open_impl(const std::string& path, const Options& options,
                       const std::vector<std::string>& extra) {
  check_synchronous(options.synchronous);
  Handle handle;
  sqlite3* db = connect(path, options.busy_timeout_ms, handle);
  std::vector<std::string> steps = detail::builtin_migrations();
  steps.insert(steps.end(), extra.begin(), extra.end());
  // The first read also tells a non-database file apart (SQLITE_NOTADB). Before any write: WAL
  // mode is kept in the file's header, and another program's database must stay as it was.
  detail::check_file(db, path, static_cast<int>(steps.size()));
  exec(db, path, "PRAGMA page_size = " + std::to_string(options.page_size));  // new files only
  if (path != ":memory:" && !path.empty()) {
    detail::Statement wal(db, path, "PRAGMA journal_mode = WAL");
    wal.step();
  }
  exec(db, path, "PRAGMA synchronous = " + options.synchronous);
  exec(db, path, "PRAGMA foreign_keys = ON");
  exec(db, path, "PRAGMA wal_autocheckpoint = " + std::to_string(options.wal_autocheckpoint_pages));
  exec(db, path, "PRAGMA cache_size = -" + std::to_string(options.cache_kib));
  detail::migrate(db, path, steps);
  return Store(handle.release(), path, options);
}

Store::Store(sqlite3* db, std::string path, Options options)
    : db_(db),
      path_(std::move(path)),
      options_(std::move(options)),
      cache_(std::make_unique<Cache>()) {
  cache_->path = path_;
}

Store::~Store() {
  cache_.reset();  // statements first: a handle with live statements does not close
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Store::Store(Store&& other) noexcept
    : db_(other.db_),
      path_(std::move(other.path_)),
      options_(std::move(other.options_)),
      cache_(std::move(other.cache_)),
      tx_depth_(other.tx_depth_) {
  other.db_ = nullptr;
}

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    cache_.reset();
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    options_ = std::move(other.options_);
    cache_ = std::move(other.cache_);
    tx_depth_ = other.tx_depth_;
    other.db_ = nullptr;
  }
  return *this;
}

int Store::schema_version() const {
  return detail::read_user_version(db_, path_);
}

void Store::check_not_damaged() const {
  detail::Statement check(db_, path_, "PRAGMA quick_check(1)");
  std::string answer = check.step() ? check.text(0) : "no answer";
  std::replace(answer.begin(), answer.end(), '\n', ' ');  // "*** in database main ***\nPage 4: ..."
  if (answer != "ok")
    throw UserError("the store file is corrupt (quick_check: " + answer + ")", path_,
                    "restore it from a copy, or start a new one with --db");
}

void Store::in_transaction(const std::function<void()>& writes) {
  detail::Transaction transaction(db_, path_, tx_depth_);
  writes();
  transaction.commit();
}

void Store::raw_exec_for_tests(const std::string& path, const std::string& sql) {
  Handle handle;
  exec(connect(path, 5000, handle), path, sql);
}

namespace {
constexpr std::pair<RunStatus, const char*> kRunStatusNames[] = {
    {RunStatus::Running, "running"},
    {RunStatus::Finished, "finished"},
    {RunStatus::Interrupted, "interrupted"}};
}  // namespace

const char* to_string(RunStatus status) {
  return name_of(kRunStatusNames, status);
}

RunStatus run_status_from_string(const std::string& text) {
  if (const auto status = value_of(kRunStatusNames, text)) return *status;
  throw std::invalid_argument("unknown run status '" + text + "'");
}

}  // namespace faultline::store
