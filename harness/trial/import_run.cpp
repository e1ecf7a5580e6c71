// Reads every rank's metrics file in full, checks the files its events name, then stores the run
// in one transaction and judges it as a trial would be judged (a rank without an end event died).
#include "harness/trial/import_run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.hpp"
#include "harness/trial/import_recipe.hpp"
#include "harness/trial/ingest_sink.hpp"
#include "probes/detectors/run_judge.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct RankFile {
  std::string path;
  std::vector<MetricsRecord> records;
  std::vector<std::pair<std::string, std::string>> malformed;  // line, error
  std::optional<json> start;
  bool ended = false;
  int64_t last_step = 0;
};

std::string metrics_file(const fs::path& dir, int rank) {
  return (dir / fmt::format("metrics.rank{}.jsonl", rank)).string();
}

int count_ranks(const fs::path& dir) {
  int ranks = 0;
  while (fs::exists(metrics_file(dir, ranks))) ++ranks;
  return ranks;
}

// A checkpoint event's path, relative paths read from the run's directory.
std::string checkpoint_file(const fs::path& dir, const std::string& path) {
  return fs::path(path).is_absolute() ? path : (dir / path).string();
}

RankFile read_rank(const fs::path& dir, int rank) {
  RankFile file;
  file.path = metrics_file(dir, rank);
  std::ifstream in(file.path, std::ios::binary);
  if (!in)
    throw UserError("missing metrics file for rank " + std::to_string(rank), file.path,
                    "an imported run needs metrics.rank<r>.jsonl for every rank 0..N-1");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t begin = 0;
  int64_t line_number = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (line.empty()) continue;
    auto parsed = parse_metrics_line(line);
    if (parsed.status == ParseStatus::UnknownType) continue;
    if (parsed.status == ParseStatus::Malformed) {
      if (!complete)
        throw UserError(fmt::format("metrics file is truncated: its last line ({}) is cut off "
                                    "mid-record ({})",
                                    line_number, parsed.error),
                        file.path,
                        "copy the whole file once the run has ended, or cut the partial line");
      file.malformed.emplace_back(line, parsed.error);
      continue;
    }
    const MetricsRecord& record = *parsed.record;
    if (const auto* step = std::get_if<StepRecord>(&record))
      file.last_step = std::max(file.last_step, step->step);
    if (const auto* event = std::get_if<EventRecord>(&record)) {
      const json fields = json::parse(event->json, nullptr, false);
      if (event->name == "start" && !file.start) file.start = fields;
      if (event->name == "end") file.ended = true;
      if (event->name == "checkpoint" && fields.is_object() && fields.contains("path")) {
        const std::string path = checkpoint_file(dir, fields["path"].get<std::string>());
        if (!fs::is_regular_file(path))
          throw UserError(fmt::format("the checkpoint of step {} that line {} names is missing: {}",
                                      event->step.value_or(-1), line_number, path),
                          file.path,
                          "copy the run's checkpoints along with its metrics (their paths as the "
                          "events name them, or relative to the directory)");
        EventRecord resolved = *event;
        json with_path = fields;
        with_path["path"] = path;
        resolved.json = with_path.dump();
        file.records.push_back(resolved);
        continue;
      }
    }
    file.records.push_back(record);
  }
  if (!file.start)
    throw UserError("no start event in the metrics file", file.path,
                    "a run's metrics begin with a start event carrying its config "
                    "(docs/metrics-protocol.md)");
  return file;
}

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

// What ran the run, as its start event tells: e.g. "python train.py --steps 200".
std::string trainer_of(const json& start) {
  std::vector<std::string> words;
  if (start.contains("trainer") && start["trainer"].is_string())
    words.push_back(start["trainer"].get<std::string>());
  if (start.contains("command") && start["command"].is_array())
    for (const auto& part : start["command"])
      if (part.is_string()) words.push_back(part.get<std::string>());
  return words.empty() ? "a trainer that does not name itself"
                       : fmt::format("{}", fmt::join(words, " "));
}

