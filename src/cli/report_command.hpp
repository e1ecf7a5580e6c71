// `faultline report FINDING|RUN [--html FILE] [--md FILE]`: a finding or a run as a
// self-contained HTML page with plots, or as Markdown (docs/report.md).
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

void add_report_command(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
