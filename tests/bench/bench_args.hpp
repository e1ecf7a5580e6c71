// The benchmarks' command lines: `--name value` pairs, each with a default.
#pragma once

#include <cstdlib>
#include <string>

namespace faultline::bench {

inline std::string text_arg(int argc, char** argv, const std::string& name,
                            const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

inline int int_arg(int argc, char** argv, const std::string& name, int fallback) {
  const std::string text = text_arg(argc, argv, name, "");
  return text.empty() ? fallback : std::atoi(text.c_str());
}

}  // namespace faultline::bench
