#include "app/window_flags.h"

namespace ingero::app {
namespace {

// Refuses only an empty value: check_window_spec() says what is wrong with any other.
CLI::Validator given(const std::string& what, const std::string& examples) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        return s.empty() ? "empty: " + what + " (" + examples + ")" : "";
      },
      "");
}

}  // namespace

CLI::Validator path_given() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? "an empty path names no file" : ""; }, "PATH");
}

void add_window_flags(CLI::App& cmd, engine::WindowSpec& w, const std::string& since_help) {
  cmd.add_option("--since", w.since, since_help)
      ->check(given("write a duration with its unit", "30s, 5m, 1h"));
  auto time = given("give a time", "2026-04-03T12:18:02, UTC, or Unix seconds");
  cmd.add_option("--from", w.from, "Window start (2026-04-03T12:18:02, UTC, or Unix seconds)")
      ->check(time);
  cmd.add_option("--to", w.to, "Window end")->check(time);
}

}  // namespace ingero::app
