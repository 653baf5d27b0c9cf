#include "app/fleet_hook.h"

#include <iostream>

namespace ingero::app {

std::unique_ptr<fleet::Shipper> make_shipper(const std::string& db, const std::string& url,
                                             bool quiet) {
  auto ep = fleet::parse_endpoint(url);
  if (!ep) {
    std::cerr << "ingero trace: " << ep.error().message << "\n";
    return nullptr;
  }
  fleet::ShipperOptions o;
  if (!quiet) o.log = [](const std::string& m) { std::cerr << "\ningero: " << m << "\n"; };
  auto s = fleet::Shipper::create(db, *ep, o);
  if (!s) {
    std::cerr << "ingero trace: " << s.error().message << "\n";
    return nullptr;
  }
  if (!quiet)
    std::cerr << "ingero: shipping " << db << " to ClickHouse at " << ep->display() << "\n";
  return std::move(*s);
}

void finish_shipping(fleet::Shipper& shipper, const std::string& db, bool quiet,
                     std::chrono::steady_clock::time_point deadline) {
  // A server that cannot be reached twice in a row (half a second apart) is not waited for:
  // the exit took the whole --clickhouse-exit-timeout when nothing listened. A stalled one is.
  fleet::DrainReport r = shipper.drain(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now()),
                                       2);
  fleet::ShipTotals t = shipper.totals();
  if (r.caught_up) {
    if (!quiet)
      std::cerr << "ingero: shipped " << t.rows << " rows to ClickHouse at "
                << shipper.endpoint().display() << " (" << t.batches << " inserts, "
                << t.bytes_sent / 1024 << " KiB compressed from " << t.bytes_raw / 1024
                << " KiB); nothing left to ship\n";
    return;
  }
  std::cerr << "ingero: " << r.unshipped << " rows of " << db << " are not in ClickHouse at "
            << shipper.endpoint().display() << " yet (" << r.last_error
            << "); they ship on the next `ingero trace --db " << db
            << " --clickhouse ...` or with `ingero ship --db " << db << " --clickhouse "
            << shipper.endpoint().display() << "`\n";
}

}  // namespace ingero::app
