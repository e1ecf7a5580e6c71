// `faultline report`: resolves what to report on, gathers it from the store (report/) and writes
// the files asked for; with none of --html, --md, --png the Markdown goes to stdout.
#include "cli/report_command.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>

#include "cli/finding_report.hpp"
#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "report/report_gather.hpp"
#include "report/report_html.hpp"
#include "report/report_markdown.hpp"
#include "report/report_png.hpp"

namespace faultline::cli {

namespace {

struct ReportArgs {
  RunContextOptions& context = shared_context();
  std::string subject;  // "F3" or a run id
  std::string html, markdown, png;
  std::string reference;
};

report::Report gather(const store::Store& store, const ReportArgs& args) {
  const report::GatherOptions options{args.reference};
  if (auto finding = finding_reference(args.subject))
    return report::gather_finding(store, *finding, options);
  const bool run_id =
      !args.subject.empty() && args.subject.find_first_not_of("0123456789") == std::string::npos;
  if (!run_id)
    throw UserError("'" + args.subject + "' is neither a finding nor a run", "FINDING|RUN",
                    "give a finding id such as F3 (`faultline findings`) or a run id "
                    "(`faultline runs`)");
  return report::gather_run(store, std::stoll(args.subject), options);
}

void write_file(const std::string& path, const std::string& text, const std::string& option) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out)
    throw UserError("cannot write the report", path + " (" + option + ")",
                    "check that the folder exists and is writable");
}

// "-" is stdout, as for most tools that write a file (`--md - | less`).
void write_output(const std::string& path, const std::string& text, const std::string& option) {
  if (path == "-") {
    fmt::print("{}", text);
    return;
  }
  write_file(path, text, option);
  fmt::print(stderr, "faultline report: wrote {}\n", path);  // stdout may be the other report
}

void run_report(const ReportArgs& args) {
  if (args.context.json)
    throw UserError("a report is HTML, Markdown or PNG, not one JSON document", "--json",
                    "faultline show RUN --json or faultline findings --json give its facts");
  if (args.html == "-" && args.markdown == "-")
    throw UserError("--html and --md both write to stdout", "--html -, --md -",
                    "give one of them a file");
  const auto store = open_existing_store(args.context.db);
  const auto report = gather(store, args);
  if (!args.html.empty()) write_output(args.html, report::render_html(report), "--html");
  if (!args.markdown.empty()) write_output(args.markdown, report::render_markdown(report), "--md");
  if (!args.png.empty()) {
    report::write_plot_png(report::render_html(report), args.png);
    fmt::print(stderr, "faultline report: wrote {}\n", args.png);
  }
  if (args.html.empty() && args.markdown.empty() && args.png.empty())
    fmt::print("{}", report::render_markdown(report));
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand(
      "report", "a finding or a run as a self-contained HTML page with plots, or as Markdown");
  report->add_option("FINDING|RUN", args->subject, "finding id such as F3, or a run id")
      ->required();
  report->add_option("--html", args->html, "write the HTML page here (-: stdout)");
  report->add_option("--md", args->markdown, "write the Markdown here (-: stdout)");
  report->add_option("--png", args->png,
                     "write the loss plot as a PNG (drawn by a headless Chromium, when installed)");
  report->add_option("--reference", args->reference,
                     "a stored reference whose seed band is drawn under the loss (default: the "
                     "one reference of the run's recipe, if there is exactly one)");
  add_store_options(*report);
  report->callback([args, &exit_code] {
    run_report(*args);
    exit_code = 0;
  });
}

}  // namespace faultline::cli
