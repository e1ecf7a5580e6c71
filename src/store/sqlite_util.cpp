// RAII helpers over the SQLite C API and the classification of SQLite failures.
#include "store/sqlite_util.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "common/error.hpp"

namespace faultline::store::detail {

void throw_sqlite(sqlite3* db, int rc, const std::string& path, const std::string& doing) {
  const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw UserError(
          "the store is locked by another process (" + message + ", while " + doing + ")", path,
          "another faultline command is writing to it; wait for it to finish, or "
          "use --db (or FAULTLINE_DB) for a separate file");
    case SQLITE_NOTADB:
      throw UserError("not a SQLite database (" + message + ")", path,
                      "point --db (or FAULTLINE_DB) at a faultline store or a new file");
    case SQLITE_CORRUPT:
      throw UserError("the store file is corrupt (" + message + ")", path,
                      "restore it from a copy, or start a new one with --db");
    case SQLITE_FULL:
      throw UserError("the disk holding the store is full (" + message + ")", path,
                      "free some space, or use --db on another disk");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      throw UserError("cannot open the store for writing (" + message + ")", path,
                      "check that its directory exists and is writable (and any -wal/-shm file "
                      "next to it), or use --db");
    case SQLITE_IOERR:
      throw UserError("I/O error on the store (" + message + ")", path,
                      "check the disk and the file system");
    default:
      throw std::runtime_error("sqlite error while " + doing + ": " + message + " (" + path + ")");
  }
}

void exec(sqlite3* db, const std::string& path, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    sqlite3_free(error);
    throw_sqlite(db, rc, path, "running '" + sql.substr(0, 60) + "'");
  }
}

Statement::Statement(sqlite3* db, const std::string& path, std::string_view sql, bool persistent)
    : db_(db), path_(&path) {
  const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
  const int rc =
      sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), flags, &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    throw_sqlite(db, rc, path, "preparing '" + std::string(sql.substr(0, 60)) + "'");
  }
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), path_(other.path_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    path_ = other.path_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

namespace {
void check_bind(sqlite3* db, int rc, const std::string& path) {
  if (rc != SQLITE_OK) throw_sqlite(db, rc, path, "binding a parameter");
}
}  // namespace

void Statement::bind(int index, int64_t value) {
  check_bind(db_, sqlite3_bind_int64(stmt_, index, value), *path_);
}

void Statement::bind(int index, std::string_view text) {
  check_bind(
      db_,
      sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT),
      *path_);
}

void Statement::bind_null(int index) {
  check_bind(db_, sqlite3_bind_null(stmt_, index), *path_);
}

void Statement::bind(int index, const std::optional<int64_t>& value) {
  if (value) {
    bind(index, *value);
  } else {
    bind_null(index);
  }
}

void Statement::bind_double_raw(int index, double value) {
  check_bind(db_, sqlite3_bind_double(stmt_, index, value), *path_);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string sql = sqlite3_sql(stmt_) != nullptr ? sqlite3_sql(stmt_) : "";
  sqlite3_reset(stmt_);
  throw_sqlite(db_, rc, *path_, "running '" + sql.substr(0, 60) + "'");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::run() {
  while (step()) {
  }
  sqlite3_reset(stmt_);  // bindings stay: every caller binds every parameter again
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
int Statement::type(int column) const {
  return sqlite3_column_type(stmt_, column);
}
int64_t Statement::int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
double Statement::real_raw(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::text(int column) const {
  const auto* bytes = sqlite3_column_text(stmt_, column);
  if (bytes == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(bytes),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

Transaction::Transaction(sqlite3* db, const std::string& path, int& depth)
    : db_(db), path_(path), depth_(depth), level_(depth) {
  exec(db_, path_, level_ == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT s" + std::to_string(level_));
  ++depth_;
}

Transaction::~Transaction() {
  if (done_) return;
  // Best effort: a failed rollback leaves SQLite to roll back when the handle closes.
  const std::string sql = level_ == 0 ? "ROLLBACK"
                                      : "ROLLBACK TO s" + std::to_string(level_) + "; RELEASE s" +
                                            std::to_string(level_);
  sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  --depth_;
}

void Transaction::commit() {
  exec(db_, path_, level_ == 0 ? "COMMIT" : "RELEASE s" + std::to_string(level_));
  done_ = true;
  --depth_;
}

std::string now_utc() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[40];
  std::snprintf(out, sizeof out, "%s.%03dZ", buffer, static_cast<int>(millis));
  return out;
}

}  // namespace faultline::store::detail
