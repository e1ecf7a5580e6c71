// Findings on screen and as JSON; `faultline findings` and `faultline repro`.
#include "cli/finding_report.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/error_output.hpp"
#include "cli/option_checks.hpp"
#include "cli/progress.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/isolate/repro.hpp"
#include "probes/detectors/failure_kind.hpp"

namespace faultline::cli {

using nlohmann::json;

json finding_document(const store::FindingInfo& finding) {
  const json fields = json::parse(finding.fields_json);
  const json repro = json::parse(finding.repro_json);
  json doc = {{"finding_id", finding.id}};
  for (const char* key :
       {"kind", "step", "rank", "host", "phase", "where", "samples", "shards", "config_culprit",
        "min_scale", "trials", "steps_executed", "rank_steps_executed"})
    doc[key] = fields.value(key, json());
  doc["skipped"] = fields.value("skipped", json::array());
  doc["ranks"] = fields.value("ranks", json::array());
  // The per-rank table of a rank finding (fingerprint verdicts and timings), when it has one.
  const json evidence = fields.value("evidence", json::object());
  if (evidence.contains("ranks")) doc["rank_evidence"] = evidence.at("ranks");
  doc["failing_run"] = evidence.value("failing_run", json());
  doc["repro"] = repro.value("argv", json());
  doc["repro_command"] = harness::pasted_repro_command(repro);
  doc["detail"] = fields.value("detail", json());
  doc["created_at"] = finding.created_at;
  return doc;
}

namespace {
std::string text_of(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// "blocks.0.mlp in forward", "in loss", or "-": the module and the phase of the step (a trainer
// that names the loss as its place says it once, not "loss in loss").
std::string where_text(const json& doc) {
  if (!doc["where"].is_null() && doc["where"] != doc["phase"])
    return text_of(doc["where"]) + " in " + text_of(doc["phase"]);
  if (!doc["phase"].is_null()) return "in " + text_of(doc["phase"]);
  return "-";
}

// A measured number as a person reads it (`spec`: fmt's), "-" when there is none.
std::string number_text(const json& value, const char* spec) {
  if (!value.is_number()) return text_of(value);
  return fmt::format(fmt::runtime(spec), value.get<double>());
}
}  // namespace

void print_finding(const store::FindingInfo& finding) {
  const json doc = finding_document(finding);
  fmt::print("finding F{}: {} at step {}", finding.id, finding.kind, text_of(doc["step"]));
  if (!doc["rank"].is_null()) fmt::print(" on rank {}", text_of(doc["rank"]));
  if (!doc["host"].is_null()) fmt::print(" (host {})", text_of(doc["host"]));
  fmt::print("\n");
  if (doc.contains("rank_evidence")) {
    for (const auto& row : doc["rank_evidence"])
      fmt::print("  rank {:>3}  {:<12} {:<7} distance {:<9} step {} ms, data {} ms, comm {} ms\n",
                 text_of(row["rank"]), text_of(row["host"]), text_of(row["verdict"]),
                 number_text(row["distance"], "{:.3g}"),
                 number_text(row.value("median_step_ms", json()), "{:.2f}"),
                 number_text(row.value("median_data_ms", json()), "{:.2f}"),
                 number_text(row.value("median_comm_ms", json()), "{:.2f}"));
  }
  if (!doc["where"].is_null() || !doc["phase"].is_null())
    fmt::print("  where:    {}\n", where_text(doc));
  fmt::print("  detail:   {}\n", text_of(doc["detail"]));
  if (const char* hint = detectors::hint(finding.kind); *hint) fmt::print("  hint:     {}\n", hint);
  if (!doc["samples"].is_null())
    fmt::print("  samples:  {} (shards {})\n", text_of(doc["samples"]), text_of(doc["shards"]));
  if (doc["config_culprit"].is_array()) {
    for (const auto& change : doc["config_culprit"])
      fmt::print("  config:   {} = {} (baseline {})\n", text_of(change["key"]),
                 text_of(change["failing"]), text_of(change["baseline"]));
  }
  if (doc["min_scale"].is_object()) {
    const json& scale = doc["min_scale"];
    fmt::print("  smallest: {} rank(s), steps {}..{}, {:g}% of the data\n", text_of(scale["ranks"]),
               scale.value("from_step", 0) + 1, text_of(scale["steps"]),
               100 * scale["data_fraction"].get<double>());
  }
  fmt::print("  cost:     {}, {} trainer steps ({} rank-steps)\n",
             counted(doc.value("trials", 0), "trial"), text_of(doc["steps_executed"]),
             text_of(doc["rank_steps_executed"]));
  if (!doc["failing_run"].is_null())
    fmt::print("  run:      from run {} (the run searched)\n", text_of(doc["failing_run"]));
  for (const auto& why : doc["skipped"]) fmt::print("  note:     {}\n", text_of(why));
  fmt::print("  repro:    faultline repro F{}   ({})\n", finding.id, text_of(doc["repro_command"]));
}

std::optional<int64_t> finding_reference(const std::string& text) {
  if (text.size() < 2 || (text[0] != 'F' && text[0] != 'f')) return std::nullopt;
  for (size_t i = 1; i < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
  return std::stoll(text.substr(1));
}

namespace {

store::FindingInfo load_finding(store::Store& store, const std::string& reference) {
  auto id = finding_reference(reference);
  // A bare number is a run everywhere else (show, report, export): never taken for a finding.
  if (!id && !reference.empty() &&
      std::all_of(reference.begin(), reference.end(), [](char c) { return std::isdigit(c); }))
    throw UserError("'" + reference + "' is a run id, not a finding", "FINDING",
                    "give F" + reference + " for finding " + reference +
                        " (see `faultline findings`); a run's failure is searched with "
                        "`faultline isolate --run " +
                        reference + "`");
  if (!id)
    throw UserError("'" + reference + "' is not a finding", "FINDING",
                    "give a finding id such as F3 (see `faultline findings`)");
  auto finding = store.get_finding(*id);
  if (!finding)
    throw UserError("no finding F" + std::to_string(*id), store.path(), "see `faultline findings`");
  return *finding;
}

struct ReproArgs {
  RunContextOptions& context = shared_context();
  std::string finding;
  std::optional<double> tolerance;
  bool step_timeout_given = false;  // --step-timeout was on the command line
};

ExitCode exit_for(harness::ReproVerdict verdict) {
  switch (verdict) {
    case harness::ReproVerdict::Identical:
    case harness::ReproVerdict::WithinTolerance:
      return ExitCode::Ok;
    case harness::ReproVerdict::Differs:
      return ExitCode::Failed;
    case harness::ReproVerdict::NotReproduced:
      return ExitCode::NotReproduced;
  }
  return ExitCode::Internal;
}

const char* to_string(harness::ReproVerdict verdict) {
  switch (verdict) {
    case harness::ReproVerdict::Identical:
      return "identical";
    case harness::ReproVerdict::WithinTolerance:
      return "within_tolerance";
    case harness::ReproVerdict::Differs:
      return "differs";
    case harness::ReproVerdict::NotReproduced:
      return "not_reproduced";
  }
  return "?";
}

int run_repro(const ReproArgs& args) {
  require_store(args.context.db);
  auto store = open_store(args.context);
  const auto finding = load_finding(store, args.finding);
  RunContextOptions context = args.context;
  const json fields = json::parse(finding.fields_json);
  // The repro runs where the failing run ran (a Slurm job's GPUs), with its launcher keys.
  const json failing_run = fields.value("evidence", json()).value("failing_run", json());
  if (failing_run.is_number_integer())
    take_trainer_of_run(store, failing_run.get<int64_t>(), context, "repro",
                        "F" + std::to_string(finding.id));
  bool took_runs_launcher = false;
  const auto launcher_setup =
      failing_run.is_number_integer()
          ? launcher_config_of_run(context, store, failing_run.get<int64_t>(), {},
                                   took_runs_launcher)
          : launcher_config(context, "", {});
  if (took_runs_launcher && !args.context.quiet)
    fmt::print(stderr,
               "faultline repro: run {} ran on Slurm: the repro does too (--launcher local runs "
               "it here)\n",
               failing_run.get<int64_t>());
  auto launcher = harness::make_launcher(launcher_setup);
  // A hang is timed from the replay the finding stands on unless --step-timeout says otherwise.
  if (!args.step_timeout_given && fields.value("evidence_run", json()).is_number_integer())
    if (auto timeout = step_timeout_of_run(store, fields["evidence_run"].get<int64_t>()))
      context.step_timeout_s = *timeout;
  auto options = runner_options(context);
  ProgressLine out(progress_style(args.context.quiet), "repro");
  TrialProgress progress(out, StepLines::EveryTenth);
  options.observer = &progress;
  harness::TrialRunner runner(store, *launcher, options);
  harness::TrialCache cache(store, runner, options.trainer, judge_identity(context));
  harness::ReproReport report;
  const auto error_format = args.context.json ? ErrorFormat::Json : ErrorFormat::Text;
  try {
    report = harness::reproduce_finding(store, cache, finding, {args.tolerance, options.work_dir});
    out.finish();
  } catch (const harness::Interrupted&) {
    out.finish();
    return report_stop(error_format, "repro", StopKind::Interrupted, "",
                       "the replay's run is stored as interrupted; nothing was judged");
  } catch (const harness::InfraError& error) {
    out.finish();
    return report_stop(error_format, "repro", StopKind::Infra, error.what());
  }
  if (args.context.json) {
    fmt::print("{}\n",
               json{{"finding_id", finding.id},
                    {"verdict", to_string(report.verdict)},
                    {"recipe_changed",
                     report.recipe_changed.empty() ? json() : json(report.recipe_changed)},
                    {"tolerance", report.tolerance},
                    {"reproduced", report.reproduced},
                    {"bitwise_identical", report.bitwise_identical},
                    {"records_compared", report.records_compared},
                    {"run_id", report.run_id},
                    {"evidence_run", report.evidence_run},
                    {"failure_step", report.failure_step >= 0 ? json(report.failure_step) : json()},
                    {"evidence_step", report.expected_step ? json(*report.expected_step) : json()},
                    {"differing_facts", report.differing_facts},
                    {"max_rel_loss_diff", report.max_rel_loss_diff},
                    {"within_tolerance", report.within_tolerance}}
                   .dump());
  } else {
    if (!report.recipe_changed.empty())
      fmt::print("  warning: {}; replayed the config the finding stored\n", report.recipe_changed);
    fmt::print("finding F{}: {} (run {} against evidence run {})\n", finding.id,
               report.reproduced ? "reproduced" : "NOT reproduced", report.run_id,
               report.evidence_run);
    fmt::print("  bitwise identical: {}{}\n", report.bitwise_identical ? "yes" : "no",
               report.bitwise_identical && report.records_compared == 0
                   ? " (neither run wrote a step record before the failure: nothing to compare)"
                   : "");
    if (report.reproduced && report.expected_step && report.failure_step >= 0 &&
        report.failure_step != *report.expected_step)
      fmt::print(
          "  shown at step {}, the evidence at step {}: a loss regression is judged from a share "
          "of the run's steps on, and the reproduction is the shorter run\n",
          report.failure_step, *report.expected_step);
    for (const auto& fact : report.differing_facts) fmt::print("  differs: {}\n", fact);
    if (!report.bitwise_identical)
      fmt::print("  largest relative loss difference {:.3g} ({} the tolerance {:g})\n",
                 report.max_rel_loss_diff, report.within_tolerance ? "within" : "beyond",
                 report.tolerance);
  }
  if (!report.recipe_changed.empty() && args.context.json)
    fmt::print(stderr, "faultline repro: warning: {}\n", report.recipe_changed);
  return static_cast<int>(exit_for(report.verdict));
}

}  // namespace

void add_finding_commands(CLI::App& app, int& exit_code) {
  RunContextOptions* list_args = &shared_context();
  auto limit = std::make_shared<int>(20);
  auto* findings = app.add_subcommand("findings", "stored findings, newest first");
  add_store_options(*findings);
  findings->add_option("-n,--limit", *limit, "how many (default 20)")->check(at_least(1));
  findings->callback([list_args, limit] {
    auto store = open_existing_store(list_args->db);
    json out = json::array();
    const auto findings = store.list_findings(*limit);
    constexpr const char* kRow = "{:<7} {:<16} {:>6} {:>4}  {:<32} {}\n";
    if (!list_args->json && !findings.empty())
      fmt::print(fmt::runtime(kRow), "FINDING", "KIND", "STEP", "RANK", "WHERE", "CREATED");
    for (const auto& finding : findings) {
      json doc = finding_document(finding);
      if (list_args->json) {
        out.push_back(doc);
        continue;
      }
      fmt::print(fmt::runtime(kRow), "F" + std::to_string(finding.id), finding.kind,
                 text_of(doc["step"]), text_of(doc["rank"]), where_text(doc), finding.created_at);
    }
    if (list_args->json)
      fmt::print("{}\n", json{{"findings", out}}.dump());
    else if (findings.empty())
      fmt::print("no stored findings\n");
  });

  auto repro_args = std::make_shared<ReproArgs>();
  auto* repro = app.add_subcommand("repro", "re-run a finding's minimal reproduction and compare");
  repro->add_option("FINDING", repro_args->finding, "finding id, e.g. F3")->required();
  repro
      ->add_option("--tolerance", repro_args->tolerance,
                   "relative loss difference accepted where a machine fact differs (default: "
                   "the finding's own)")
      ->check(not_negative());
  add_context_options(*repro);
  add_launcher_option(*repro);
  repro->callback([repro_args, repro, &exit_code] {
    repro_args->step_timeout_given = option_given(*repro, "--step-timeout");
    exit_code = run_repro(*repro_args);
  });
}

void show_finding(const std::string& db, const std::string& reference, bool as_json) {
  auto store = open_existing_store(db);
  const auto finding = load_finding(store, reference);
  if (as_json) {
    json doc = finding_document(finding);
    doc["evidence"] = json::parse(finding.fields_json).value("evidence", json());
    fmt::print("{}\n", doc.dump());
  } else {
    print_finding(finding);
  }
}

}  // namespace faultline::cli
