// A report as Markdown for issues and PR comments: the verdict, a table of the facts, the loss
// as a Unicode sparkline, the config diff, the search in short and the repro command.
#pragma once

#include <string>

#include "report/report_model.hpp"

namespace faultline::report {

std::string render_markdown(const Report& report);

// `text` safe inside a Markdown table cell: | escaped, newlines as spaces.
std::string markdown_cell(const std::string& text);

}  // namespace faultline::report
