#include "app/config_file.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace ingero::app {
namespace {

// The subcommands a config file may configure: those add_config_option gave --config.
std::vector<const CLI::App*> config_tables(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const auto* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (s->get_option_no_throw("--config")) out.push_back(s);
  return out;
}

std::string scalar_text(const toml::node& v) {
  if (auto s = v.as_string()) return s->get();
  if (auto i = v.as_integer()) return std::to_string(i->get());
  if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
  if (auto f = v.as_floating_point()) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), f->get());
    return std::string(buf, r.ptr);
  }
  return "";
}

bool is_scalar(const toml::node& v) {
  return v.is_string() || v.is_integer() || v.is_boolean() || v.is_floating_point();
}

TomlKind kind_of(const toml::node& v) {
  if (v.is_integer()) return TomlKind::kInteger;
  if (v.is_floating_point()) return TomlKind::kFloat;
  if (v.is_boolean()) return TomlKind::kBoolean;
  return TomlKind::kString;
}

const char* kind_name(TomlKind k) {
  switch (k) {
    case TomlKind::kInteger:
      return "an integer";
    case TomlKind::kFloat:
      return "a float";
    case TomlKind::kBoolean:
      return "a boolean";
    case TomlKind::kString:
      break;
  }
  return "a string";
}

// The value's TOML type against the flag's: "" when it fits, else why not.
std::string type_problem(const CLI::Option& op, const ConfigEntry& e) {
  const std::string flag = "--" + op.get_lnames().front();
  std::string type = op.get_type_name();
  const bool duration = type.find(":DURATION") != std::string::npos;
  const bool size = type.find(":SIZE") != std::string::npos;
  type = type.substr(0, type.find(':'));
  for (size_t i = 0; i < e.kinds.size(); ++i) {
    const TomlKind k = e.kinds[i];
    const std::string given = std::string(kind_name(k)) + " (" +
                              (k == TomlKind::kString ? "\"" + e.values[i] + "\"" : e.values[i]) +
                              ")";
    if (op.get_expected_max() == 0) {  // an on/off flag
      if (k != TomlKind::kBoolean) return flag + " takes true or false, not " + given;
    } else if (type == "INT" || type == "UINT") {
      if (k != TomlKind::kInteger) return flag + " takes an integer, not " + given;
    } else if (type == "FLOAT") {
      if (k != TomlKind::kInteger && k != TomlKind::kFloat)
        return flag + " takes a number, not " + given;
    } else if (k != TomlKind::kString) {
      // A number is shown with a unit; anything else (`inflight_after = true` was told
      // "trues") is not.
      if (duration)
        return flag + " takes a duration with its unit, as a string (" +
               (k == TomlKind::kInteger || k == TomlKind::kFloat ? "\"" + e.values[i] + "s\", "
                                                                 : std::string()) +
               "\"5m\"), not " + given;
      if (size) return flag + " takes a size with its unit, as a string (\"500MiB\"), not " + given;
      return flag + " takes a string, not " + given;
    }
  }
  return "";
}

// One key of a subcommand table: its value becomes the strings a command line carries.
void read_entry(const std::string& table, const toml::key& k, const toml::node& v,
                ParsedConfig& out) {
  ConfigEntry e;
  e.table = table;
  e.key = std::string(k.str());
  e.line = int(k.source().begin.line);
  e.column = int(k.source().begin.column);
  auto problem = [&](std::string msg) {
    out.problems.push_back({e.line, e.column, table, e.key, std::move(msg)});
  };
  if (is_scalar(v)) {
    e.values.push_back(scalar_text(v));
    e.kinds.push_back(kind_of(v));
  } else if (auto arr = v.as_array()) {
    for (const auto& item : *arr) {
      if (!is_scalar(item)) return problem("array elements must be strings, numbers or booleans");
      e.values.push_back(scalar_text(item));
      e.kinds.push_back(kind_of(item));
    }
  } else if (v.is_table()) {
    return problem("a nested table is not a flag value");
  } else {
    return problem("dates and times are not flag values: write them as a quoted string");
  }
  out.entries.push_back(std::move(e));
}

