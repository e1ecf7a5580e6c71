// --png: a screenshot of the page in its "#png" mode (page.js hides all but the first plot).
#include "report/report_png.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/launch/launcher.hpp"
#include "harness/launch/subprocess.hpp"

namespace faultline::report {

namespace fs = std::filesystem;

std::string find_chromium() {
  if (const char* given = std::getenv("FAULTLINE_CHROMIUM"); given && *given) return given;
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path ? path : "", ':'))
    for (const char* name : {"chromium", "chromium-browser"})
      if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0)
        return (fs::path(dir) / name).string();
  return "";
}

void write_plot_png(const std::string& html, const std::string& png_path) {
  const std::string browser = find_chromium();
  if (browser.empty())
    throw UserError(
        "no renderer for --png", "chromium",
        "install Debian's chromium (scripts/install-deps.sh) or set FAULTLINE_CHROMIUM");
  std::string scratch = (fs::temp_directory_path() / "faultline-report-XXXXXX").string();
  if (::mkdtemp(scratch.data()) == nullptr)
    throw UserError("cannot make a scratch folder for --png", scratch, "check TMPDIR");
  const fs::path page = fs::path(scratch) / "report.html";
  std::ofstream(page, std::ios::binary) << html;
  harness::CommandSpec spec;
  // --no-sandbox: Chromium refuses to run as root with its sandbox, as in containers and CI.
  spec.argv = {browser,
               "--headless=new",
               "--no-sandbox",
               "--disable-gpu",
               "--hide-scrollbars",
               "--no-first-run",
               "--disable-background-networking",
               "--disable-component-update",
               "--user-data-dir=" + scratch + "/profile",
               "--window-size=1200,420",
               "--virtual-time-budget=5000",
               "--screenshot=" + fs::absolute(png_path).string(),
               "file://" + page.string() + "#png"};
  spec.output_path = scratch + "/chromium.log";
  spec.timeout_s = 120;
  std::string failure;
  try {
    const auto result = harness::run_command(spec);
    if (result.end != harness::CommandEnd::Exited || result.exit_code != 0 || !fs::exists(png_path))
      failure = harness::describe(result, spec) + ": " + harness::file_tail(spec.output_path, 400);
  } catch (const harness::InfraError& error) {
    failure = error.what();
  }
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  if (!failure.empty())
    throw UserError("chromium could not draw the PNG", png_path + " (--png)", failure);
}

}  // namespace faultline::report
