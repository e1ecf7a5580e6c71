// How the store keeps doubles faithfully: SQLite turns a bound NaN into NULL, so NaN is stored as
// TEXT ("nan", "-nan", or "nan:0x<16 hex bits>" for other payloads); every other double is REAL.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/sqlite_util.hpp"

namespace faultline::store::detail {

// The TEXT form of a NaN; every NaN bit pattern round-trips exactly through parse_nan.
std::string encode_nan(double value);
// The NaN that `text` encodes, or nullopt when it is not one of encode_nan's forms.
std::optional<double> parse_nan(const std::string& text);

// Binds a double: REAL (±Inf and -0.0 included, in a column without affinity) or NaN as TEXT.
void bind_real(Statement& statement, int index, double value);
void bind_real(Statement& statement, int index, const std::optional<double>& value);  // NULL

// Reads what bind_real wrote; NULL reads as nullopt (or NaN for read_real).
std::optional<double> read_opt_real(const Statement& statement, int column);
double read_real(const Statement& statement, int column);

// A list of doubles as one TEXT value: comma-separated, round-trip exact ("%.17g"; nan/inf as
// printf spells them).
std::string encode_reals(const std::vector<double>& values);
std::vector<double> decode_reals(const std::string& text);

}  // namespace faultline::store::detail
