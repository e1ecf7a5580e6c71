// `faultline export RUN|F<id>` (a run's records, or a finding's evidence run's, as CSV or JSON
// Lines) and `faultline diff RUN RUN` (config keys and the first differing step record).
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/browse_commands.hpp"
#include "cli/finding_report.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "harness/browse/export.hpp"
#include "harness/browse/run_diff.hpp"
#include "harness/browse/run_list.hpp"
#include "harness/isolate/isolate.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

struct ExportArgs {
  RunContextOptions& context = shared_context();
  std::string id, format = "csv", what = "metrics", output;
};

template <typename Enum>
Enum parse_choice(const std::optional<Enum>& parsed, const std::string& given, const char* option,
                  const std::vector<std::string>& names) {
  if (!parsed)
    throw UserError(fmt::format("unknown {} value '{}'", option, given), option,
                    fmt::format("give one of: {}", fmt::join(names, ", ")));
  return *parsed;
}

// The runs a finding's search ran, oldest first: those its stored timeline names (what `faultline
// report` draws; reused trials included, another search running at the same time excluded).
// Searches that keep no timeline (commit bisection, and isolate before it kept one) get the runs
// started between the search's start and the finding.
std::vector<store::RunInfo> finding_runs(const store::Store& store,
                                         const store::FindingInfo& finding) {
  std::optional<store::SearchInfo> search;
  if (finding.search_id) search = store.get_search(*finding.search_id);
  std::vector<store::RunInfo> runs;
  if (search)
    for (const auto& entry : harness::stored_timeline(*search))
      if (auto run = store.get_run(entry.value("run", int64_t{0}))) runs.push_back(*run);
  if (!runs.empty()) return runs;
  const std::string from = search ? search->created_at : finding.created_at;
  for (const auto& run : store.list_runs(-1))
    if (run.started_at >= from && run.started_at <= finding.created_at) runs.push_back(run);
  std::reverse(runs.begin(), runs.end());  // oldest first
  return runs;
}

void write_export(const store::Store& store, const ExportArgs& args, std::ostream& out) {
  const auto format = parse_choice(harness::export_format_from_string(args.format), args.format,
                                   "--format", harness::export_format_names());
  const auto what = parse_choice(harness::export_what_from_string(args.what), args.what, "--what",
                                 harness::export_what_names());
  std::vector<store::RunInfo> runs;
  int64_t records_of = 0;  // the run whose records a finding's metrics and events are
  if (auto finding_id = finding_reference(args.id)) {
    const auto finding = store.get_finding(*finding_id);
    if (!finding)
      throw UserError("no finding " + args.id, store.path(), "see `faultline findings`");
    records_of = json::parse(finding->fields_json).value("evidence_run", int64_t{0});
    if (what == harness::ExportWhat::Trials) runs = finding_runs(store, *finding);
  } else {
    runs.push_back(load_run(store, args.id));
    records_of = runs.front().id;
  }
  switch (what) {
    case harness::ExportWhat::Metrics:
      harness::write_metrics(out, format, records_of, store.steps(records_of));
      return;
    case harness::ExportWhat::Events:
      harness::write_events(out, format, records_of, store.events(records_of),
                            store.anomalies(records_of));
      return;
    case harness::ExportWhat::Gpu:
      harness::write_gpu_header(out, format);
      store.each_gpu_record(records_of, -1, [&](const GpuRecord& interval) {
        harness::write_gpu_row(out, format, records_of, interval);
      });
      return;
    case harness::ExportWhat::Trials: {
      std::vector<harness::TrialRow> rows;
      for (const auto& run : runs) {
        const auto summary = store.summarize(run.id);
        rows.push_back({run, summary.ranks > 0 ? summary.steps / summary.ranks : 0,
                        store.trial_of_run(run.id)});
      }
      harness::write_trials(out, format, rows);
      return;
    }
  }
}

void run_export(const ExportArgs& args) {
  if (args.context.json)
    throw UserError("export writes its rows, not one JSON document", "--json",
                    "give --format jsonl for a JSON object per row");
  auto store = open_existing_store(args.context.db);
  if (args.output.empty()) {
    write_export(store, args, std::cout);
    return;
  }
  std::ofstream file(args.output);
  if (!file)
    throw UserError("cannot write " + args.output, "-o", "give a file in a folder that exists");
  write_export(store, args, file);
}

