// The capability audit's data: one line per check, plus the libraries each backend found.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "hal/backend.h"
#include "hal/probe_manager.h"

namespace ingero::app {

enum class CheckStatus { kPass, kOptional, kFail };
std::string_view status_name(CheckStatus s);  // "pass", "optional", "fail"

struct CheckItem {
  std::string name;
  CheckStatus status = CheckStatus::kPass;
  std::string value, detail, fix;
};

struct CheckReport {
  std::vector<CheckItem> items;
  std::vector<hal::LibraryStatus> libraries;
  void add(std::string name, CheckStatus s, std::string value, std::string detail,
           std::string fix) {
    items.push_back({std::move(name), s, std::move(value), std::move(detail), std::move(fix)});
  }
  bool can_trace() const;
};

CheckReport run_checks(const hal::BackendRegistry& registry,
                       const std::vector<const hal::VendorBackend*>& backends);
void print_check_report(std::ostream& out, const CheckReport& rep);
nlohmann::json check_report_json(const CheckReport& rep);
nlohmann::json library_json(const hal::LibraryStatus& lib);

}  // namespace ingero::app
