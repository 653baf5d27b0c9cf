#include "app/man_page.h"

#include <iostream>
#include <sstream>

#include "app/commands.h"

namespace ingero::app {
namespace {

// Text for a roff body line: backslashes escaped, a leading '.' or '\'' neutralised.
std::string roff(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  return out;
}

// A paragraph: each source line becomes a roff line; blank lines become paragraph breaks.
void paragraph(std::ostream& out, std::string_view text) {
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      out << ".PP\n";
      continue;
    }
    // Indented lines (examples) keep their layout.
    if (line[0] == ' ') out << ".br\n";
    if (line[0] == '.' || line[0] == '\'') out << "\\&";
    out << roff(line) << "\n";
  }
}

std::string option_names(const CLI::Option& o) {
  std::string s;
  for (const auto& n : o.get_snames()) s += (s.empty() ? "" : ", ") + ("\\fB\\-" + n + "\\fR");
  for (const auto& n : o.get_lnames())
    s += (s.empty() ? "" : ", ") + ("\\fB\\-\\-" + roff(n) + "\\fR");
  if (s.empty()) s = "\\fI" + roff(o.get_name(true)) + "\\fR";
  if (o.get_items_expected_max() > 0 && !o.get_type_name().empty())
    s += " \\fI" + roff(o.get_type_name()) + "\\fR";
  return s;
}

void options(std::ostream& out, const CLI::App& app) {
  for (const auto* o : app.get_options()) {
    if (o->get_group().empty()) continue;  // hidden
    out << ".TP\n" << option_names(*o) << "\n";
    paragraph(out, o->get_description());
    if (!o->get_default_str().empty() && o->get_items_expected_max() > 0)
      out << ".br\nDefault: " << roff(o->get_default_str()) << ".\n";
  }
}

}  // namespace

std::string render_man_page(const CLI::App& root, std::string_view version) {
  std::ostringstream out;
  out << ".TH INGERO 1 \"\" \"ingero " << version << "\" \"User Commands\"\n";
  out << ".SH NAME\ningero \\- eBPF agent for GPU debugging\n";
  out << ".SH SYNOPSIS\n\\fBingero\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n";
  out << ".SH DESCRIPTION\n";
  paragraph(out, root.get_description());
  out << ".PP\nEvery command accepts \\fB\\-\\-help\\fR; \\fBingero \\-\\-help\\-all\\fR prints "
         "them all. This page is generated from the same definitions.\n";
  out << ".SH COMMANDS\n";
  for (const auto* sub :
       root.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    out << ".SS \"ingero " << sub->get_name() << "\"\n";
    paragraph(out, sub->get_description());
    options(out, *sub);
  }
  out << ".SH FILES\n"
         ".TP\n/etc/ingero/ingero.toml\n"
         "Agent configuration: a [trace] table whose keys are the long flags of "
         "\\fBingero trace\\fR with _ for \\-. Read with \\fB\\-\\-config\\fR; validate with "
         "\\fBingero check \\-\\-config\\fR.\n"
         ".TP\n/var/lib/ingero/ingero.db\n"
         "The trace file written by the ingero.service unit.\n"
         ".TP\n~/.ingero/ingero.db\n"
         "The default trace file of an interactive \\fBingero trace\\fR.\n";
  out << ".SH EXIT STATUS\n"
         ".TP\n0\nSuccess.\n"
         ".TP\n1\nA runtime failure: an unreadable, damaged or foreign trace file, an SQL "
         "error, output that could not be written; \\fBcheck \\-\\-config\\fR of an invalid "
         "config file.\n"
         ".TP\n2\nBad arguments, contradictory flags, or an invalid config file given to a "
         "command that reads it.\n"
         ".TP\n3\nThe host cannot trace (check failed, no privilege).\n"
         ".PP\n\\fBingero trace \\-\\- COMMAND\\fR exits with the command's status instead "
         "(128 + N when a signal N ended it), as \\fBtime\\fR(1) does: 127 when the command "
         "is not found, 126 when it cannot be run.\n";
  out << ".SH SEE ALSO\n"
         "/usr/share/doc/ingero/ (cli.md, deploy.md, metrics.md, schema.md), "
         "\\fBsystemctl\\fR(1)\n";
  return out.str();
}

void add_man_page_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("man-page", "Print this CLI's manual page (roff), for packaging");
  cmd->group("");  // hidden: the build runs it; users read `man ingero`
  CLI::App* root = &app;
  cmd->callback([&ctx, root] {
    std::cout << render_man_page(*root, INGERO_VERSION);
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
