// The supervision loop. Hang detection uses step records as the heartbeat; the ranks' collective
// heartbeats (an event written before entering each collective) then tell the ranks blocked in a
// collective from the ones that never entered it.
#include "harness/launch/supervisor.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/event_names.hpp"
#include "harness/launch/log_records.hpp"
#include "harness/launch/metrics_tail.hpp"

namespace faultline::harness {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Asks every rank for its stacks and gives them until their logs stop growing (at most 3 s).
void await_stacks(RunningTrial& trial, const std::vector<RankLaunch>& ranks, int signal) {
  auto sizes = [&] {
    std::vector<uintmax_t> out;
    for (const auto& rank : ranks) {
      std::error_code error;
      const auto size = std::filesystem::file_size(
          rank.stacks_path.empty() ? rank.log_path : rank.stacks_path, error);
      out.push_back(error ? 0 : size);
    }
    return out;
  };
  const auto before = sizes();
  trial.signal_all(signal);
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  auto last = before;
  auto stable_since = Clock::now();
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = sizes();
    if (now != last) {
      last = now;
      stable_since = Clock::now();
    } else if (now != before && Clock::now() - stable_since > std::chrono::milliseconds(250)) {
      return;
    }
  }
}

// A launcher process that starts several ranks (torchrun) ends with one status for them all,
// so the first rank of the first launcher seen dying was taken for the one that died. The rank
// that did is one that wrote no end event (the others wrote why they stopped, often a lost
// connection to it), of any launcher that died by itself, the earliest in steps; the status
// stays its launcher's.
void blame_the_silent_rank(SupervisedResult& result, const std::vector<RankLaunch>& ranks) {
  if (!result.crash || ranks.size() != result.ranks.size()) return;
  auto launcher_of = [&](size_t rank) {
    while (rank > 0 && ranks[rank].argv.empty()) --rank;
    return rank;
  };
  const size_t crashed = launcher_of(static_cast<size_t>(result.crash->rank));
  if (ranks[crashed].starts_ranks <= 1) return;
  std::optional<size_t> silent;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const auto& status = result.ranks[rank];
    const bool died_by_itself = status.kind != ExitKind::Running && !status.killed_by_harness &&
                                !status.ended_by_scheduler &&
                                (status.kind == ExitKind::Signaled || status.exit_code != 0);
    if (!died_by_itself || result.ends[rank].status || !result.ends[rank].error.empty()) continue;
    if (!silent || result.last_step[rank] < result.last_step[*silent]) silent = rank;
  }
  const size_t blamed = silent ? *silent : static_cast<size_t>(result.crash->rank);
  const size_t first = launcher_of(blamed);
  result.crash->launcher_of = {static_cast<int>(first),
                               static_cast<int>(first) + ranks[first].starts_ranks - 1};
  result.crash->rank = static_cast<int>(blamed);
  result.crash->step = result.last_step[blamed] + 1;
  result.crash->exit_code = result.ranks[blamed].exit_code;
  result.crash->signal = result.ranks[blamed].signal;
}

}  // namespace

std::string gpu_records_path(const std::string& metrics_path) {
  return metrics_path + ".gpu.jsonl";
}