// -c RECIPE: it must be a command trainer's recipe that describes the run, key by key.
void use_recipe(const contract::Recipe& recipe, const json& start, const fs::path& dir,
                int64_t last_step, store::RunInfo& info) {
  if (!recipe.command)
    throw UserError("the recipe has no [trainer] section", recipe.source,
                    "-c names the recipe of your own trainer (docs/external-trainers.md); a "
                    "faultline-train run carries its config in its start event: import it "
                    "without -c");
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
  if (recipe.steps < last_step)
    throw UserError(fmt::format("the recipe's run is {} steps long, but the run in {} has records "
                                "up to step {}",
                                recipe.steps, dir.string(), last_step),
                    recipe.source,
                    fmt::format("set its length: --set {}=<the run's steps>",
                                recipe.command->trainer.steps_key));
  info.config = recipe.canonical;
  info.config_hash = recipe.hash;
  info.config_path = recipe.source;
  info.steps = recipe.steps;
  info.data_fraction = recipe.data_fraction;
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

bool is_launchable_config(const store::RunInfo& run) {
  return run.launcher != "import" || (!run.config.empty() && run.config.front() != '{');
}

ImportResult import_run(store::Store& store, const ImportRequest& request) {
  const fs::path dir = fs::absolute(request.dir);
  if (!fs::is_directory(dir))
    throw UserError("not a directory", request.dir,
                    "give the directory that holds the run's metrics.rank<r>.jsonl files");
  const int ranks = request.ranks > 0 ? request.ranks : count_ranks(dir);
  if (ranks == 0)
    throw UserError("no metrics.rank0.jsonl in the directory", dir.string(),
                    "give the run's output directory (faultline-train --out)");
  std::vector<RankFile> files;
  for (int rank = 0; rank < ranks; ++rank) files.push_back(read_rank(dir, rank));

  const json& start = *files[0].start;
  ImportResult result;
  result.ranks = ranks;
  store::RunInfo info;
  info.config = start.value("config", json("")).is_string() ? start.value("config", "")
                                                            : start["config"].dump();
  info.config_hash = start.value("config_hash", "");
  info.config_path = start.value("config_source", "");
  info.ranks = ranks;
  info.launcher = "import";
  info.parent = "import:" + dir.string();
  info.argv_json = json(request.argv).dump();
  info.owner_pid = getpid();
  const auto config = bundled_config(start, info.config, files[0].path);
  for (const auto& file : files) result.last_step = std::max(result.last_step, file.last_step);
  info.steps = result.last_step;
  result.trainer = trainer_of(start);
  int64_t warmup_steps = 0;
  if (config && request.recipe)
    throw UserError("the run is faultline-train's and carries its own config", dir.string(),
                    "import it without -c (-c names the recipe of your own trainer's run)");
  if (config) {
    info.steps = config->train.stop_after > 0
                     ? std::min(config->train.stop_after, config->train.steps)
                     : config->train.steps;
    info.data_fraction = config->data.fraction;
    warmup_steps = config->schedule.warmup_steps;
  } else if (request.recipe) {
    use_recipe(*request.recipe, start, dir, result.last_step, info);
    warmup_steps = request.recipe->warmup_steps;
    result.config = ImportedConfig::Recipe;
  } else {
    result.config = ImportedConfig::Foreign;
  }
  detectors::RunJudge judge(request.thresholds, detectors::RunContext{ranks, warmup_steps});

  store.in_transaction([&] {
    result.run_id = store.create_run(info);
    IngestSink sink(store, result.run_id, judge, nullptr);
    for (int rank = 0; rank < ranks; ++rank) {
      for (const auto& record : files[rank].records) {
        sink.on_record(rank, record);
        if (const auto* event = std::get_if<EventRecord>(&record))
          result.checkpoints += event->name == "checkpoint";
      }
      for (const auto& [line, error] : files[rank].malformed) sink.on_malformed(rank, line, error);
    }
    sink.flush();
    for (int rank = 0; rank < ranks; ++rank)
      if (!files[rank].ended)
        result.failures.push_back(
            {detectors::FailureKind::Crash, files[rank].last_step + 1, rank,
             fmt::format("rank {} wrote no end event after step {}: it died (its exit status is "
                         "not part of an imported run)",
                         rank, files[rank].last_step)});
    for (auto& failure : judge.finish()) result.failures.push_back(failure);
    result.malformed = sink.malformed();
    result.verdict = detectors::any_failing(result.failures) ? Verdict::Fail : Verdict::Pass;
    info.status = store::RunStatus::Finished;
    info.verdict = to_string(result.verdict);
    for (const auto& failure : result.failures)
      info.failures.push_back(
          {to_string(failure.kind), failure.step, failure.rank, failure.detail});
    info.malformed = result.malformed;
    store.finish_run(result.run_id, info);
  });
  return result;
}

}  // namespace faultline::harness
