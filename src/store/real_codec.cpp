// The NaN-as-TEXT encoding of doubles in the store (see real_codec.hpp and docs/store.md).
#include "store/real_codec.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace faultline::store::detail {

namespace {
constexpr uint64_t kQuietNan = 0x7ff8000000000000ULL;  // std::nan(""), a NaN literal
constexpr uint64_t kSignBit = 0x8000000000000000ULL;   // 0.0 / 0.0 on x86 is -nan

uint64_t bits_of(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double from_bits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
}  // namespace

std::string encode_nan(double value) {
  const uint64_t bits = bits_of(value);
  if (bits == kQuietNan) return "nan";
  if (bits == (kQuietNan | kSignBit)) return "-nan";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "nan:0x%016" PRIx64, bits);
  return buffer;
}

std::optional<double> parse_nan(const std::string& text) {
  if (text == "nan") return from_bits(kQuietNan);
  if (text == "-nan") return from_bits(kQuietNan | kSignBit);
  if (text.size() == 22 && text.compare(0, 6, "nan:0x") == 0) {
    uint64_t bits = 0;
    for (size_t i = 6; i < text.size(); ++i) {
      const char c = text[i];
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else {
        return std::nullopt;
      }
      bits = bits << 4 | static_cast<uint64_t>(digit);
    }
    const double value = from_bits(bits);
    if (std::isnan(value)) return value;
  }
  return std::nullopt;
}

void bind_real(Statement& statement, int index, double value) {
  if (std::isnan(value)) {
    statement.bind(index, encode_nan(value));
  } else {
    statement.bind_double_raw(index, value);
  }
}

void bind_real(Statement& statement, int index, const std::optional<double>& value) {
  if (value) {
    bind_real(statement, index, *value);
  } else {
    statement.bind_null(index);
  }
}

std::optional<double> read_opt_real(const Statement& statement, int column) {
  switch (statement.type(column)) {
    case SQLITE_NULL:
      return std::nullopt;
    case SQLITE_TEXT: {
      const std::string text = statement.text(column);
      if (auto nan = parse_nan(text)) return nan;
      throw std::runtime_error("store: unexpected text '" + text + "' in a number column");
    }
    default:
      return statement.real_raw(column);
  }
}

double read_real(const Statement& statement, int column) {
  return read_opt_real(statement, column).value_or(std::numeric_limits<double>::quiet_NaN());
}

std::string encode_reals(const std::vector<double>& values) {
  std::string text;
  char buffer[32];
  for (double value : values) {
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    if (!text.empty()) text += ',';
    text += buffer;
  }
  return text;
}

std::vector<double> decode_reals(const std::string& text) {
  std::vector<double> values;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    values.push_back(std::strtod(text.substr(begin, end - begin).c_str(), nullptr));
    begin = end + 1;
  }
  return values;
}

}  // namespace faultline::store::detail
