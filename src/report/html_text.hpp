// Text that goes into an HTML page: escaping for element content and attributes, and JSON that
// is safe inside a <script> element.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace faultline::report {

// & < > " ' as entities: safe in element content and in quoted attribute values.
std::string html_escape(std::string_view text);

// `value` as JSON for a <script> element: < > & inside strings become \u003c \u003e \u0026 (the
// same JSON), so no text can end or confuse the element; U+2028/U+2029 likewise.
std::string script_json(const nlohmann::json& value);

// `<tag class="cls">escaped text</tag>`; no class attribute when `cls` is empty.
std::string element(std::string_view tag, std::string_view text, std::string_view cls = "");

}  // namespace faultline::report
