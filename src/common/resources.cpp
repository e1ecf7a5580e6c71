// Finds the share directory from the executable's own location, and recipes in it by name.
#include "common/resources.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cstdlib>

#include "common/error.hpp"
#include "common/text.hpp"

namespace faultline {

namespace fs = std::filesystem;

namespace {

const char* folder_of(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::Train:
      return "train";
    case RecipeKind::Ladder:
      return "ladders";
  }
  return "train";
}

// Installed: <prefix>/bin/x → <prefix>/share/faultline. Build tree: build/src/cli/x →
// build/share/faultline (CMake links it to the source tree's recipes/).
std::vector<fs::path> candidates() {
  const fs::path exe = executable_dir();
  return {exe / "../share/faultline", exe / "../../share/faultline"};
}

}  // namespace

fs::path executable_dir() {
  std::error_code error;
  fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error)
    throw UserError("cannot tell where this executable is", "/proc/self/exe",
                    "set FAULTLINE_SHARE to the share/faultline directory");
  return exe.parent_path();
}

fs::path share_dir() {
  if (const char* env = std::getenv("FAULTLINE_SHARE"); env && *env) {
    if (!fs::is_directory(fs::path(env) / "recipes"))
      throw UserError("FAULTLINE_SHARE has no recipes/ folder", env,
                      "point it at an installed share/faultline directory, or unset it");
    return fs::weakly_canonical(env);
  }
  std::vector<std::string> tried;
  for (const auto& candidate : candidates()) {
    std::error_code error;
    if (fs::is_directory(candidate / "recipes", error)) return fs::weakly_canonical(candidate);
    tried.push_back(fs::weakly_canonical(candidate).string());
  }
  throw UserError("cannot find faultline's share directory",
                  fmt::format("{}", fmt::join(tried, ", ")),
                  "install faultline (cmake --install) or set FAULTLINE_SHARE");
}

fs::path share_file(const std::string& relative) {
  fs::path path = share_dir() / relative;
  if (!fs::is_regular_file(path))
    throw UserError("faultline's own file is missing", path.string(),
                    "reinstall faultline, or set FAULTLINE_SHARE to a complete share directory");
  return path;
}

std::vector<std::string> installed_recipes(RecipeKind kind) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(share_dir() / "recipes" / folder_of(kind), error))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_recipe(const std::string& given, RecipeKind kind, const std::string& option) {
  std::error_code error;
  if (fs::is_regular_file(given, error)) return fs::absolute(given).lexically_normal().string();
  // A bare name (no folder in it) is an installed recipe; anything with a slash is a path.
  if (!given.empty() && given.find('/') == std::string::npos) {
    fs::path name = given;
    if (name.extension() != ".toml") name += ".toml";
    fs::path installed = share_dir() / "recipes" / folder_of(kind) / name;
    if (fs::is_regular_file(installed, error)) return installed.string();
    const auto names = installed_recipes(kind);
    std::string hint = "give a path to a TOML file, or one of the installed names: " +
                       fmt::format("{}", fmt::join(names, ", "));
    if (auto guess = did_you_mean(name.stem().string(), names); !guess.empty())
      hint = guess + " (" + hint + ")";
    throw UserError("no recipe file or installed recipe named '" + given + "'", option, hint);
  }
  throw UserError("cannot read recipe file", given + " (" + option + ")",
                  "check the path; relative paths are taken from the current directory");
}

}  // namespace faultline
