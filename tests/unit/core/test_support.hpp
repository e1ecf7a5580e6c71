// Helpers shared by the core unit tests: scratch directories, raw file access, and checks on
// the contents of a faultline::UserError.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace faultline::testing {

// A fresh directory under the GoogleTest temp dir, removed with everything in it at scope end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "faultline-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `action`, which must throw UserError, and returns its items for the test to examine.
inline std::vector<ErrorItem> user_errors(const std::function<void()>& action) {
  try {
    action();
  } catch (const UserError& error) {
    return error.items();
  }
  ADD_FAILURE() << "expected a faultline::UserError";
  return {};
}

// The single item of a UserError thrown by `action`.
inline ErrorItem user_error(const std::function<void()>& action) {
  std::vector<ErrorItem> items = user_errors(action);
  EXPECT_EQ(items.size(), 1u);
  return items.empty() ? ErrorItem{} : items.front();
}

}  // namespace faultline::testing
