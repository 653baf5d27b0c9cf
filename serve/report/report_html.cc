#include "serve/report/report_html.h"

#include <openssl/evp.h>

#include <string_view>
#include <utility>
#include <vector>

#include "serve/report/report_assets.h"

namespace ingero::serve::report {
namespace {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
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

// 'sha256-BASE64' of the text, as CSP names an inline script.
std::string csp_hash(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr);
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  int len = EVP_EncodeBlock(b64, md, int(n));
  return "'sha256-" + std::string(reinterpret_cast<char*>(b64), size_t(len)) + "'";
}

std::string csp(bool live) {
  return "default-src 'none'; script-src " + csp_hash(assets::kScript) +
         "; style-src 'unsafe-inline'; img-src data:; connect-src " + (live ? "'self'" : "'none'") +
         "; base-uri 'none'; form-action 'none'";
}

// Fills {{NAME}} placeholders of the template in one scan: inserted text is never rescanned.
std::string fill(std::string_view tpl, const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string out;
  out.reserve(tpl.size() + assets::kScript.size() + assets::kStyle.size() + 4096);
  size_t pos = 0;
  while (pos < tpl.size()) {
    size_t open = tpl.find("{{", pos);
    if (open == std::string_view::npos) break;
    size_t close = tpl.find("}}", open);
    if (close == std::string_view::npos) break;
    std::string_view name = tpl.substr(open + 2, close - open - 2);
    const std::string* value = nullptr;
    for (const auto& [k, v] : kv)
      if (k == name) value = &v;
    out.append(tpl.substr(pos, (value ? open : close + 2) - pos));
    if (value) out += *value;
    pos = close + 2;
  }
  out.append(tpl.substr(std::min(pos, tpl.size())));
  return out;
}

std::string page(const std::string& title, const std::string& data_json, bool live) {
  return fill(assets::kTemplate, {{"TITLE", html_escape(title)},
                                  {"CSP", html_escape(csp(live))},
                                  {"STYLE", std::string(assets::kStyle)},
                                  {"SCRIPT", std::string(assets::kScript)},
                                  {"LIBRARIES", html_escape(assets::kLibraries)},
                                  {"DATA", data_json}});
}

}  // namespace

std::string json_for_html(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + s.size() / 64);
  for (char c : s) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

std::string render_report_html(const nlohmann::json& model, const std::string& title) {
  return page("ingero report \u2014 " + title, json_for_html(model), false);
}

std::string render_dashboard_html(const LivePage& p) {
  nlohmann::json live = {
      {"live", {{"api", p.api}, {"refresh_ms", p.refresh_ms}, {"title", p.title}}}};
  return page("ingero dashboard \u2014 " + p.title, json_for_html(live), true);
}

std::string dashboard_csp() { return csp(true) + "; frame-ancestors 'none'"; }

}  // namespace ingero::serve::report
