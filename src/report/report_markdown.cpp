// The Markdown of a report.
#include "report/report_markdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/sparkline.hpp"

namespace faultline::report {

namespace {

void facts_table(std::string& out, const std::vector<Fact>& facts) {
  if (facts.empty()) return;
  out += "| | |\n|---|---|\n";
  for (const auto& fact : facts)
    out += fmt::format("| {} | `{}` |\n", markdown_cell(fact.label), markdown_cell(fact.value));
  out += "\n";
}

void table(std::string& out, const Table& table) {
  if (table.rows.empty()) return;
  std::vector<std::string> header, rule;
  for (const auto& column : table.columns) {
    header.push_back(markdown_cell(column));
    rule.push_back("---");
  }
  out += fmt::format("| {} |\n| {} |\n", fmt::join(header, " | "), fmt::join(rule, " | "));
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const auto& cell : row) cells.push_back(markdown_cell(cell));
    out += fmt::format("| {} |\n", fmt::join(cells, " | "));
  }
  out += "\n";
}

std::string loss_range(const std::vector<double>& loss) {
  double low = INFINITY, high = -INFINITY;
  for (double value : loss)
    if (std::isfinite(value)) low = std::min(low, value), high = std::max(high, value);
  if (low > high) return "no finite value";
  return fmt::format("{:.4g} … {:.4g}", low, high);
}

}  // namespace

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else if (c == '`')
      out += '\'';
    else
      out += c;
  }
  return out;
}

std::string render_markdown(const Report& report) {
  const bool finding = report.subject == Subject::Finding;
  std::string out = fmt::format("### faultline · {}\n\n**{}**\n\n", report.title, report.verdict);
  facts_table(out, report.location);
  if (!report.detail_block.empty()) out += fmt::format("```\n{}\n```\n\n", report.detail_block);
  if (!report.loss.empty()) {
    out += fmt::format("Loss over {} steps ({}{}):\n\n```\n{}\n```\n\n", report.loss.size(),
                       loss_range(report.loss),
                       report.bad_step ? fmt::format(", bad step {}", *report.bad_step) : "",
                       sparkline(report.loss));
  }
  table(out, report.rank_evidence);
  table(out, report.failures);
  if (!report.gpu_time.rows.empty()) {
    out += "GPU per step, medians (CUPTI probe):\n\n";
    table(out, report.gpu_time);
  }
  if (finding && !report.config_culprit.empty()) {
    out += "Config culprit (baseline → failing):\n\n```diff\n";
    for (const auto& change : report.config_culprit)
      out += fmt::format("- {} = {}\n+ {} = {}\n", change.key, change.baseline, change.key,
                         change.failing);
    out += "```\n\n";
  }
  facts_table(out, report.summary);
  if (!report.repro_command.empty())
    out += fmt::format("Reproduce:\n\n```sh\n{}\n```\n\n", report.repro_command);
  if (!report.trainer_command.empty())
    out += fmt::format("Trainer command:\n\n```sh\n{}\n```\n", report.trainer_command);
  return out;
}

}  // namespace faultline::report
