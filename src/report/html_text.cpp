// HTML escaping for the report page.
#include "report/html_text.hpp"

#include <nlohmann/json.hpp>

namespace faultline::report {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string script_json(const nlohmann::json& value) {
  // Invalid UTF-8 in a stored string is replaced, never a reason to fail a report.
  const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    // Outside strings JSON has none of these characters, so the escapes land inside strings.
    if (text[i] == '<') {
      out += "\\u003c";
    } else if (text[i] == '>') {
      out += "\\u003e";
    } else if (text[i] == '&') {
      out += "\\u0026";
    } else if (text.compare(i, 3, "\xE2\x80\xA8") == 0 || text.compare(i, 3, "\xE2\x80\xA9") == 0) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string element(std::string_view tag, std::string_view text, std::string_view cls) {
  std::string out = "<" + std::string(tag);
  if (!cls.empty()) out += " class=\"" + html_escape(cls) + "\"";
  return out + ">" + html_escape(text) + "</" + std::string(tag) + ">";
}

}  // namespace faultline::report
