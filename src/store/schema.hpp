// The store's schema as an ordered list of migration steps, and the code that checks a file's
// identity and version and brings it up to date (docs/store.md: "Versioning and migrations").
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::store::detail {

// PRAGMA application_id of a faultline store: "FLTN".
constexpr int32_t kApplicationId = 0x464c544e;

// Step i (0-based) takes a file from version i to version i + 1. Steps are append-only: a
// released step is never edited, a change is a new step.
const std::vector<std::string>& builtin_migrations();

// Checks that the open file is a faultline store (or empty) whose version is at most
// steps.size(), then applies the missing steps in order, each in its own transaction that
// also sets user_version. Returns the resulting version. Safe against concurrent openers.
int migrate(sqlite3* db, const std::string& path, const std::vector<std::string>& steps);

// PRAGMA user_version of the open file.
int read_user_version(sqlite3* db, const std::string& path);
// Throws UserError for a file of another program or of a newer schema than `known` steps;
// returns its schema version. Reads only: a refused file is left as it was.
int check_file(sqlite3* db, const std::string& path, int known);

}  // namespace faultline::store::detail
