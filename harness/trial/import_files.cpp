// Reads an imported run's per-rank files line by line: protocol lines as they are, a log's lines
// through the recipe's regexes (the rest of a log is the trainer's business).
#include "harness/trial/import_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "common/error.hpp"
#include "common/event_names.hpp"
#include "harness/launch/hang_report.hpp"
#include "harness/launch/supervisor.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string rank_file(const fs::path& dir, int rank, const LogRecords* log) {
  return (dir / (log ? fmt::format("rank{}.log", rank) : fmt::format("metrics.rank{}.jsonl", rank)))
      .string();
}

// The step a record is about; nullopt for an event without one (start, resume, end).
std::optional<int64_t> step_of(const MetricsRecord& record) {
  return std::visit(
      [](const auto& r) -> std::optional<int64_t> {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, EventRecord>)
          return r.step;
        else if constexpr (std::is_same_v<R, GpuRecord>)
          return std::nullopt;
        else
          return r.step;
      },
      record);
}

// A restarted part's first step record supersedes what the parts before it recorded from that
// step on (their records up to `part_begin`): the last run of each step is the one kept.
int64_t drop_superseded(std::vector<MetricsRecord>& records, size_t& part_begin, int64_t first) {
  int64_t rerun = 0;
  std::vector<MetricsRecord> kept;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto step = step_of(records[i]);
    if (i < part_begin && step && *step >= first) {
      rerun += std::holds_alternative<StepRecord>(records[i]);
      continue;
    }
    kept.push_back(std::move(records[i]));
  }
  part_begin -= records.size() - kept.size();
  records = std::move(kept);
  return rerun;
}

// A checkpoint event's path, relative paths read from the run's directory.
// Where a checkpoint a line names is now: as named (absolute), relative to the run's folder, or
// by its last parts under that folder: a trainer names it from its own working directory
// (`faultline-train --out out/run1` writes out/run1/checkpoints/...), and a folder copied or
// moved elsewhere keeps its checkpoints below it. The first that exists; else the path
// relative to the folder, for the error.
std::string checkpoint_file(const fs::path& dir, const std::string& path) {
  const fs::path named(path);
  if (named.is_absolute() && fs::exists(named)) return path;
  const fs::path in_dir = named.is_absolute() ? named : dir / named;
  if (fs::exists(in_dir)) return in_dir.string();
  const fs::path relative = named.relative_path();
  const std::vector<fs::path> parts(relative.begin(), relative.end());
  for (size_t drop = 1; drop < parts.size(); ++drop) {
    fs::path suffix;
    for (size_t i = drop; i < parts.size(); ++i) suffix /= parts[i];
    if (fs::exists(dir / suffix)) return (dir / suffix).string();
  }
  return in_dir.string();
}

// Whether a rank's file may hold a restart, whose records supersede earlier ones: a log (a step
// going back, seen only by reading it), or a metrics file with more than one line that may be a
// start event. Over-inclusive is safe: such a file is only held in memory.
bool may_restart(const std::string& path, bool log) {
  if (log) return true;
  std::ifstream in(path, std::ios::binary);
  int starts = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"start\"") != std::string::npos && ++starts > 1) return true;
  return false;
}

// The CUPTI probe's file beside a rank's metrics (a run with --cupti, or a job that loaded the
// probe itself): its gpu records, which no restart supersedes (they name no step; the join with
// the steps goes by time). None: a run without the probe.
template <typename Keep>
void read_gpu_records(const std::string& path, RankFile& file, Keep& kept) {
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto parsed = parse_metrics_line(line);
    if (parsed.status == ParseStatus::Malformed)
      file.malformed.emplace_back(line, parsed.error + " (" + path + ")");
    else if (parsed.record && std::holds_alternative<GpuRecord>(*parsed.record))
      kept(std::move(*parsed.record));
  }
}

