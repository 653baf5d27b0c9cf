// Where a ClickHouse database is: parsed from the URLs users give on the command line.
//
//   http://HOST[:PORT]/DB, https://HOST[:PORT]/DB
//   clickhouse://HOST[:PORT]/DB, clickhouses://...     (the same over http / https)
//
// Every command that takes a ClickHouse URL (trace --clickhouse, ship, explain/query/export/mcp
// --source) accepts all four.
// An optional USER@ before the host selects the ClickHouse user. A password never comes from
// a URL (command lines are visible to every user of the host): it is read from the environment
// variable INGERO_CLICKHOUSE_PASSWORD. DB defaults to "ingero" and must be a plain identifier,
// because it is written into SQL.
#pragma once

#include <string>
#include <string_view>

#include "hal/result.h"

namespace ingero::fleet {

inline constexpr const char* kPasswordEnv = "INGERO_CLICKHOUSE_PASSWORD";

struct Endpoint {
  std::string base;      // "http://127.0.0.1:8123": scheme, host and port, no path
  std::string database;  // "ingero"
  std::string user;      // "" = the server's default user
  std::string password;  // from kPasswordEnv
  // The URL as people read it, without credentials: "http://127.0.0.1:8123/ingero".
  std::string display() const { return base + "/" + database; }
};

// Errors name the URL and what is wrong with it.
ingero::Result<Endpoint> parse_endpoint(std::string_view url);

// Whether `name` is a plain ClickHouse identifier ([A-Za-z_][A-Za-z0-9_]*).
bool is_identifier(std::string_view name);

}  // namespace ingero::fleet