// Feeds a fixed list of items to CLI11's config machinery (check_config's trial parse).
class FixedItems final : public CLI::Config {
 public:
  explicit FixedItems(std::vector<CLI::ConfigItem> items) : items_(std::move(items)) {}
  std::vector<CLI::ConfigItem> from_config(std::istream&) const override { return items_; }
  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

 private:
  std::vector<CLI::ConfigItem> items_;
};

std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (auto* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->get_name() == name) return s;
  return nullptr;
}

// The option a key names, or why it names none.
const CLI::Option* resolve_key(CLI::App& sub, const ConfigEntry& e, std::string* why) {
  if (e.key.find('-') != std::string::npos) {
    std::string fixed = e.key;
    std::replace(fixed.begin(), fixed.end(), '-', '_');
    *why = "unknown key: write flags with '_' for '-' (" + fixed + ")";
    return nullptr;
  }
  const CLI::Option* op = sub.get_option_no_throw("--" + dashed(e.key));
  if (!op || op == sub.get_help_ptr() || op == sub.get_help_all_ptr()) {
    *why = "unknown key: `ingero " + sub.get_name() + "` has no flag --" + dashed(e.key) +
           " (keys are its long flags with '_' for '-')";
    return nullptr;
  }
  if (!op->get_configurable()) {
    *why = "--" + dashed(e.key) + " cannot be set in a config file";
    return nullptr;
  }
  return op;
}

// Applies one entry alone to a fresh CLI tree: the flag's own conversion and validators.
std::string trial_parse(const CliSchema& schema, const ConfigEntry& e) {
  auto app = schema();
  CLI::ConfigItem item;
  item.parents = {e.table};
  item.name = dashed(e.key);
  item.inputs = e.values;
  app->config_formatter(std::make_shared<FixedItems>(std::vector<CLI::ConfigItem>{item}));
  app->allow_config_extras(CLI::config_extras_mode::error);
  std::istringstream none;
  try {
    app->parse_from_stream(none);
  } catch (const CLI::Error& err) {
    return err.what();
  }
  return "";
}

// `text` as the TOML value its flag takes (as a string when it does not convert).
void push_typed(toml::array& arr, const CLI::Option& op, const std::string& text) {
  std::string type = op.get_type_name();
  type = type.substr(0, type.find(':'));
  if (op.get_expected_max() == 0) {
    if (text == "true" || text == "false") return arr.push_back(text == "true");
  } else if (type == "INT" || type == "UINT") {
    int64_t v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return arr.push_back(v);
  } else if (type == "FLOAT") {
    double v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return arr.push_back(v);
  }
  arr.push_back(text);
}

// The table check of each table whose entries had no problem of their own, on a tree where
// the table's entries alone are parsed: its problem stands at the line of the last entry the
// message names (the flags it names), else of the table's first.
void check_tables(const ParsedConfig& parsed, const CliSchema& schema,
                  std::vector<ConfigProblem>& out) {
  std::map<std::string, std::vector<const ConfigEntry*>> tables;
  for (const auto& e : parsed.entries) tables[e.table].push_back(&e);
  for (const auto& [name, entries] : tables) {
    bool clean = std::none_of(out.begin(), out.end(), [&](const ConfigProblem& p) {
      return p.table == name || p.line <= 0;
    });
    if (!clean) continue;
    auto app = schema();
    auto fmt = std::dynamic_pointer_cast<TomlConfig>(app->get_config_formatter());
    const TableCheck* check = fmt ? fmt->table_check(name) : nullptr;
    CLI::App* sub = find_subcommand(*app, name);
    if (!check || !sub) continue;
    TableCheck keep = *check;  // the formatter is replaced below
    std::vector<CLI::ConfigItem> items;
    for (const ConfigEntry* e : entries) {
      CLI::ConfigItem item;
      item.parents = {name};
      item.name = dashed(e->key);
      item.inputs = e->values;
      items.push_back(std::move(item));
    }
    app->config_formatter(std::make_shared<FixedItems>(std::move(items)));
    app->allow_config_extras(CLI::config_extras_mode::error);
    std::istringstream none;
    try {
      app->parse_from_stream(none);
    } catch (const CLI::Error&) {
      continue;  // each entry parsed alone; together they are for the command to refuse
    }
    auto why = keep(*sub);
    if (!why) continue;
    const ConfigEntry* at = entries.front();
    for (const ConfigEntry* e : entries)
      if (why->find("--" + dashed(e->key)) != std::string::npos) at = e;
    out.push_back({at->line, at->column, name, at->key, *why});
  }
}

}  // namespace