[[noreturn]] void throw_missing_file(const RunFiles& files, int rank) {
  throw UserError(fmt::format("missing {} for rank {}", files.log ? "log" : "metrics file", rank),
                  files.paths.at(static_cast<size_t>(rank)),
                  files.log ? "an imported log-only run needs rank<r>.log for every rank 0..N-1"
                            : "an imported run needs metrics.rank<r>.jsonl for every rank 0..N-1");
}

}  // namespace

std::string stacks_file(const fs::path& dir, int rank) {
  return (dir / fmt::format("stacks.rank{}.txt", rank)).string();
}

RunFiles find_run_files(const std::string& given, int ranks, const LogRecords* log) {
  RunFiles files;
  files.log = log;
  const fs::path path = fs::absolute(given);
  if (log && fs::is_regular_file(path)) {
    if (ranks > 1)
      throw UserError(fmt::format("one log file holds one rank, not {}", ranks), given,
                      "give a folder of rank<r>.log files for a run of several ranks");
    files.dir = path.parent_path();
    files.paths = {path.string()};
    return files;
  }
  if (!log && fs::is_regular_file(path))
    throw UserError("a file, not a run's directory", given,
                    "a run's metrics are a folder of metrics.rank<r>.jsonl files; a log-only "
                    "trainer's log is imported with its recipe: faultline import LOG -c RECIPE "
                    "(a recipe with trainer.records = \"log\")");
  if (!fs::is_directory(path))
    throw UserError(
        "not a directory", given,
        log ? "give the job's log file, or a folder that holds rank<r>.log for each rank"
            : "give the directory that holds the run's metrics.rank<r>.jsonl files");
  files.dir = path;
  int count = ranks;
  if (count <= 0)
    for (count = 0; fs::exists(rank_file(path, count, log));) ++count;
  if (count == 0)
    throw UserError(fmt::format("no {} in the directory",
                                fs::path(rank_file(path, 0, log)).filename().string()),
                    path.string(),
                    log ? "give the job's log file, or a folder of rank<r>.log files"
                        : "give the run's output directory (faultline-train's --out, or "
                          "the folder a script's FAULTLINE_METRICS wrote into)");
  for (int rank = 0; rank < count; ++rank) files.paths.push_back(rank_file(path, rank, log));
  // Before any file is read: a missing rank is known at once, not after the others' records.
  for (int rank = 0; rank < count; ++rank)
    if (!fs::is_regular_file(files.paths[static_cast<size_t>(rank)]))
      throw_missing_file(files, rank);
  return files;
}

