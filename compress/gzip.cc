#include "compress/gzip.h"

#include <zlib.h>

namespace ingero::compress {
namespace {

constexpr int kGzipWindow = 15 + 16;  // 32 KiB window, with the gzip header and trailer

}  // namespace

ingero::Result<std::string> gzip(std::string_view data, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return ingero::make_error("gzip: cannot initialise zlib");
  std::string out;
  out.resize(deflateBound(&z, uLong(data.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  int rc = deflate(&z, Z_FINISH);
  size_t n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END)
    return ingero::make_error("gzip: deflate failed (" + std::to_string(rc) + ")");
  out.resize(n);
  return out;
}

ingero::Result<std::string> gunzip(std::string_view data) {
  z_stream z{};
  if (inflateInit2(&z, kGzipWindow) != Z_OK)
    return ingero::make_error("gunzip: cannot initialise zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  std::string out;
  char buf[65536];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return ingero::make_error(rc == Z_BUF_ERROR
                                    ? "gunzip: truncated input"
                                    : "gunzip: corrupt input (" + std::to_string(rc) + ")");
    }
    out.append(buf, sizeof(buf) - z.avail_out);
  } while (rc != Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

}  // namespace ingero::compress
