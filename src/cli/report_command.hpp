// `faultline report FINDING|RUN [--html FILE] [--md FILE] [--png FILE]`: a finding or a run as
// a self-contained HTML page with plots, as Markdown, or its loss plot as a PNG (docs/report.md).
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

void add_report_command(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
