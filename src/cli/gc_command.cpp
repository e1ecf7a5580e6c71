// `faultline gc`: lists the run directories and checkpoints no stored finding needs, then
// removes them (or, with --dry-run, only lists them and what they weigh).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/browse_commands.hpp"
#include "cli/run_context.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "harness/browse/gc.hpp"

namespace faultline::cli {

namespace {

using nlohmann::json;

enum class GcRun { Remove, DryRun };

struct GcArgs {
  RunContextOptions& context = shared_context();
  bool keep_findings = false, dry_run = false;
  std::string older_than;
};

const char* what_of(harness::GcAction action) {
  return action == harness::GcAction::RemoveDirectory ? "directory" : "checkpoint";
}

void run_gc(const GcArgs& args) {
  harness::GcOptions options;
  options.keep =
      args.keep_findings ? harness::KeepFindings::Everything : harness::KeepFindings::Repro;
  if (!args.older_than.empty()) {
    options.older_than = point_in_time(args.older_than, Clock::now());
    if (!options.older_than)
      throw UserError("'" + args.older_than + "' is neither a date nor a duration", "--older-than",
                      "give a duration such as 7d, 12h, 2w, or a date such as 2026-12-01 (UTC)");
  }
  const GcRun mode = args.dry_run ? GcRun::DryRun : GcRun::Remove;
  auto store = open_existing_store(args.context.db);
  const auto plan = harness::plan_gc(store, options);
  // The list comes first, so what goes is on screen before it goes.
  if (!args.context.json) {
    fmt::print("{}\n", mode == GcRun::DryRun ? "would remove (dry run):" : "removing:");
    for (const auto& item : plan.items)
      fmt::print("  run {:>5}  {:<10} {:>9}  {}\n", item.run_id, what_of(item.action),
                 harness::format_bytes(item.bytes), item.path);
    if (plan.items.empty()) fmt::print("  nothing\n");
    for (const auto& kept : plan.kept) fmt::print("  kept: {}\n", kept);
  }
  std::vector<std::string> problems;
  if (mode == GcRun::Remove) problems = harness::apply_gc(plan);
  for (const auto& problem : problems)
    fmt::print(stderr, "faultline gc: could not remove {}\n", problem);
  if (args.context.json) {
    json items = json::array();
    for (const auto& item : plan.items)
      items.push_back({{"run_id", item.run_id},
                       {"what", what_of(item.action)},
                       {"path", item.path},
                       {"bytes", item.bytes}});
    fmt::print("{}\n", json{{"dry_run", mode == GcRun::DryRun},
                            {"removed", items},
                            {"kept", plan.kept},
                            {"bytes", plan.bytes()},
                            {"problems", problems}}
                           .dump());
    return;
  }
  fmt::print("{} {} ({} item(s)); the runs' rows stay in the store\n",
             mode == GcRun::DryRun ? "would free" : "freed", harness::format_bytes(plan.bytes()),
             plan.items.size());
}

}  // namespace

void add_gc_command(CLI::App& app) {
  auto args = std::make_shared<GcArgs>();
  auto* gc = app.add_subcommand(
      "gc", "remove run directories and checkpoints no stored finding needs (rows stay)");
  gc->add_flag("--keep-findings", args->keep_findings,
               "keep every file of the runs findings name as evidence, not only what repro needs");
  gc->add_option("--older-than", args->older_than,
                 "only runs that ended before: a duration back from now (7d) or a date");
  gc->add_flag("--dry-run", args->dry_run,
               "list what would be removed and its size; remove nothing");
  add_store_options(*gc);
  gc->callback([args] { run_gc(*args); });
}

}  // namespace faultline::cli
