// Plans and applies gc. A run still running, an imported run (its directory is the user's) and a
// run whose directory cannot be told are never touched.
#include "harness/browse/gc.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "common/event_names.hpp"
#include "harness/browse/run_list.hpp"
#include "harness/trial/run_owner.hpp"
#include "harness/trial/trial_cache.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string normal(const fs::path& path) {
  std::error_code error;
  auto canonical = fs::weakly_canonical(path, error);
  return (error ? path.lexically_normal() : canonical).string();
}

bool inside(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

// The prefix of `text` up to a path component "run-<id>" or "run-<id>.<k>", or "".
std::string run_folder_in(const std::string& text, int64_t id) {
  const std::string name = "/run-" + std::to_string(id);
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    size_t end = at + name.size();
    if (end < text.size() && text[end] == '.')
      for (++end; end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]));) ++end;
    // The path starts after an option's "=" ("--dir=/w/run-3").
    const size_t equals = text.rfind('=', at);
    const size_t start = equals == std::string::npos ? 0 : equals + 1;
    if (end == text.size() || text[end] == '/') return text.substr(start, end - start);
  }
  return "";
}

uint64_t size_of(const fs::path& path) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) return fs::file_size(path, error);
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error))
    if (it->is_regular_file(error)) total += it->file_size(error);
  return total;
}

std::vector<std::string> checkpoints_of(const std::vector<EventRecord>& events,
                                        const std::string& dir) {
  std::set<std::string> paths;
  for (const auto& event : events) {
    if (event.name != kCheckpointEvent) continue;
    const auto fields = json::parse(event.json, nullptr, false);
    if (!fields.is_object() || !fields.contains("path") || !fields["path"].is_string()) continue;
    fs::path path = fields["path"].get<std::string>();
    if (path.is_relative() && !dir.empty()) path = fs::path(dir) / path;
    paths.insert(normal(path));
  }
  return {paths.begin(), paths.end()};
}

// What the stored findings need: the checkpoints their repros resume from (with the finding that
// needs each), and the runs they name as evidence.
struct Needs {
  std::map<std::string, int64_t> checkpoints;
  std::map<int64_t, int64_t> runs;  // run id -> finding id
};

Needs needs_of(const store::Store& store) {
  Needs needs;
  for (const auto& finding : store.list_findings(-1)) {
    const auto repro = json::parse(finding.repro_json, nullptr, false);
    if (repro.is_object() && repro.contains("spec")) {
      const std::string resume = repro["spec"].value("resume", "");
      if (!resume.empty()) needs.checkpoints.emplace(normal(resume), finding.id);
    }
    const auto fields = json::parse(finding.fields_json, nullptr, false);
    if (!fields.is_object()) continue;
    const json evidence = fields.value("evidence", json::object());
    for (const json& id :
         {fields.value("evidence_run", json()), evidence.value("failing_run", json()),
          evidence.value("run", json()), evidence.value("reference_run", json())})
      if (id.is_number_integer()) needs.runs.emplace(id.get<int64_t>(), finding.id);
  }
  return needs;
}

}  // namespace

uint64_t GcPlan::bytes() const {
  uint64_t total = 0;
  for (const auto& item : items) total += item.bytes;
  return total;
}

std::string run_directory(const store::RunInfo& run, const std::vector<EventRecord>& events) {
  if (!run.out_dir.empty()) return normal(run.out_dir);
  // Runs stored before the store kept the directory: guessed from the argv and checkpoints.
  const auto argv = json::parse(run.argv_json, nullptr, false);
  std::vector<std::string> words;
  if (argv.is_array())
    for (const auto& word : argv)
      if (word.is_string()) words.push_back(word.get<std::string>());
  for (size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == "--out") return normal(words[i + 1]);
  for (const auto& word : words)
    if (auto dir = run_folder_in(word, run.id); !dir.empty()) return normal(dir);
  for (const auto& path : checkpoints_of(events, ""))
    if (auto dir = run_folder_in(path, run.id); !dir.empty()) return normal(dir);
  return "";
}

GcPlan plan_gc(const store::Store& store, const GcOptions& options) {
  const Needs needs = needs_of(store);
  GcPlan plan;
  for (const auto& run : store.list_runs(-1)) {
    if (run.status == store::RunStatus::Running || origin_of(run.parent) == RunOrigin::Import)
      continue;
    if (options.older_than) {
      const auto ended = parse_utc(run.ended_at.empty() ? run.started_at : run.ended_at);
      if (!ended || *ended >= *options.older_than) continue;
    }
    const auto events = store.events(run.id, {kCheckpointEvent});
    const std::string dir = run_directory(run, events);
    std::error_code error;
    if (dir.empty() || !fs::is_directory(dir, error)) continue;
    if (const auto owner = held_by_another_run(dir, store.path(), run.id)) {
      // This run's folder went before (an earlier gc), and another store's run took its name.
      plan.kept.push_back(fmt::format("run {}: {}: now run {} of {}, left alone", run.id, dir,
                                      owner->run_id, owner->store));
      continue;
    }
    if (options.keep == KeepFindings::Everything && needs.runs.count(run.id)) {
      plan.kept.push_back(fmt::format("run {}: {}: all of it, the evidence of F{}", run.id, dir,
                                      needs.runs.at(run.id)));
      continue;
    }
    std::vector<std::string> needed;
    for (const auto& [path, finding] : needs.checkpoints)
      if (inside(path, dir)) {
        needed.push_back(path);
        plan.kept.push_back(
            fmt::format("run {}: {}: F{}'s repro resumes from it", run.id, path, finding));
      }
    if (needed.empty()) {
      plan.items.push_back({run.id, GcAction::RemoveDirectory, dir, size_of(dir), dir});
      continue;
    }
    for (const auto& checkpoint : checkpoints_of(events, dir))
      if (inside(checkpoint, dir) && !needs.checkpoints.count(checkpoint) &&
          fs::exists(checkpoint, error))
        plan.items.push_back(
            {run.id, GcAction::RemoveCheckpoint, checkpoint, size_of(checkpoint), dir});
  }
  return plan;
}

std::vector<std::string> apply_gc(const GcPlan& plan) {
  std::vector<std::string> problems;
  std::map<std::string, std::vector<std::string>> pruned;  // kept directory -> checkpoints removed
  for (const auto& item : plan.items) {
    std::error_code error;
    if (item.action == GcAction::RemoveDirectory)
      fs::remove_all(item.path, error);
    else
      fs::remove(item.path, error);
    if (error) {
      problems.push_back(item.path + ": " + error.message());
      continue;
    }
    if (item.action == GcAction::RemoveCheckpoint) pruned[item.run_dir].push_back(item.path);
  }
  for (const auto& [dir, paths] : pruned) {
    std::ofstream note(fs::path(dir) / kPrunedNote, std::ios::app);
    note << "faultline gc removed these checkpoints; no stored finding needed them, and the trial "
            "cache no longer reuses this run:\n";
    for (const auto& path : paths) note << "  " << path << '\n';
  }
  return problems;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  const char* units[] = {"kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 3) {
    value /= 1000;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace faultline::harness
