// The files a report page inlines, compiled into the binary (embed_assets.cmake): uPlot (MIT,
// pinned by scripts/fetch-uplot.sh) and the page's own script and style.
#pragma once

#include <string_view>

namespace faultline::report::assets {

std::string_view uplot_js();
std::string_view uplot_css();
std::string_view uplot_license();
std::string_view page_js();
std::string_view page_css();

}  // namespace faultline::report::assets
