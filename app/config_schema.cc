#include <memory>

#include "app/commands.h"

namespace ingero::app {
namespace {

// The callbacks of add_*_command capture their Context by reference: it lives as long as
// the tree. They never run here (see config_file.h).
struct SchemaApp : CLI::App {
  Context ctx;
};

}  // namespace

std::unique_ptr<CLI::App> config_cli_schema() {
  auto app = std::make_unique<SchemaApp>();
  add_trace_command(*app, app->ctx);
  return app;
}

}  // namespace ingero::app
