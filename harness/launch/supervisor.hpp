// Watches the ranks of one trial while they run: tails their metrics, hands every record to a
// sink, and ends the trial on a heartbeat timeout (hang), a rank's death (crash) or the sink's
// request — always leaving no process behind.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/end_status.hpp"
#include "common/metrics_record.hpp"
#include "harness/launch/hang_report.hpp"
#include "harness/launch/launcher.hpp"

namespace faultline::harness {

struct SuperviseOptions {
  double startup_s = 120;      // allowance before the first step record of each rank
  double step_timeout_s = 60;  // no new step record for this long: a hang
  double total_timeout_s = 0;  // 0: none
  std::chrono::milliseconds poll_interval{50};
  std::chrono::milliseconds kill_grace{2000};
  // After the first rank dies, how long the others get to end by themselves.
  std::chrono::milliseconds peer_exit_grace{3000};
  // After the sink asks to stop, how long a rank that writes the metrics protocol gets to halt
  // by itself: a trainer halting on a failure writes its evidence (the anomaly record naming the
  // module, the end event) after the step record that failed. One that writes a later step
  // record is not halting, and a log-only one writes no evidence: both are stopped at once.
  std::chrono::milliseconds halt_grace{5000};
  const std::atomic<bool>* interrupted = nullptr;  // set (by a signal handler) to end the trial
  // Sent to every rank of a hung trial before it is killed, so the trainer can write its stacks
  // to its log (faultline_probe.py: SIGUSR1 → faulthandler); 0: none (faultline-train).
  int stack_signal = 0;
  // A replay from the checkpoint of this step (0: a fresh start): each rank begins there, as a
  // resume event would say, so a death before its first record is dated to the step after it
  // even from a trainer that writes no resume event.
  int64_t resume_step = 0;
};

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void on_record(int rank, const MetricsRecord& record) = 0;
  virtual void on_malformed(int rank, const std::string& line, const std::string& error) = 0;
  // Polled after each batch of records: true ends the trial now (e.g. a fatal failure was seen).
  virtual bool should_stop() { return false; }
};

struct CrashReport {
  int rank = 0;
  int exit_code = 0;
  int signal = 0;    // 0 when it exited
  int64_t step = 0;  // the step it died in (last completed + 1)
  // A rank started by a launcher process with others (first, last rank): the status above is
  // the launcher's, and the rank is the one of them that wrote no end event.
  std::optional<std::pair<int, int>> launcher_of;
};

struct SupervisedResult {
  std::vector<RankStatus> ranks;
  std::vector<int64_t> last_step;    // per rank, 0 if none
  std::vector<int64_t> first_step;   // per rank: its first step record's step, 0 if none
  std::vector<int64_t> collectives;  // per rank: collectives entered at the last step record
  // Per rank: what its end event said (an empty EndEvent when it wrote none). Read from the
  // whole file after the ranks ended, so a rank that wrote it just before dying counts: after
  // status "ok", a death was in its shutdown.
  std::vector<EndEvent> ends;
  std::optional<HangReport> hang;
  std::optional<CrashReport> crash;  // the first rank to die with a non-zero status
  bool timed_out = false;            // total_timeout_s ran out
  bool stopped_by_sink = false;
  bool interrupted = false;
  int malformed_lines = 0;
  double wall_s = 0;
};

// The file the CUPTI probe appends a rank's gpu records to (gpu/timeline/gpu_record.hpp names
// it the same way): `<metrics>.gpu.jsonl`.
std::string gpu_records_path(const std::string& metrics_path);

SupervisedResult supervise(RunningTrial& trial, const std::vector<RankLaunch>& ranks,
                           const SuperviseOptions& options, RecordSink& sink);

}  // namespace faultline::harness
