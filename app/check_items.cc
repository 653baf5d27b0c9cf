#include "app/check_items.h"

#include "app/terminal_text.h"

namespace ingero::app {

std::string_view status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kOptional:
      return "optional";
    case CheckStatus::kFail:
      return "fail";
  }
  return "";
}

const CheckItem* CheckReport::find(std::string_view name) const {
  for (const auto& i : items)
    if (i.name == name) return &i;
  return nullptr;
}

bool CheckReport::can_trace() const {
  for (const auto& i : items)
    if (i.status == CheckStatus::kFail) return false;
  return true;
}

nlohmann::json library_json(const hal::LibraryStatus& lib, const std::string& opt_in_flag) {
  nlohmann::json j = {{"backend", lib.backend},
                      {"vendor", lib.vendor},
                      {"api", lib.api},
                      {"path", lib.path},
                      {"soname", lib.soname},
                      {"version", lib.version},
                      {"build_id", lib.build_id},
                      {"embedded", lib.embedded},
                      {"stub", lib.stub},
                      {"sources", lib.sources},
                      {"pids", lib.pids},
                      {"probes_resolved", lib.specs_resolved},
                      {"probes_total", lib.specs_total},
                      {"probes_attached", lib.probes_attached},
                      {"missing", lib.missing_required},
                      {"missing_optional", lib.missing_optional},
                      {"errors", lib.errors}};
  // Libraries of an opt-in backend: the trace flag that attaches to them.
  j["opt_in"] = opt_in_flag.empty() ? nlohmann::json() : nlohmann::json(opt_in_flag);
  return j;
}

nlohmann::json check_report_json(const CheckReport& rep) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& i : rep.items)
    checks.push_back({{"name", i.name},
                      {"status", status_name(i.status)},
                      {"value", i.value},
                      {"detail", i.detail},
                      {"fix", i.fix}});
  nlohmann::json libs = nlohmann::json::array();
  for (const auto& l : rep.libraries) {
    auto it = rep.opt_in.find(l.backend);
    libs.push_back(library_json(l, it == rep.opt_in.end() ? "" : it->second));
  }
  return {{"can_trace", rep.can_trace()}, {"checks", checks}, {"libraries", libs}};
}

void print_check_report(std::ostream& out, const CheckReport& rep) {
  size_t w = 0;
  for (const auto& i : rep.items) w = std::max(w, i.name.size());
  for (const auto& i : rep.items) {
    std::string tag = "[" + std::string(status_name(i.status)) + "]";
    // Values and details name anyone's files and devices: each stays on its line.
    out << "  " << tag << std::string(11 - tag.size(), ' ') << i.name
        << std::string(w + 2 - i.name.size(), ' ') << one_line(i.value);
    if (!i.detail.empty()) out << "  (" << one_line(i.detail) << ")";
    out << "\n";
    if (!i.fix.empty() && i.status != CheckStatus::kPass)
      out << std::string(13 + w + 2, ' ') << "fix: " << one_line(i.fix) << "\n";
  }
  if (!rep.libraries.empty()) out << "\nLibraries:\n";
  for (const auto& l : rep.libraries) {
    if (l.backend.empty()) {
      out << "  [error] " << one_line(l.path) << ": "
          << one_line(l.errors.empty() ? "" : l.errors.front()) << "\n";
      continue;
    }
    out << "  " << l.backend << "/" << l.api << "  " << one_line(l.path);
    if (!l.version.empty()) out << "  v" << one_line(l.version);
    if (l.embedded) out << "  (static copy)";
    if (l.stub) out << "  (link stub: calls fail without a real driver)";
    if (auto it = rep.opt_in.find(l.backend); it != rep.opt_in.end())
      out << "  (opt-in: traced with `ingero trace " << it->second << "`)";
    out << "\n    probes " << l.specs_resolved << "/" << l.specs_total << " resolved";
    if (!l.build_id.empty()) out << "  build-id " << l.build_id;
    if (!l.pids.empty()) {
      out << "  mapped by " << l.pids.size() << " process" << (l.pids.size() == 1 ? "" : "es")
          << " (pid";
      size_t k = 0;
      for (int p : l.pids) {
        if (k++ == 8) {
          out << " ...";
          break;
        }
        out << " " << p;
      }
      out << ")";
    }
    out << "\n";
    if (!l.missing_required.empty()) {
      out << "    missing:";
      for (auto& m : l.missing_required) out << " " << m;
      out << "\n";
    }
    if (!l.missing_optional.empty()) {
      out << "    absent (optional):";
      for (auto& m : l.missing_optional) out << " " << m;
      out << "\n";
    }
  }
  out << "\n"
      << (rep.can_trace() ? "Tracing can work on this host."
                          : "Tracing cannot work on this host: see the failed lines.")
      << "\n";
}

}  // namespace ingero::app
