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
