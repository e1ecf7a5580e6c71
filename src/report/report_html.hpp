// A report as one self-contained HTML page: its plots (uPlot and the page's script inlined),
// verdict, location, evidence, config diff, search timeline and repro command. Every text from
// the store is escaped; the plot data travels as JSON (plot_data.hpp).
#pragma once

#include <string>

#include "report/report_model.hpp"

namespace faultline::report {

std::string render_html(const Report& report);

}  // namespace faultline::report
