// What a report says, independent of how it is rendered: gathered from the store by
// report_gather.cpp, written as HTML (report_html.cpp) or Markdown (report_markdown.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace faultline::report {

struct Fact {
  std::string label;
  std::string value;
};

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

struct ConfigChange {
  std::string key, baseline, failing;
};

// One trial of a search, in the order it ran.
struct TrialRow {
  std::string phase;    // what the search was asking ("steps: first bad step")
  std::string tested;   // the trial's setup ("1 rank, steps 9..12, 50% of the data")
  std::string verdict;  // pass | fail | skip | infra_error
  std::string failure;  // its first failure, "" when it passed
  int64_t run_id = 0;
  int64_t steps_run = 0;  // 0 when reused
  double wall_s = 0;      // 0 when reused
  bool reused = false;    // served by the trial cache
};

// Who a plotted line belongs to; decides its colour and style on the page.
enum class SeriesRole { Subject, Replay, Reference, BandLow, BandHigh };
const char* to_string(SeriesRole role);

// One line of a plot: one run's (or reference's) values of one metric by step. Non-finite
// values stay in: the page marks them.
struct Series {
  std::string label;
  SeriesRole role = SeriesRole::Subject;
  std::vector<int64_t> steps;
  std::vector<double> values;
};

struct Plot {
  std::string id;     // "loss", "grad_norm", ...
  std::string title;  // "Loss"
  std::string unit;   // "", "ms", "MiB"
  std::vector<Series> series;
};

enum class Subject { Finding, Run };

struct Report {
  Subject subject = Subject::Finding;
  std::string title;    // "Finding F3" / "Run 12"
  std::string verdict;  // one sentence
  bool failed = true;
  std::optional<int64_t> bad_step;
  std::vector<Fact> location;  // step, phase, module, samples, shards, rank, host
  std::string detail_block;    // the lines of the detail below its first (a hang's stacks)
  Table rank_evidence;         // per-rank verdicts and timings (empty: none)
  Table gpu_time;  // per rank, what its GPU did per step (the CUPTI probe's records; empty: none)
  std::vector<ConfigChange> config_culprit;
  bool has_baseline = false;  // config_culprit is meaningful
  std::vector<TrialRow> timeline;
  std::vector<Fact> deciding_facts;  // the machine facts that decide the bits
  std::vector<Fact> summary;         // cost of the search, or the run's shape
  Table failures;                    // a run's failures
  std::vector<std::string> notes;    // axes not searched, references missing, ...
  std::string repro_command;         // what to paste: `faultline repro F3`
  std::string trainer_command;       // the trainer command line it runs
  std::vector<Plot> plots;
  std::vector<double> loss;  // the failing rank's (else lowest rank's) loss (Markdown sparkline)
};

}  // namespace faultline::report
