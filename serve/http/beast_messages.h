// Internal: translation between Beast's messages and the library's Request/Response heads.
// Pure: no I/O.
#pragma once

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "serve/http/message.h"

namespace ingero::serve::http::detail {

// Method, target (split into path and query), version and header fields of a parsed head.
Request request_head(const boost::beast::http::request_header<>& h);

// A field a response may carry: a token name and a value without CR, LF or NUL.
bool valid_field(std::string_view name, std::string_view value);

// Copies `headers` into `out`, skipping the framing fields the server sets (Content-Length,
// Transfer-Encoding, Connection) and invalid ones (each reported to `dropped`); then `extra`
// where the handler did not set the same field; then Cache-Control: no-store and
// X-Content-Type-Options: nosniff unless set.
void response_fields(boost::beast::http::fields& out, const Headers& headers,
                     const std::vector<std::pair<std::string, std::string>>& extra,
                     const std::function<void(const std::string& name)>& dropped);

}  // namespace ingero::serve::http::detail
