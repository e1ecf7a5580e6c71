// The byte-level tokenizer used by `faultline data prepare`: token id = byte value (vocab 256).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::data {

constexpr char kByteTokenizer[] = "byte";
constexpr uint32_t kByteTokenizerVersion = 1;
constexpr uint32_t kByteVocabSize = 256;

std::vector<uint16_t> byte_encode(std::string_view text);
// Ids >= 256 are not bytes; each decodes to U+FFFD (the UTF-8 replacement character) so that a
// model sampling outside the byte range still prints something readable.
std::string byte_decode(const std::vector<uint16_t>& tokens);

}  // namespace faultline::data