ParsedConfig parse_config_text(std::string_view text, const std::string& source) {
  ParsedConfig out;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    out.problems.push_back({int(err.source().begin.line), int(err.source().begin.column), "", "",
                            std::string(err.description())});
    return out;
  }
  for (const auto& [k, v] : root) {
    int line = int(k.source().begin.line), col = int(k.source().begin.column);
    const auto* table = v.as_table();
    if (!table) {
      out.problems.push_back({line, col, "", std::string(k.str()),
                              "key outside a table: put it under a [table] such as [trace]"});
      continue;
    }
    for (const auto& [kk, vv] : *table) read_entry(std::string(k.str()), kk, vv, out);
  }
  auto by_line = [](const auto& a, const auto& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  };
  std::stable_sort(out.entries.begin(), out.entries.end(), by_line);
  std::stable_sort(out.problems.begin(), out.problems.end(), by_line);
  return out;
}

namespace {

// At most kMaxConfigBytes of `in`; nullopt when there is more.
std::optional<std::string> read_bounded(std::istream& in) {
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxConfigBytes) return std::nullopt;
  return text;
}

std::string too_large(const std::string& path) {
  return path + " is larger than " + std::to_string(kMaxConfigBytes >> 20) +
         " MiB: a config file is a few KiB (is it the right file?)";
}

// Why `path` cannot be a config file, or "" where it can be read: a directory opens and reads
// as empty, which is no empty, valid file. (A pipe is read as it comes: `--config <(...)`.)
std::string unreadable(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "cannot read " + path + ": " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return path + " is a directory, not a config file";
  return "";
}

}  // namespace

ParsedConfig parse_config_file(const std::string& path) {
  ParsedConfig out;
  auto fail = [&](std::string why) {
    out.problems.push_back({0, 0, "", "", std::move(why)});
    return out;
  };
  if (std::string why = unreadable(path); !why.empty()) return fail(why);
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail("cannot read " + path + ": " + std::strerror(errno));
  auto text = read_bounded(f);
  if (f.bad()) return fail("cannot read " + path + ": " + std::strerror(errno));
  if (!text) return fail(too_large(path));
  return parse_config_text(*text, path);
}

std::vector<ConfigProblem> check_config(const ParsedConfig& parsed, const CliSchema& schema) {
  std::vector<ConfigProblem> out = parsed.problems;
  auto app = schema();
  std::map<const CLI::Option*, const ConfigEntry*> seen;
  std::map<std::string, bool> bad_tables;
  for (const auto& e : parsed.entries) {
    auto problem = [&](std::string msg) {
      out.push_back({e.line, e.column, e.table, e.key, std::move(msg)});
    };
    CLI::App* sub = find_subcommand(*app, e.table);
    if (sub && !sub->get_option_no_throw("--config")) sub = nullptr;
    if (!sub) {
      if (!bad_tables[e.table]) {
        std::string known;
        for (const auto* t : config_tables(*app))
          known += (known.empty() ? "[" : ", [") + t->get_name() + "]";
        problem("unknown table [" + e.table + "]: a config file holds " + known);
      }
      bad_tables[e.table] = true;
      continue;
    }
    std::string why;
    const CLI::Option* op = resolve_key(*sub, e, &why);
    if (!op) {
      problem(why);
      continue;
    }
    if (auto it = seen.find(op); it != seen.end()) {
      problem("sets --" + op->get_lnames().front() + " again (already set by '" + it->second->key +
              "' on line " + std::to_string(it->second->line) + ")");
      continue;
    }
    seen[op] = &e;
    if (std::string err = type_problem(*op, e); !err.empty()) {
      problem("wrong type: " + err);
      continue;
    }
    if (std::string err = trial_parse(schema, e); !err.empty()) problem("bad value: " + err);
  }
  check_tables(parsed, schema, out);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return out;
}

