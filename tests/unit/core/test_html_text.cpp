// Tests for report/html_text: every user text escaped; JSON in a <script> cannot end it.
#include "report/html_text.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace faultline::report {
namespace {

TEST(HtmlText, EscapesTheFiveCharactersThatMatter) {
  EXPECT_EQ(html_escape("<img src=x onerror=\"alert('x')\"> & more"),
            "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt; &amp; more");
  EXPECT_EQ(html_escape("blocks.1.mlp"), "blocks.1.mlp");
  EXPECT_EQ(html_escape(""), "");
}

TEST(HtmlText, ElementEscapesItsTextAndClass) {
  EXPECT_EQ(element("td", "a<b"), "<td>a&lt;b</td>");
  EXPECT_EQ(element("span", "x", "pill \"q\""), "<span class=\"pill &quot;q&quot;\">x</span>");
}

TEST(HtmlText, ScriptJsonCannotCloseItsElementAndReadsBackTheSame) {
  const nlohmann::json value = {{"label", "</script><script>alert(1)</script><!-- & -->"},
                                {"line", "a\u2028b"},
                                {"values", {1.5, nullptr}}};
  const std::string text = script_json(value);
  EXPECT_EQ(text.find('<'), std::string::npos) << text;
  EXPECT_EQ(text.find('>'), std::string::npos) << text;
  EXPECT_EQ(text.find("\u2028"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(text), value);
}

}  // namespace
}  // namespace faultline::report
