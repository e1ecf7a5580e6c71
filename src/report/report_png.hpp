// The report's main plot (the loss) as a PNG, drawn by a headless Chromium when one is installed:
// for places that take an image but no HTML (a chat message, a slide).
#pragma once

#include <string>

namespace faultline::report {

// The browser `--png` uses: $FAULTLINE_CHROMIUM, else chromium or chromium-browser in PATH; ""
// when there is none.
std::string find_chromium();

// Opens `html` (a rendered report page) in headless Chromium showing its first plot only and
// saves a 1200×420 screenshot to `png_path`. UserError when no Chromium is found or it fails.
void write_plot_png(const std::string& html, const std::string& png_path);

}  // namespace faultline::report