std::string format_problem(const std::string& file, const ConfigProblem& p) {
  std::string s = file;
  if (p.line > 0) s += ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
  s += ": ";
  if (!p.table.empty()) s += "[" + p.table + "] ";
  if (!p.key.empty()) s += p.key + ": ";
  return s + p.message;
}

std::vector<CLI::ConfigItem> TomlConfig::from_config(std::istream& input) const {
  auto text = read_bounded(input);
  if (input.bad()) throw CLI::ConfigError("cannot read " + source_ + ": " + std::strerror(errno));
  if (!text) throw CLI::ConfigError(too_large(source_));
  ParsedConfig parsed = parse_config_text(*text, source_);
  auto problems = check_config(parsed, schema_);
  if (!problems.empty()) {
    std::string msg = std::to_string(problems.size()) + " problem" +
                      (problems.size() == 1 ? "" : "s") + " in config file " + source_ + ":";
    for (const auto& p : problems) msg += "\n  " + format_problem(source_, p);
    throw CLI::ConfigError(msg);
  }
  std::vector<CLI::ConfigItem> items;
  for (const auto& e : parsed.entries) {
    CLI::ConfigItem item;
    item.parents = {e.table};
    item.name = dashed(e.key);
    item.inputs = e.values;
    items.push_back(std::move(item));
  }
  return items;
}

std::string TomlConfig::to_config(const CLI::App* app, bool default_also, bool, std::string) const {
  toml::table root;
  for (const CLI::App* sub : config_tables(*app)) {
    toml::table t;
    for (const auto* op : sub->get_options()) {
      if (op->get_lnames().empty() || !op->get_configurable() || op == sub->get_help_ptr() ||
          op == sub->get_help_all_ptr())
        continue;
      std::vector<std::string> vals = op->results();
      if (vals.empty() && default_also && !op->get_default_str().empty())
        vals = {op->get_default_str()};
      if (vals.empty()) continue;
      std::string key = op->get_lnames().front();
      std::replace(key.begin(), key.end(), '-', '_');
      // Each value with the TOML type check_config() wants for the flag.
      toml::array arr;
      for (auto& v : vals) push_typed(arr, *op, v);
      if (arr.size() == 1)
        arr.for_each([&](auto&& el) { t.insert(key, el); });
      else
        t.insert(key, std::move(arr));
    }
    if (!t.empty()) root.insert(sub->get_name(), std::move(t));
  }
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

void add_config_option(CLI::App& root, CLI::App& sub, CliSchema schema, TableCheck check) {
  // One formatter per root, shared by every subcommand that takes --config.
  auto fmt = std::dynamic_pointer_cast<TomlConfig>(root.get_config_formatter());
  if (!fmt) {
    fmt = std::make_shared<TomlConfig>(std::move(schema));
    root.config_formatter(fmt);
  }
  if (check) fmt->add_table_check(sub.get_name(), std::move(check));
  root.allow_config_extras(CLI::config_extras_mode::error);
  if (!root.get_config_ptr())
    root.set_config("--config", "", "Read flags from a TOML config file")->group("");
  CLI::Option* root_opt = root.get_config_ptr();
  sub.add_option(
         "--config",
         [root_opt, fmt](const CLI::results_t& r) {
           fmt->set_source(r.front());
           root_opt->clear();
           root_opt->add_result(r.front());
           return true;
         },
         "Read flags from this TOML file's [" + sub.get_name() +
             "] table (keys: the long flags with _ for -); flags given here win. See "
             "docs/deploy.md; `ingero check --config FILE` validates it")
      ->type_name("FILE")
      ->check(CLI::Validator(CLI::ExistingFile).description(""))
      ->trigger_on_parse()
      ->configurable(false);
}

}  // namespace ingero::app
