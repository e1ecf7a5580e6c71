// Benchmark (run by hand, not a test): how often the timing detectors (straggler, data_stall)
// fire on healthy multi-rank micro runs, quiet and beside CPU hogs, and whether planted slow and
// starved ranks are still caught. Runs the real `faultline train --json`; prints markdown tables.
//
//   timing_detectors [--runs N] [--fault-runs M] [--hogs H] [--ranks R] [--trainer PATH]
//
// Each run's verdict is the product's (the harness's judge). The metrics files are judged again
// here with straggler.clock = "wall", so one set of runs also measures the wall-only rule a
// trainer without cpu_ms gets, and with the rule it replaced (one ratio of per-rank median
// compute times below 0.75, 5 ms slower) for comparison.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "probes/detectors/run_judge.hpp"
#include "probes/detectors/stats.hpp"
#include "support/cli.hpp"
#include "support/metrics.hpp"

namespace {

using namespace faultline;

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

struct Case {
  std::string name;
  std::vector<std::string> overrides;
  std::string expected_kind;  // "": healthy, nothing timing-related expected
  int expected_rank = -1;
};

struct Tally {
  int runs = 0, errors = 0, straggler = 0, data_stall = 0, wall_straggler = 0, old_straggler = 0;
  int caught = 0;
  bool cpu_ms = false;
  std::vector<std::string> examples;  // details of unexpected verdicts
};

// Spinning children, as `sh -c 'while :; do :; done'` would be; killed by pid.
std::vector<pid_t> start_hogs(int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
    pids.push_back(pid);
  }
  return pids;
}

