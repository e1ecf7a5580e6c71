// Takes the run's config from rank 0's start event or the recipe given with -c, then reads and
// stores each rank's file in turn (import_files.cpp) in one transaction and judges the run as a
// trial would be judged (how_it_ended: a rank without an end event, or whose log stops short,
// died or was stopped; ranks stopped while others wait in a collective hung).
#include "harness/trial/import_run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "common/error.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/hang_report.hpp"
#include "harness/trial/import_files.hpp"
#include "harness/trial/import_recipe.hpp"
#include "harness/trial/ingest_sink.hpp"
#include "probes/detectors/run_judge.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kImportLauncher = "import";  // an imported run's launcher, as stored

// The run's config as the bundled trainer reads it: steps and warm-up, when it is one of ours.
// faultline-train's start event carries its config as TOML text; another trainer's is a JSON
// object (stored as its text) or absent.
std::optional<trainer::TrainConfig> bundled_config(const json& start, const std::string& text,
                                                   const std::string& source) {
  if (!start.contains("config") || !start["config"].is_string() || text.empty())
    return std::nullopt;
  try {
    return trainer::parse_train_config(text, source, {});
  } catch (const UserError&) {
    return std::nullopt;  // another trainer's config: judged without its warm-up
  }
}

// What ran the run, as its start event tells: e.g. "python train.py --steps 200"; faultline-train
// names itself by the trajectory hash only it writes.
std::string trainer_of(const json& start) {
  if (start.contains("trajectory_hash") && !start.contains("command")) return "faultline-train";
  std::vector<std::string> words;
  if (start.contains("trainer") && start["trainer"].is_string())
    words.push_back(start["trainer"].get<std::string>());
  if (start.contains("command") && start["command"].is_array())
    for (const auto& part : start["command"])
      if (part.is_string()) words.push_back(part.get<std::string>());
  return words.empty() ? "a trainer that does not name itself"
                       : fmt::format("{}", fmt::join(words, " "));
}

[[noreturn]] void throw_longer_than_recipe(const contract::Recipe& recipe, const fs::path& dir,
                                           int64_t last_step) {
  throw UserError(
      fmt::format("the recipe's run is {} steps long, but the run in {} has records "
                  "up to step {}",
                  recipe.steps, dir.string(), last_step),
      recipe.source,
      fmt::format("set its length: --set {}=<the run's steps>", recipe.command->trainer.steps_key));
}

// -c RECIPE: it must be a command trainer's recipe that describes the run, key by key.
void use_recipe(const contract::Recipe& recipe, const json& start, const fs::path& dir,
                int64_t last_step, store::RunInfo& info) {
  const auto mismatches = recipe_mismatches(*recipe.command, start);
  if (!mismatches.empty()) {
    std::vector<std::string> lines;
    for (const auto& m : mismatches)
      lines.push_back(fmt::format("{} = {} is passed as {}, but the run had {} ({})", m.key,
                                  m.recipe_value.empty() ? "\"\"" : m.recipe_value, m.flag,
                                  m.run_value.empty() ? "\"\"" : m.run_value, m.seen_in));
    throw UserError(fmt::format("the recipe does not describe the run in {}: {}", dir.string(),
                                fmt::join(lines, "; ")),
                    recipe.source,
                    "add " + mismatch_overrides(mismatches) +
                        " (or change the recipe) so that a replay runs what the run ran");
  }
  if (recipe.steps < last_step) throw_longer_than_recipe(recipe, dir, last_step);
  info.config = recipe.canonical;
  info.config_hash = recipe.hash;
  info.config_path = recipe.source;
  info.steps = recipe.steps;
  info.data_fraction = recipe.data_fraction;
}

// "; the stacks of rank 1 (from .../stacks.rank1.txt): ..." when the rank wrote any.
std::string stacks_of(const RankFile& file, int rank) {
  return file.stacks.empty() ? ""
                             : fmt::format("; the stacks of rank {} (from {}):{}", rank,
                                           file.stacks_path, file.stacks);
}

