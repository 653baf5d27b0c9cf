// The agent's configuration file (/etc/ingero/ingero.toml): TOML, parsed by toml++.
//
// One table per subcommand whose flags it may set ([trace]); a key is the flag's long name
// with '_' for '-' (ringbuf_mb = 64 is --ringbuf-mb 64). Nothing here knows any flag: keys
// are looked up in the subcommand's CLI11 definition and values go through that flag's own
// parser and validators, so a flag added to `trace` is settable in the file with no code.
//
// Applying a file is CLI11's config mechanism: TomlConfig is the root App's config
// formatter and turns the file into CLI::ConfigItems; CLI11 fills each flag the command
// line left unset (flags override the file) and rejects keys no flag owns. Before handing
// the items over, TomlConfig checks the whole file and throws one CLI::ConfigError naming
// every problem with its line, the same report `ingero check --config FILE` prints.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::app {

// Builds a throw-away CLI tree holding the subcommands a config file may configure (their
// options only; callbacks are never run). Used to validate values without side effects.
using CliSchema = std::function<std::unique_ptr<CLI::App>()>;

// The TOML type of a value as written: check_config() holds it against the flag's type.
enum class TomlKind { kString, kInteger, kFloat, kBoolean };

// One key = value of the file, converted to the strings a command line would carry
// (true/false, integers, floats, strings; an array gives one string per element).
struct ConfigEntry {
  std::string table;  // "trace"
  std::string key;    // as written: "ringbuf_mb"
  std::vector<std::string> values;
  std::vector<TomlKind> kinds;  // of each value
  int line = 0, column = 0;     // of the key, 1-based
};

// A config file is a few KiB; a larger one (`--config /dev/zero`) is refused after reading
// this much, never read to its end.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

struct ConfigProblem {
  int line = 0, column = 0;  // 0: the file as a whole
  std::string table, key;    // empty where the problem is not one key's
  std::string message;
};

struct ParsedConfig {
  std::vector<ConfigEntry> entries;
  std::vector<ConfigProblem> problems;  // syntax and structure: not a CLI question
};

// Parses TOML text. A syntax error is one problem (toml++ stops there) and no entries.
// Keys outside a table, nested tables and date/time values are problems; the rest of the
// file is still read.
ParsedConfig parse_config_text(std::string_view text, const std::string& source);
// Reads and parses a file; an unreadable file is one problem naming the path and errno, and
// so is one over kMaxConfigBytes.
ParsedConfig parse_config_file(const std::string& path);

// Checks every entry against the CLI: the table must name a subcommand that takes --config
// (add_config_option), the key one of its long flags (not --config, --help or a positional), at
// most one key per flag, the value's TOML type must be the flag's (true/false for an on/off
// flag, an integer for a count, a string for a duration, size, name or path: `stack = "yes"`
// and `duration = 12` are refused, naming the key), and the value must pass the flag's own
// conversion and validators (ranges: `flush_ms = -1`). Returns every problem, in file order,
// after the parse problems.
std::vector<ConfigProblem> check_config(const ParsedConfig& parsed, const CliSchema& schema);

// "FILE:LINE:COL: [trace] key: message"
std::string format_problem(const std::string& file, const ConfigProblem& p);

// A check of a table's settings together, on a tree where they alone are parsed: flags that
// contradict each other, or one that does nothing without another. Why, or nullopt.
using TableCheck = std::function<std::optional<std::string>(const CLI::App& table)>;

class TomlConfig final : public CLI::Config {
 public:
  explicit TomlConfig(CliSchema schema) : schema_(std::move(schema)) {}
  void set_source(std::string path) { source_ = std::move(path); }
  void add_table_check(const std::string& table, TableCheck check) {
    checks_[table] = std::move(check);
  }
  const TableCheck* table_check(const std::string& table) const {
    auto it = checks_.find(table);
    return it == checks_.end() ? nullptr : &it->second;
  }
  // Throws CLI::ConfigError listing every problem of the file.
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
  // Writes the flags of the configurable subcommands that have a value, as TOML.
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;

 private:
  CliSchema schema_;
  std::string source_ = "config file";
  std::map<std::string, TableCheck> checks_;
};

// Adds `--config FILE` to `sub`, a subcommand of `root`: the file's [NAME] table supplies
// any of sub's flags the command line does not give. Installs TomlConfig as root's config
// formatter, with a hidden root-level --config that sub's option forwards to (CLI11 reads
// config files at the root only). `check`, where given, judges the table's settings together
// (check_config).
void add_config_option(CLI::App& root, CLI::App& sub, CliSchema schema, TableCheck check = {});

}  // namespace ingero::app
