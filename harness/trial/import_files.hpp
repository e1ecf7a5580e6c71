// The per-rank files of a run faultline did not launch, read in full before anything is stored:
// each rank's metrics file, or a log-only trainer's output read through its recipe's regexes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/end_status.hpp"
#include "common/metrics_record.hpp"
#include "harness/launch/log_records.hpp"

namespace faultline::harness {

// A restart inside one rank's file: a job requeued, or restarted by hand from a checkpoint,
// appends a new start event (and a resume event) to the same metrics file; in a log it shows as
// a step before the one the log had reached. The records kept are the last run of each step, as
// the run's final trajectory.
struct Restart {
  int rank = 0;
  int64_t stopped_after = 0;  // the last step before it
  bool ended = false;         // the part before it wrote an end event
  // The step of the checkpoint it resumed from (0: from the start); in a log, the step before
  // its first one.
  int64_t resumed_from = 0;
  int64_t rerun = 0;  // steps the part before it had run that it ran again
  // Its end event said SIGTERM stopped it (a time limit, a preemption, a requeue), not that it
  // finished.
  bool terminated = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Restart, rank, stopped_after, ended, resumed_from, rerun,
                                   terminated)

struct RankFile {
  std::string path;
  std::vector<MetricsRecord> records;  // checkpoint events with their paths made absolute
  std::vector<std::pair<std::string, std::string>> malformed;  // line, error
  int64_t cut_off_line = 0;  // its last line, cut off mid-record (0: none); among `malformed`
  std::optional<nlohmann::json> start;  // its last part's (a log has none)
  bool ended = false;                   // its last part has an end event (a log never has)
  EndEvent end;                         // what that end event said
  std::vector<Restart> restarts;
  int64_t last_step = 0;
  // Its last part's timing, in the records' own clock (t, seconds): when its last step record
  // was written, the longest wait between two step records (a checkpoint save, an evaluation
  // and a slow step alike), and when its end event was.
  double last_step_t = 0, slowest_gap_s = 0, end_t = 0;
  int64_t collective_entered = 0;  // its last part's newest collective heartbeat's seq (0: none)
  // The Python stacks it wrote when signalled (SIGUSR1, e.g. sbatch --signal=USR1@60), from
  // stacks.rank<r>.txt beside its file as FAULTLINE_STACKS names it; "" when none.
  std::string stacks;
  std::string stacks_path;
};

// The file a rank's stacks go to in a run's folder: where a trial of a launcher's ranks asks
// them (FAULTLINE_STACKS) and where an import looks for a job's.
std::string stacks_file(const std::filesystem::path& dir, int rank);

// Where an imported run's files are: metrics.rank<r>.jsonl in a folder, or a log-only trainer's
// output (one file: rank 0's; a folder: rank<r>.log, as a faultline trial writes them).
struct RunFiles {
  std::filesystem::path dir;  // relative checkpoint paths are read from here
  std::vector<std::string> paths;
  const LogRecords* log = nullptr;  // null: metrics files
};

// The files of `ranks` ranks (0: as many as there are from rank 0 up) at `given` (a folder, or
// with `log` also a file). Throws UserError naming the first one missing.
RunFiles find_run_files(const std::string& given, int ranks, const LogRecords* log);

// Called with each record kept from a rank's file, in file order.
using KeepRecord = std::function<void(const MetricsRecord&)>;

// One rank's file, every line read and checked: a missing checkpoint and a metrics file without
// a start event are UserErrors naming the file and line. A last record cut off mid-line (its
// process killed while it wrote it) is malformed, and marked. Without `keep` the records kept
// are in `records`; with it they are passed to it (as they are read when the file cannot hold a
// restart, so that a big job's file is never held in memory) and `records` stays empty.
RankFile read_rank_file(const RunFiles& files, int rank, const KeepRecord& keep = {});

}  // namespace faultline::harness
