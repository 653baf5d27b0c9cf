// The manual page, generated from the CLI11 definitions so it never drifts from --help.
// The build runs the hidden `ingero man-page` command and packages the result as ingero.1.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace ingero::app {

struct Context;
// A man(7) page: NAME, SYNOPSIS, DESCRIPTION (the root description), one subsection per
// visible subcommand with its description and every visible option (names, type, help,
// default), FILES, EXIT STATUS.
std::string render_man_page(const CLI::App& root, std::string_view version);
void add_man_page_command(CLI::App& app, Context& ctx);

}  // namespace ingero::app
