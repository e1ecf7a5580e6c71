// Byte tokenizer: the identity map between bytes and ids 0..255, lossless for any input.
#include "data/tokenizer.hpp"

namespace faultline::data {

std::vector<uint16_t> byte_encode(std::string_view text) {
  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

std::string byte_decode(const std::vector<uint16_t>& tokens) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  std::string text;
  text.reserve(tokens.size());
  for (uint16_t token : tokens) {
    if (token < kByteVocabSize)
      text += static_cast<char>(token);
    else
      text += kReplacement;
  }
  return text;
}

}  // namespace faultline::data