RankFile read_rank_file(const RunFiles& files, int rank, const KeepRecord& keep) {
  RankFile file;
  file.path = files.paths.at(static_cast<size_t>(rank));
  const char* what = files.log ? "log" : "metrics file";
  // Line by line: a big job's file is never held whole. Its records are passed on as they are
  // read when no restart can supersede them; else held until the file's end.
  const bool stream = keep && !may_restart(file.path, files.log != nullptr);
  auto kept = [&](MetricsRecord record) {
    if (!stream) return file.records.push_back(std::move(record));
    if (const auto* step = std::get_if<StepRecord>(&record))
      file.last_step = std::max(file.last_step, step->step);
    keep(record);
  };
  std::ifstream in(file.path, std::ios::binary);
  if (!in) throw_missing_file(files, rank);
  int64_t line_number = 0;
  size_t part_begin = 0;   // where the records of the part after the last restart begin
  bool restarted = false;  // a restart whose first step record is still to come
  int64_t part_last = 0;   // the current part's last step
  std::string line;
  while (std::getline(in, line)) {
    const bool complete = !in.eof();  // the file's last line without its newline: cut off?
    ++line_number;
    if (files.log) {
      auto translated = files.log->translate(line, rank, 0);
      if (!translated) continue;
      line = std::move(*translated);
    }
    if (line.empty()) continue;
    auto parsed = parse_metrics_line(line);
    if (parsed.status == ParseStatus::UnknownType) continue;
    if (parsed.status == ParseStatus::Malformed) {
      // A process killed while it wrote its last record (or a file copied while its run still
      // wrote it) leaves it cut off: that rank stopped there, which how the run ended says.
      if (!complete && !files.log) file.cut_off_line = line_number;
      file.malformed.emplace_back(line, parsed.error);
      continue;
    }
    const MetricsRecord& record = *parsed.record;
    if (const auto* step = std::get_if<StepRecord>(&record)) {
      // A log has no start events: a job restarted into the same log (requeued with
      // --open-mode=append) shows as a step before the one the log last reached.
      if (files.log && step->step < part_last) {
        file.restarts.push_back({rank, part_last, false, step->step - 1, 0});
        part_last = 0;
        part_begin = file.records.size();
        restarted = true;
      }
      if (restarted) {
        file.restarts.back().rerun = drop_superseded(file.records, part_begin, step->step);
        restarted = false;
      }
      part_last = std::max(part_last, step->step);
      if (file.last_step_t > 0)
        file.slowest_gap_s = std::max(file.slowest_gap_s, step->t - file.last_step_t);
      file.last_step_t = step->t;
    }
    if (const auto* event = std::get_if<EventRecord>(&record)) {
      const json fields = json::parse(event->json, nullptr, false);
      if (event->name == kStartEvent) {
        if (file.start) {
          file.restarts.push_back({rank, part_last, file.ended, 0, 0,
                                   file.ended && file.end.status == EndStatus::Terminated});
          part_last = 0;
          file.ended = false;
          file.collective_entered = 0;                // a new process counts its collectives from 1
          file.last_step_t = file.slowest_gap_s = 0;  // a requeue's wait is no step's
          part_begin = file.records.size();
          restarted = true;
        }
        file.start = fields;
      }
      if (event->name == kResumeEvent && restarted && event->step)
        file.restarts.back().resumed_from = *event->step;
      if (event->name == kEndEvent && fields.is_object()) {
        file.ended = true;
        file.end_t = event->t;
        file.end = read_end_event(fields);
      }
      if (event->name == kCollectiveEvent && fields.is_object() && fields.contains("seq") &&
          fields["seq"].is_number_integer())
        file.collective_entered = std::max(file.collective_entered, fields["seq"].get<int64_t>());
      if (event->name == kCheckpointEvent && fields.is_object() && fields.contains("path")) {
        const std::string path = checkpoint_file(files.dir, fields["path"].get<std::string>());
        if (!fs::exists(path))  // a file, or a folder (a sharded checkpoint-500/)
          throw UserError(fmt::format("the checkpoint of step {} that line {} names is missing: {}",
                                      event->step.value_or(-1), line_number, path),
                          file.path,
                          fmt::format("copy the run's checkpoints along with its {} (at the "
                                      "paths its lines name, or below its folder as they were "
                                      "below the trainer's --out)",
                                      what));
        EventRecord resolved = *event;
        json with_path = fields;
        with_path["path"] = path;
        resolved.json = with_path.dump();
        kept(std::move(resolved));
        continue;
      }
    }
    kept(std::move(*parsed.record));
  }
  if (!files.log) read_gpu_records(gpu_records_path(file.path), file, kept);
  // Of the records kept: a part a restart superseded may have gone further than the last one.
  for (const auto& record : file.records)
    if (const auto* step = std::get_if<StepRecord>(&record))
      file.last_step = std::max(file.last_step, step->step);
  if (keep && !stream) {
    for (const auto& record : file.records) keep(record);
    file.records = std::vector<MetricsRecord>();  // (assigning {} would keep the capacity)
  }
  file.stacks_path = stacks_file(files.dir, rank);
  file.stacks = stacks_in_log(file.stacks_path);
  if (!file.start && !files.log)
    throw UserError("no start event in the metrics file", file.path,
                    "a run's metrics begin with a start event carrying its config "
                    "(docs/metrics-protocol.md)");
  return file;
}

}  // namespace faultline::harness
