// Where faultline's own files are: share/faultline beside the binaries, installed
// (P/bin/faultline → P/share/faultline) or in the build tree (build/src/cli →
// build/share/faultline), never the current directory. Recipes given by name (`-c tiny`) are looked
// up there.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace faultline {

// The directory of the running executable (/proc/self/exe).
std::filesystem::path executable_dir();

// The share directory: $FAULTLINE_SHARE when set, else the first of the candidates beside the
// executable that holds recipes/. Throws UserError naming the places it looked.
std::filesystem::path share_dir();

// A file under the share directory, e.g. "recipes/ladders/default.toml"; throws when missing.
std::filesystem::path share_file(const std::string& relative);

// What kind of recipe a name stands for: the folder of recipes/ it is looked up in.
enum class RecipeKind { Train, Ladder };

// A recipe given on the command line: a path to an existing file (returned absolute), or the
// name of an installed one ("tiny" or "tiny.toml" → share/recipes/train/tiny.toml). Anything
// else is a UserError that names `option` and lists the installed names.
std::string resolve_recipe(const std::string& given, RecipeKind kind, const std::string& option);

// The names of the installed recipes of one kind, sorted ("small", "tiny").
std::vector<std::string> installed_recipes(RecipeKind kind);

}  // namespace faultline
