// Which store's run a run directory holds: written into the directory when a trial makes it, read
// by gc and `show`. Run ids restart with each store, so two stores sharing a --work-dir can name
// the same run-<id> folder at different times (one's gc freed it, the other's next run took it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace faultline::harness {

inline constexpr const char* kRunOwnerFile = ".faultline-run.json";

struct RunOwner {
  std::string store;  // the store file's absolute path
  int64_t run_id = 0;
};

// Writes DIR/.faultline-run.json ({"version": 1, "store", "run_id"}).
void write_run_owner(const std::string& dir, const RunOwner& owner);

// The owner a directory names; nullopt for one without the file (made by a faultline before it
// wrote one, or not a trial's) or with one this faultline cannot read.
std::optional<RunOwner> read_run_owner(const std::string& dir);

// The run `dir` holds by its owner file when that is another than `run_id` of the store at
// `store_path`; nullopt when it is that run's, or names none.
std::optional<RunOwner> held_by_another_run(const std::string& dir, const std::string& store_path,
                                            int64_t run_id);

}  // namespace faultline::harness