// A rank SIGTERM stopped long after its last step record had stopped making progress: the time
// limit (or cancel) only ended a hang. Long is more than 20 times its longest wait between two
// step records (which holds its checkpoint saves and evaluations), and at least 10 s: the rule a
// replay's hang timeout follows. The detail; "" when it was still making progress.
std::string stalled_before_sigterm(const RankFile& file, int rank) {
  const double gap = file.end_t - file.last_step_t;
  const double limit = std::max(10.0, 20 * file.slowest_gap_s);
  if (file.last_step_t <= 0 || gap <= limit) return "";
  return fmt::format(
      "rank {} wrote no step record for {:.0f} s after step {} before SIGTERM stopped it (its "
      "end event says so), more than 20 times its longest wait between two steps ({:.2g} s): it "
      "had stopped making progress, and its time limit or a cancel ended it",
      rank, gap, file.last_step, file.slowest_gap_s);
}

// "; its last line (213) is cut off mid-record: ..." when it is.
std::string cut_off(const RankFile& file) {
  return file.cut_off_line == 0
             ? ""
             : fmt::format(
                   "; its last line ({}) is cut off mid-record: it was stopped while it "
                   "wrote it (or the file was copied while the run still wrote it)",
                   file.cut_off_line);
}

// An imported run has no exit statuses: how it ended is read from its records. A log that stops
// before the run's length stopped there. Ranks without an end event died or were stopped from
// outside; when none ended and some wait in a collective the others never entered, the job was
// stopped while they waited (its time limit, a cancel): a hang, named as a live trial names it.
// A rank whose end event says an exception ended it (the helper's status "error") crashed; one
// whose end event says SIGTERM stopped it (status "terminated") did not: it goes in `terminated`.
std::vector<detectors::Failure> how_it_ended(const std::vector<RankFile>& files, bool log,
                                             int64_t steps, std::vector<int>& terminated) {
  std::vector<detectors::Failure> failures;
  if (log) {
    for (size_t rank = 0; rank < files.size(); ++rank)
      if (files[rank].last_step < steps)
        failures.push_back(
            {detectors::FailureKind::Crash, files[rank].last_step + 1, static_cast<int>(rank),
             fmt::format("rank {}'s log ends at step {} of {}: it stopped there (its exit status "
                         "is not part of an imported log)",
                         rank, files[rank].last_step, steps) +
                 stacks_of(files[rank], static_cast<int>(rank))});
    return failures;
  }
  std::vector<int64_t> last_step, entered;
  bool none_ended = true, all_terminated = true, any_stalled = false;
  std::vector<bool> stopped;       // by SIGTERM (its end event says so)
  std::vector<std::string> stall;  // of a stopped rank: it had stopped before ("" when not)
  for (size_t rank = 0; rank < files.size(); ++rank) {
    const RankFile& file = files[rank];
    last_step.push_back(file.last_step);
    entered.push_back(file.collective_entered);
    stopped.push_back(file.ended && file.end.status == EndStatus::Terminated);
    stall.push_back(stopped.back() ? stalled_before_sigterm(file, static_cast<int>(rank)) : "");
    // Terminated from outside is not ended by itself: a hang it stopped is still a hang.
    none_ended = none_ended && (!file.ended || stopped.back());
    all_terminated = all_terminated && stopped.back();
    any_stalled = any_stalled || !stall.back().empty();
  }
  // Every rank stopped by SIGTERM while it trained (its time limit, a cancel): some ranks may be
  // in a collective the others had not reached yet, which is no hang.
  if (all_terminated && !any_stalled) {
    terminated.resize(files.size());
    std::iota(terminated.begin(), terminated.end(), 0);
    return failures;
  }
  const HangReport stop = describe_hang(last_step, entered, 0);
  if (none_ended && stop.collective > 0) {
    std::string detail = collective_wait(stop) +
                         "; no rank ended by itself: the job was stopped from outside (its "
                         "time limit, a cancel) while they waited";
    for (int rank : stop.ranks) detail += stacks_of(files[static_cast<size_t>(rank)], rank);
    failures.push_back({detectors::FailureKind::Hang, stop.step,
                        stop.ranks.size() == 1 ? stop.ranks[0] : -1, detail});
    return failures;
  }
  // The ranks that stopped short of the collective others waited in come first: a rank that
  // waited there only saw them go (a dead peer is a connection error in its allreduce, or a wait
  // until the job is killed), and says so.
  std::vector<int> order = stop.ranks;  // every rank: those that stopped short, then the others
  if (stop.collective > 0) {
    order.insert(order.end(), stop.waiting.begin(), stop.waiting.end());
  } else {
    order.resize(files.size());
    std::iota(order.begin(), order.end(), 0);
  }
  for (int rank : order) {
    const RankFile& file = files[static_cast<size_t>(rank)];
    const bool waited =
        std::find(stop.waiting.begin(), stop.waiting.end(), rank) != stop.waiting.end();
    const std::string victim =
        waited ? fmt::format(
                     "; it waited in collective #{} (step {}), which rank(s) {} never "
                     "entered",
                     stop.collective, stop.step, fmt::join(stop.ranks, ","))
               : std::string();
    if (stopped[static_cast<size_t>(rank)]) {
      if (const std::string& stalled = stall[static_cast<size_t>(rank)]; !stalled.empty())
        failures.push_back({detectors::FailureKind::Hang, file.last_step + 1, rank,
                            stalled + victim + stacks_of(file, rank)});
      else
        terminated.push_back(rank);  // stopped by its scheduler while it trained: not a crash
    } else if (!file.ended)
      failures.push_back(
          {detectors::FailureKind::Crash, file.last_step + 1, rank,
           fmt::format("rank {} wrote no end event after step {}: it died or was stopped from "
                       "outside (its exit status is not part of an imported run)",
                       rank, file.last_step) +
               cut_off(file) + victim + stacks_of(file, rank)});
    else if (file.end.status == EndStatus::Error)
      failures.push_back({detectors::FailureKind::Crash, file.last_step + 1, rank,
                          fmt::format("rank {} ended in step {} with an error: {} (its end event)",
                                      rank, file.last_step + 1,
                                      file.end.error.empty() ? "no error given" : file.end.error) +
                              victim});
  }
  return failures;
}

}  // namespace