json span_json(const std::optional<harness::StepSpan>& span) {
  return span ? json{span->first, span->last} : json();
}

// "run 9 also has steps 1..100": what one run has beyond the steps compared.
std::string beyond(int64_t id, const harness::StepSpan& span, const harness::StepSpan& common) {
  std::vector<std::string> parts;
  for (const auto& part : harness::outside(span, common))
    parts.push_back(fmt::format("{}..{}", part.first, part.last));
  return parts.empty() ? ""
                       : fmt::format("; run {} also has steps {}", id, fmt::join(parts, " and "));
}

void run_diff(const RunContextOptions& context, const std::string& a_id, const std::string& b_id) {
  auto store = open_existing_store(context.db);
  const auto a = load_run(store, a_id), b = load_run(store, b_id);
  const auto changes = harness::config_changes(a.config, b.config);
  const auto records = harness::compare_records(store.steps(a.id), store.steps(b.id));
  const auto& difference = records.difference;
  if (context.json) {
    json keys = json::array();
    for (const auto& change : changes)
      keys.push_back({{"key", change.key},
                      {"a", change.a ? json(*change.a) : json()},
                      {"b", change.b ? json(*change.b) : json()}});
    json first = difference ? json{{"step", difference->step},
                                   {"rank", difference->rank},
                                   {"field", difference->field},
                                   {"a", difference->a},
                                   {"b", difference->b}}
                            : json();
    fmt::print("{}\n", json{{"a", a.id},
                            {"b", b.id},
                            {"config", keys},
                            {"a_steps", span_json(records.a)},
                            {"b_steps", span_json(records.b)},
                            {"compared_steps", span_json(records.common)},
                            {"compared_records", records.compared},
                            {"first_difference", first}}
                           .dump());
    return;
  }
  fmt::print("run {} -> run {}\n", a.id, b.id);
  if (changes.empty()) fmt::print("  config:   the same ({})\n", a.config_hash);
  for (const auto& change : changes)
    fmt::print("  config:   {}: {} -> {}\n", change.key, change.a.value_or("(absent)"),
               change.b.value_or("(absent)"));
  if (!records.common) {
    auto steps = [](const std::optional<harness::StepSpan>& span) {
      return span ? fmt::format("steps {}..{}", span->first, span->last) : std::string("none");
    };
    fmt::print("  records:  no step in common (run {}: {}; run {}: {})\n", a.id, steps(records.a),
               b.id, steps(records.b));
    return;
  }
  const auto& common = *records.common;
  const std::string rest = beyond(a.id, *records.a, common) + beyond(b.id, *records.b, common);
  if (!difference) {
    fmt::print("  records:  steps {}..{}: every step record the same ({} compared){}\n",
               common.first, common.last, records.compared, rest);
    return;
  }
  fmt::print("  records:  steps {}..{}: first differ at step {} rank {}: {} {} -> {}{}\n",
             common.first, common.last, difference->step, difference->rank, difference->field,
             difference->a, difference->b, rest);
}

}  // namespace

void add_export_commands(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* command = app.add_subcommand(
      "export",
      "a run's (or a finding's) stored records as CSV or JSON Lines, one row per step "
      "and rank");
  command->add_option("ID", args->id, "run id, or finding id such as F3")->required();
  command->add_option("--format", args->format, "csv (default) or jsonl");
  command->add_option(
      "--what", args->what,
      "metrics (default: step records), trials (a finding's search), events, or gpu "
      "(the CUPTI probe's intervals)");
  command->add_option("-o,--output", args->output, "write to this file (default: stdout)");
  add_store_options(*command);
  command->callback([args] { run_export(*args); });

  RunContextOptions* diff_args = &shared_context();
  auto ids = std::make_shared<std::vector<std::string>>();
  auto* diff = app.add_subcommand(
      "diff", "two stored runs: their config keys, and the first step record that differs");
  diff->add_option("RUNS", *ids, "two run ids")->required()->expected(2);
  add_store_options(*diff);
  diff->callback([diff_args, ids] { run_diff(*diff_args, ids->at(0), ids->at(1)); });
}

}  // namespace faultline::cli
