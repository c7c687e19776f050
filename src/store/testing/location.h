#pragma once

#include <memory>
#include <string>

#include "store/pg_connection.h"
#include "store/sqlite_connection.h"

namespace dsh::store::testing {

// A factory for a TestBackend::Location(): a SQLite file's path, or
// "postgres:" and a conninfo. For the child processes of crash tests, which
// get the location on their command line.
inline std::unique_ptr<ConnectionFactory> FactoryForLocation(const std::string& location) {
  if (location.starts_with("postgres:")) return std::make_unique<PgConnectionFactory>(PgOptions{location.substr(9)});
  return std::make_unique<SqliteConnectionFactory>(SqliteOptions{.path = location});
}

}  // namespace dsh::store::testing
