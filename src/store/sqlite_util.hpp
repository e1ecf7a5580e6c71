// Thin RAII helpers over the SQLite C API for the store: statements, transactions, and the rule
// that decides which SQLite failures are the user's (UserError) and which are bugs.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultline::store::detail {

// Throws for a failed SQLite call: busy/locked, not-a-database, corrupt, disk full, read-only,
// can't open and I/O errors are the user's environment (UserError naming `path`, with a hint);
// everything else (SQL errors, constraint violations) is a bug (std::runtime_error).
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& path,
                               const std::string& doing);

// Runs one or more statements without results.
void exec(sqlite3* db, const std::string& path, const std::string& sql);

// A prepared statement; bind indices are 1-based, column indices 0-based.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, const std::string& path, std::string_view sql, bool persistent = false);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool prepared() const { return stmt_ != nullptr; }

  void bind(int index, int64_t value);
  void bind(int index, int value) { bind(index, static_cast<int64_t>(value)); }
  void bind(int index, std::string_view text);
  void bind(int index, const std::string& text) { bind(index, std::string_view(text)); }
  void bind(int index, const char* text) { bind(index, std::string_view(text)); }
  void bind_null(int index);
  void bind(int index, const std::optional<int64_t>& value);
  // Doubles go through real_codec.hpp (NaN needs care), never a plain bind.
  void bind_double_raw(int index, double value);

  bool step();   // true: a row is ready; false: done
  void reset();  // ready for new bindings (old ones are cleared)
  void run();    // step() to completion, then ready to run again (bindings are kept)

  bool is_null(int column) const;
  int type(int column) const;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_NULL, ...
  int64_t int64(int column) const;
  double real_raw(int column) const;
  std::string text(int column) const;
  std::optional<int64_t> opt_int64(int column) const;

 private:
  sqlite3* db_ = nullptr;
  const std::string* path_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// One write transaction on a handle: BEGIN IMMEDIATE when outermost (so a waiting writer waits
// in the busy handler up front), a SAVEPOINT when nested. Rolled back unless commit() is called.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path, int& depth);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  const std::string& path_;
  int& depth_;
  int level_;
  bool done_ = false;
};

// Now as ISO-8601 UTC with milliseconds, e.g. 2024-05-01T12:34:56.789Z.
std::string now_utc();

}  // namespace faultline::store::detail
