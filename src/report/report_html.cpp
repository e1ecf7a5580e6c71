// The HTML page of a report. The layout: verdict, plots, then the facts a reader checks them
// against (where, per-rank evidence, config diff, search timeline, deciding facts, repro).
#include "report/report_html.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/text.hpp"
#include "common/version.hpp"
#include "report/html_text.hpp"
#include "report/plot_data.hpp"
#include "report/report_assets.hpp"

namespace faultline::report {

namespace {

std::string facts_list(const std::vector<Fact>& facts) {
  std::string out = "<dl class=\"facts\">";
  for (const auto& fact : facts) out += element("dt", fact.label) + element("dd", fact.value);
  return out + "</dl>";
}

std::string table_html(const Table& table, const std::string& cls = "") {
  std::string out = cls.empty() ? "<table><thead><tr>" : "<table class=\"" + cls + "\"><thead><tr>";
  for (const auto& column : table.columns) out += element("th", column);
  out += "</tr></thead><tbody>";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const auto& cell : row) out += element("td", cell);
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

std::string card(const std::string& title, const std::string& body, const std::string& cls = "") {
  return "<section class=\"card " + cls + "\">" + element("h2", title) + body + "</section>";
}

// A verdict is a word of harness::Verdict's to_string; the page styles each (page.css).
std::string verdict_class(const std::string& verdict) {
  return "pill v-" + verdict;
}

std::string timeline_html(const std::vector<TrialRow>& timeline) {
  double longest = 0;
  for (const auto& trial : timeline) longest = std::max(longest, trial.wall_s);
  std::string out =
      "<table class=\"timeline\"><thead><tr><th>#</th><th>phase</th><th>tested</th>"
      "<th>verdict</th><th>steps run</th><th>time</th><th></th></tr></thead><tbody>";
  int index = 0;
  for (const auto& trial : timeline) {
    const double share = longest > 0 ? 100 * trial.wall_s / longest : 0;
    out +=
        "<tr>" + element("td", std::to_string(++index)) + element("td", trial.phase) + "<td>" +
        html_escape(trial.tested) + element("span", fmt::format(" run {}", trial.run_id), "muted") +
        "</td><td>" + element("span", trial.verdict, verdict_class(trial.verdict)) +
        (trial.failure.empty() ? "" : element("span", " " + trial.failure, "muted")) + "</td>" +
        element("td", trial.reused ? "–" : std::to_string(trial.steps_run), "num") +
        element("td", trial.reused ? "cache" : fmt::format("{:.1f} s", trial.wall_s), "num") +
        (trial.reused ? "<td><span class=\"pill cache\">reused</span></td>"
                      : fmt::format("<td class=\"bar\"><span style=\"width:{:.1f}%\"></span></td>",
                                    std::max(share, 1.0))) +
        "</tr>";
  }
  return out + "</tbody></table>";
}

std::string config_diff_html(const Report& report) {
  if (!report.has_baseline)
    return element("p", "No baseline was given to isolate, so no config change was searched for.",
                   "muted");
  if (report.config_culprit.empty())
    return element("p", "The baseline and failing configs differ in no key that causes it.",
                   "muted");
  std::string out = "<pre class=\"diff\">";
  for (const auto& change : report.config_culprit)
    out += element("span", "- " + change.key + " = " + change.baseline, "del") + "\n" +
           element("span", "+ " + change.key + " = " + change.failing, "add") + "\n";
  return out + "</pre>" +
         element("p",
                 "baseline → failing; the smallest set of keys that "
                 "turns the baseline into the failure.",
                 "muted");
}

std::string repro_html(const Report& report) {
  std::string out;
  if (!report.repro_command.empty())
    out += "<div class=\"cmd\"><pre id=\"repro\">" + html_escape(report.repro_command) +
           "</pre><button type=\"button\" data-copy=\"repro\">Copy</button></div>";
  if (!report.trainer_command.empty())
    out += element("p", "The trainer command it runs:", "muted") +
           "<div class=\"cmd\"><pre id=\"trainer-command\">" + html_escape(report.trainer_command) +
           "</pre><button type=\"button\" data-copy=\"trainer-command\">Copy</button></div>";
  return out;
}

}  // namespace

std::string render_html(const Report& report) {
  const bool finding = report.subject == Subject::Finding;
  std::string html;
  html +=
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">";
  html += element("title", "faultline · " + report.title + " · " + report.verdict);
  html += "<style>" + std::string(assets::uplot_css()) + "</style>";
  html += "<style>" + std::string(assets::page_css()) + "</style></head><body>\n";
  html += "<header class=\"top\"><span class=\"brand\">faultline</span>" +
          element("span", report.title, "subject") +
          element("span", report.failed ? "failure" : "healthy",
                  report.failed ? "pill fail" : "pill pass") +
          "</header>\n<main>\n";
  html += "<section class=\"verdict\">" + element("p", report.verdict, "sentence") + "</section>\n";
  html +=
      "<section id=\"plots\" class=\"plots\" aria-label=\"plots\"></section>\n"
      "<p class=\"hint muted\">Drag across a plot to zoom, double-click to reset; the legend "
      "reads out the values under the cursor. A red dashed line marks the bad step, a red ✕ "
      "a non-finite value.</p>\n";
  html += "<div class=\"grid\">";
  if (!report.location.empty())
    html +=
        card(finding ? "Where it breaks" : "First anomaly",
             facts_list(report.location) +
                 (report.detail_block.empty()
                      ? std::string()
                      : "<pre class=\"detail\">" + html_escape(report.detail_block) + "</pre>"));
  html += card(finding ? "Reproduce" : "Command", repro_html(report));
  html += "</div>\n";
  if (!report.rank_evidence.rows.empty())
    html += card("Per-rank evidence", table_html(report.rank_evidence), "wide");
  if (!report.failures.rows.empty()) html += card("Failures", table_html(report.failures), "wide");
  if (!report.gpu_time.rows.empty())
    html += card("GPU per step, medians (CUPTI probe)", table_html(report.gpu_time), "wide");
  if (finding) {
    html += card("Config culprit", config_diff_html(report), "wide");
    if (!report.timeline.empty())
      html +=
          card("The search: " + counted(static_cast<long long>(report.timeline.size()), "trial"),
               timeline_html(report.timeline), "wide");
  }
  html += "<div class=\"grid\">";
  html += card(finding ? "Cost" : "Run", facts_list(report.summary));
  if (!report.deciding_facts.empty())
    html += card("Facts that decide the bits",
                 facts_list(report.deciding_facts) +
                     element("p",
                             "A replay on a machine that differs in one of these is compared "
                             "within the tolerance, not bitwise.",
                             "muted"));
  html += "</div>\n";
  if (!report.notes.empty()) {
    std::string notes = "<ul>";
    for (const auto& note : report.notes) notes += element("li", note);
    html += card("Notes", notes + "</ul>", "wide");
  }
  html += "</main>\n<footer class=\"muted\">" +
          html_escape(fmt::format("faultline {} · self-contained: no network, charts by uPlot "
                                  "(MIT License) inlined",
                                  FAULTLINE_VERSION)) +
          "</footer>\n";
  html += "<script type=\"application/json\" id=\"report-data\">" +
          script_json(plots_json(report.plots, report.bad_step)) + "</script>\n";
  html += "<script>" + std::string(assets::uplot_js()) + "</script>\n";
  html += "<script>" + std::string(assets::page_js()) + "</script>\n";
  html += "<!-- uPlot license:\n" + std::string(assets::uplot_license()) + "-->\n";
  return html + "</body></html>\n";
}

}  // namespace faultline::report