SupervisedResult supervise(RunningTrial& trial, const std::vector<RankLaunch>& ranks,
                           const SuperviseOptions& options, RecordSink& sink) {
  const auto start = Clock::now();
  const size_t count = ranks.size();
  SupervisedResult result;
  result.last_step.assign(count, options.resume_step);
  result.first_step.assign(count, 0);
  result.collectives.assign(count, 0);
  result.ends.assign(count, {});
  std::vector<MetricsTail> tails;
  // The CUPTI probe (--cupti) writes its gpu records next to each rank's metrics file.
  std::vector<MetricsTail> gpu_tails;
  for (const auto& rank : ranks) {
    tails.emplace_back(rank.log_records ? rank.log_path : rank.metrics_path);
    gpu_tails.emplace_back(gpu_records_path(rank.metrics_path));
  }
  std::vector<Clock::time_point> last_progress(count, start);
  std::vector<int64_t> entered(count, 0);  // the last collective each rank reported entering
  // The step a rank resumed after (its resume event): a crash or hang before its first step
  // record is in the step after it, not in step 1, and that first step is still start-up.
  std::vector<int64_t> resumed_after(count, options.resume_step);
  std::optional<Clock::time_point> first_death;
  std::optional<Clock::time_point> stop_asked;
  std::vector<int64_t> steps_when_asked;
  // Whether a rank still running may be halting by itself (see SuperviseOptions::halt_grace):
  // it speaks the protocol and wrote no step record since the stop was asked.
  auto halting = [&] {
    for (size_t rank = 0; rank < count; ++rank)
      if (result.ranks[rank].kind == ExitKind::Running && !ranks[rank].log_records &&
          result.last_step[rank] <= steps_when_asked[rank])
        return true;
    return false;
  };

  auto drain = [&](bool final_read) {
    for (size_t rank = 0; rank < count; ++rank) {
      auto lines = final_read ? tails[rank].read_rest() : tails[rank].read_new_lines();
      for (auto& line : lines) {
        if (const auto& log = ranks[rank].log_records) {
          // A log-only trainer: its own lines, read as records; the rest is its business.
          auto translated =
              log->translate(line, static_cast<int>(rank), seconds_between(start, Clock::now()));
          if (!translated) continue;
          line = std::move(*translated);
        }
        if (line.empty()) continue;
        ParsedLine parsed = parse_metrics_line(line);
        if (parsed.status == ParseStatus::Malformed) {
          ++result.malformed_lines;
          sink.on_malformed(static_cast<int>(rank), line, parsed.error);
          continue;
        }
        if (!parsed.record) continue;
        if (const auto* event = std::get_if<EventRecord>(&*parsed.record);
            event && (event->name == kCollectiveEvent || event->name == kEndEvent ||
                      event->name == kResumeEvent)) {
          auto fields = nlohmann::json::parse(event->json, nullptr, false);
          if (event->name == kEndEvent) {
            result.ends[rank] = read_end_event(fields);
          } else if (event->name == kResumeEvent) {
            if (event->step && *event->step > result.last_step[rank]) {
              result.last_step[rank] = *event->step;
              resumed_after[rank] = *event->step;
            }
          } else if (!fields.is_discarded() && fields.contains("seq") &&
                     fields["seq"].is_number()) {
            entered[rank] = std::max(entered[rank], fields["seq"].get<int64_t>());
          }
        }
        if (const auto* step = std::get_if<StepRecord>(&*parsed.record)) {
          if (result.first_step[rank] == 0)
            result.first_step[rank] = std::max<int64_t>(1, step->step);
          result.last_step[rank] = std::max(result.last_step[rank], step->step);
          if (step->collectives) result.collectives[rank] = *step->collectives;
          last_progress[rank] = Clock::now();
        }
        sink.on_record(static_cast<int>(rank), *parsed.record);
      }
      for (const auto& line :
           final_read ? gpu_tails[rank].read_rest() : gpu_tails[rank].read_new_lines()) {
        ParsedLine parsed = parse_metrics_line(line);
        if (parsed.status == ParseStatus::Malformed) {
          ++result.malformed_lines;
          sink.on_malformed(static_cast<int>(rank), line, parsed.error);
        } else if (parsed.record && std::holds_alternative<GpuRecord>(*parsed.record)) {
          sink.on_record(static_cast<int>(rank), *parsed.record);
        }
      }
    }
  };

  bool started = false;
  while (true) {
    drain(false);
    const auto now = Clock::now();
    result.ranks = trial.poll();
    // A queued job's wait is the scheduler's: the start-up allowance runs from its start.
    if (!started && !(started = trial.started())) {
      std::fill(last_progress.begin(), last_progress.end(), now);
      if (auto never = trial.never_starts()) throw InfraError(*never);
    }
    size_t running = 0;
    for (size_t rank = 0; rank < count; ++rank) {
      const auto& status = result.ranks[rank];
      if (status.kind == ExitKind::Running) {
        ++running;
        continue;
      }
      bool failed = status.kind == ExitKind::Signaled || status.exit_code != 0;
      if (failed && !status.killed_by_harness && !status.ended_by_scheduler && !result.crash) {
        result.crash = CrashReport{static_cast<int>(rank), status.exit_code, status.signal,
                                   result.last_step[rank] + 1, std::nullopt};
        first_death = now;
      }
    }
    if (running == 0) break;
    if (options.interrupted && options.interrupted->load()) {
      result.interrupted = true;
      break;
    }
    if (!stop_asked && sink.should_stop()) {
      result.stopped_by_sink = true;
      stop_asked = now;
      steps_when_asked = result.last_step;
    }
    if (stop_asked) {
      if (now - *stop_asked > options.halt_grace || !halting()) break;
      std::this_thread::sleep_for(options.poll_interval);
      continue;
    }
    if (first_death && now - *first_death > options.peer_exit_grace) break;
    if (options.total_timeout_s > 0 && seconds_between(start, now) > options.total_timeout_s) {
      result.timed_out = true;
      break;
    }
    double silent_s = 0;
    bool hung = false;
    for (size_t rank = 0; rank < count && !first_death; ++rank) {
      if (result.ranks[rank].kind != ExitKind::Running) continue;
      const double silent = seconds_between(last_progress[rank], now);
      const double allowed = result.last_step[rank] == resumed_after[rank] ? options.startup_s
                                                                           : options.step_timeout_s;
      if (silent > allowed) {
        hung = true;
        silent_s = std::max(silent_s, silent);
      }
    }
    if (hung) {
      result.hang = describe_hang(result.last_step, entered, silent_s);
      if (options.stack_signal) await_stacks(trial, ranks, options.stack_signal);
      break;
    }
    std::this_thread::sleep_for(options.poll_interval);
  }
  trial.kill_all(options.kill_grace);
  result.ranks = trial.poll();
  drain(true);
  blame_the_silent_rank(result, ranks);
  result.wall_s = seconds_between(start, Clock::now());
  return result;
}

}  // namespace faultline::harness