void stop_hogs(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

std::vector<StepRecord> steps_of(const std::string& run_dir, int ranks) {
  std::vector<StepRecord> steps;
  for (int rank = 0; rank < ranks; ++rank)
    for (const auto& line : faultline::testing::read_jsonl(run_dir + "/metrics.rank" +
                                                           std::to_string(rank) + ".jsonl")) {
      ParsedLine parsed = parse_metrics_line(line.dump());
      if (parsed.status != ParseStatus::Ok) continue;
      if (auto* step = std::get_if<StepRecord>(&*parsed.record)) steps.push_back(*step);
    }
  return steps;
}

// The straggler judged again on wall time.
std::vector<detectors::Failure> judge_on_wall(const std::vector<StepRecord>& steps) {
  detectors::Thresholds wall;
  wall.straggler.clock = detectors::StragglerClock::Wall;
  detectors::RunJudge judge(wall);
  for (const auto& step : steps) judge.observe(step);
  return judge.finish();
}

// The former rule: per-rank median wall compute time (after 2 steps) against the median of the
// other ranks' medians, flagged below 0.75 and at least 5 ms slower. The flagged ranks.
std::vector<int> former_rule(const std::vector<StepRecord>& steps) {
  std::map<int, std::vector<double>> compute;
  std::map<int, int> seen;
  for (const auto& r : steps)
    if (++seen[r.rank] > 2 && r.step_ms)
      compute[r.rank].push_back(*r.step_ms - r.comm_ms.value_or(0) - r.data_ms.value_or(0));
  std::map<int, double> medians;
  for (const auto& [rank, values] : compute)
    if (values.size() >= 5) medians[rank] = detectors::median(values);
  std::vector<int> flagged;
  for (const auto& [rank, ms] : medians) {
    std::vector<double> others;
    for (const auto& [other, other_ms] : medians)
      if (other != rank) others.push_back(other_ms);
    const double reference = detectors::median(others);
    if (ms > 0 && reference / ms < 0.75 && ms - reference >= 5) flagged.push_back(rank);
  }
  return flagged;
}

struct Options {
  int runs = 20, fault_runs = 5, hogs = 2;
  std::vector<int> worlds = {2, 4};
  std::string trainer = FAULTLINE_TRAIN_BIN;  // another build's, to measure its cpu_ms
};

// `faultline train --json` with the default detector thresholds.
faultline::testing::Cli train(const std::string& dir, int ranks, const Case& c,
                              const Options& options) {
  std::vector<std::string> argv = {
      FAULTLINE_BIN,         "train",     "-c",           kMicro,        "--ranks",
      std::to_string(ranks), "--json",    "--db",         dir + "/f.db", "--work-dir",
      dir + "/runs",         "--trainer", options.trainer};
  for (const auto& o : c.overrides) argv.insert(argv.end(), {"--set", o});
  faultline::testing::Cli cli{faultline::testing::run_process({argv, {}, 300, {}, {}}), nullptr};
  std::istringstream lines(cli.result.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '{') cli.doc = nlohmann::json::parse(line, nullptr, false);
  return cli;
}

void run_case(const Case& c, int ranks, int runs, const Options& options, Tally& tally) {
  for (int i = 0; i < runs; ++i) {
    const std::string dir = faultline::testing::make_temp_dir("timing-bench");
    auto cli = train(dir, ranks, c, options);
    ++tally.runs;
    if (!cli.doc.is_object() || !cli.doc.contains("failures")) {
      ++tally.errors;
      tally.examples.push_back("no verdict: " + cli.result.output.substr(0, 300));
      continue;
    }
    bool hit = false;
    for (const auto& f : cli.doc.at("failures")) {
      const std::string kind = f.at("kind");
      const int rank = f.at("rank");
      if (kind == "straggler") ++tally.straggler;
      if (kind == "data_stall") ++tally.data_stall;
      if (kind == c.expected_kind && rank == c.expected_rank) {
        hit = true;
      } else if (kind == "straggler" || kind == "data_stall") {
        if (tally.examples.size() < 4)
          tally.examples.push_back(kind + " rank " + std::to_string(rank) + ": " +
                                   f.at("detail").get<std::string>());
      }
    }
    if (hit) ++tally.caught;
    const std::string run_dir =
        dir + "/runs/run-" + std::to_string(cli.doc.at("run_id").get<int64_t>());
    const auto steps = steps_of(run_dir, ranks);
    for (const auto& step : steps)
      if (step.cpu_ms) tally.cpu_ms = true;
    const bool planted_straggler = c.expected_kind == "straggler";
    for (const auto& f : judge_on_wall(steps))
      if (f.kind == faultline::detectors::FailureKind::Straggler &&
          (!planted_straggler || f.rank != c.expected_rank))
        ++tally.wall_straggler;
    for (int rank : former_rule(steps))
      if (!planted_straggler || rank != c.expected_rank) ++tally.old_straggler;
    std::string rm = "rm -rf '" + dir + "'";
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  options.runs = faultline::bench::int_arg(argc, argv, "--runs", options.runs);
  options.fault_runs = faultline::bench::int_arg(argc, argv, "--fault-runs", options.fault_runs);
  options.hogs = faultline::bench::int_arg(argc, argv, "--hogs", options.hogs);
  if (const int only = faultline::bench::int_arg(argc, argv, "--ranks", 0); only > 0)
    options.worlds = {only};
  options.trainer = faultline::bench::text_arg(argc, argv, "--trainer", options.trainer);
  std::printf("trainer: %s\n\n", options.trainer.c_str());
  const std::vector<Case> cases = {
      {"healthy", {}, "", -1},
      {"slow rank 1 (fault.slow_ms=20)", {"fault.slow_rank=1", "fault.slow_ms=20"}, "straggler", 1},
      {"starved rank 1 (fault.data_delay_ms=20)",
       {"fault.data_delay_rank=1", "fault.data_delay_ms=20"},
       "data_stall",
       1},
  };
  std::printf(
      "| case | ranks | hogs | runs | straggler | data_stall | caught | wall-clock "
      "straggler (others) | former rule (others) | cpu_ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> examples;
  for (const auto& c : cases)
    for (int ranks : options.worlds)
      for (int hog_count : {0, options.hogs}) {
        Tally tally;
        auto pids = start_hogs(hog_count);
        run_case(c, ranks, c.expected_kind.empty() ? options.runs : options.fault_runs, options,
                 tally);
        stop_hogs(pids);
        const std::string caught = c.expected_kind.empty() ? "-" : std::to_string(tally.caught);
        std::printf("| %s | %d | %d | %d | %d | %d | %s | %d | %d | %s |\n", c.name.c_str(), ranks,
                    hog_count, tally.runs, tally.straggler, tally.data_stall, caught.c_str(),
                    tally.wall_straggler, tally.old_straggler, tally.cpu_ms ? "yes" : "no");
        std::fflush(stdout);
        for (const auto& e : tally.examples)
          examples.push_back(c.name + ", " + std::to_string(ranks) + " ranks, " +
                             std::to_string(hog_count) + " hogs: " + e);
      }
  std::printf("\nUnexpected verdicts (first per row):\n");
  for (const auto& e : examples) std::printf("- %s\n", e.c_str());
  return 0;
}