const char* to_string(ImportedConfig config) {
  switch (config) {
    case ImportedConfig::Bundled:
      return "bundled";
    case ImportedConfig::Recipe:
      return "recipe";
    case ImportedConfig::Foreign:
      return "foreign";
  }
  return "foreign";
}

bool is_imported(const store::RunInfo& run) {
  return run.launcher == kImportLauncher;
}

bool is_launchable_config(const store::RunInfo& run) {
  return !is_imported(run) || (!run.config.empty() && run.config.front() != '{');
}

ImportResult import_run(store::Store& store, const ImportRequest& request) {
  return import_run([&]() -> store::Store& { return store; }, request);
}

ImportResult import_run(const StoreOpener& open_store, const ImportRequest& request) {
  const fs::path given = fs::absolute(request.dir);
  if (request.recipe && !request.recipe->command)
    throw UserError("the recipe has no [trainer] section", request.recipe->source,
                    "-c names the recipe of your own trainer (docs/external-trainers.md); a "
                    "faultline-train run carries its config in its start event: import it "
                    "without -c");
  // A log-only trainer's recipe says how its lines read; every other run has metrics files. A
  // relative checkpoint path is left as it is here and read from the log's folder, as a metrics
  // file's is (read_rank_file).
  std::optional<LogRecords> log;
  if (request.recipe && request.recipe->command->trainer.records == contract::RecordSource::Log) {
    const auto& trainer = request.recipe->command->trainer;
    log = LogRecords::compile(trainer.log_regex, trainer.checkpoint_regex,
                              " in " + request.recipe->source, "");
  }
  const RunFiles run_files = find_run_files(request.dir, request.ranks, log ? &*log : nullptr);
  const int ranks = static_cast<int>(run_files.paths.size());
  // Rank 0's file says what the run was: read once for that (its records dropped as they are
  // read), then every rank's file is read again as it is stored, record by record, so a big job
  // is never held in memory (a rank's file that restarted is held until its end).
  const RankFile rank0 = read_rank_file(run_files, 0, [](const MetricsRecord&) {});

  const json start = rank0.start.value_or(json::object());
  ImportResult result;
  result.ranks = ranks;
  store::RunInfo info;
  info.config = start.value("config", json("")).is_string() ? start.value("config", "")
                                                            : start["config"].dump();
  info.config_hash = start.value("config_hash", "");
  info.config_path = start.value("config_source", "");
  info.ranks = ranks;
  info.launcher = kImportLauncher;
  info.parent = "import:" + given.string();
  info.argv_json = json(request.argv).dump();
  info.owner_pid = getpid();
  const auto config = bundled_config(start, info.config, rank0.path);
  result.last_step = rank0.last_step;
  info.steps = result.last_step;  // a run without a config: its records' last step (once known)
  result.trainer = trainer_of(start);
  int64_t warmup_steps = 0;
  if (config && request.recipe)
    throw UserError("the run is faultline-train's and carries its own config", given.string(),
                    "import it without -c (-c names the recipe of your own trainer's run)");
  if (config) {
    info.steps = config->train.stop_after > 0
                     ? std::min(config->train.stop_after, config->train.steps)
                     : config->train.steps;
    info.data_fraction = config->data.fraction;
    warmup_steps = config->schedule.warmup_steps;
  } else if (request.recipe) {
    use_recipe(*request.recipe, start, given, result.last_step, info);
    warmup_steps = request.recipe->warmup_steps;
    result.config = ImportedConfig::Recipe;
  } else {
    result.config = ImportedConfig::Foreign;
  }
  detectors::RunJudge judge(request.thresholds, detectors::RunContext{ranks, warmup_steps});

  // Nothing of it is stored if a later rank's file is refused: the transaction rolls back.
  store::Store& store = open_store();
  store.in_transaction([&] {
    result.earlier_imports = store.run_ids_with_parent(info.parent);
    result.run_id = store.create_run(info);
    IngestSink sink(store, result.run_id, judge, nullptr);
    std::vector<RankFile> files;  // each file's summary: how the run ended needs no more
    for (int rank = 0; rank < ranks; ++rank) {
      files.push_back(read_rank_file(
          run_files, rank, [&](const MetricsRecord& record) { sink.on_record(rank, record); }));
      RankFile& file = files.back();
      if (result.config == ImportedConfig::Recipe && request.recipe->steps < file.last_step)
        throw_longer_than_recipe(*request.recipe, given, file.last_step);
      result.last_step = std::max(result.last_step, file.last_step);
      result.restarts.insert(result.restarts.end(), file.restarts.begin(), file.restarts.end());
      for (const auto& [line, error] : file.malformed) sink.on_malformed(rank, line, error);
      file.malformed = std::vector<std::pair<std::string, std::string>>();
    }
    sink.flush();
    const auto named = contract::named_checkpoints(store, result.run_id);
    result.saved_over = contract::saved_over(named);
    result.checkpoints = static_cast<int64_t>(contract::replayable(named).size());
    if (result.config == ImportedConfig::Foreign && result.last_step != info.steps) {
      info.steps = result.last_step;
      store.set_run_steps(result.run_id, info.steps);
    }
    for (auto& failure : how_it_ended(files, log.has_value(), info.steps, result.terminated))
      result.failures.push_back(failure);
    for (auto& failure : judge.finish()) result.failures.push_back(failure);
    if (auto regression =
            regression_against(store, result.run_id, request.reference, request.thresholds))
      result.failures.push_back(*regression);
    detectors::order_for_report(result.failures);
    result.malformed = sink.malformed();
    result.verdict = detectors::any_failing(result.failures) ? Verdict::Fail : Verdict::Pass;
    info.status = store::RunStatus::Finished;
    info.verdict = to_string(result.verdict);
    for (const auto& failure : result.failures) info.failures.push_back(stored_failure(failure));
    info.malformed = result.malformed;
    store.finish_run(result.run_id, info);
  });
  return result;
}

}  // namespace faultline::harness
